"""Hand-written schedules of every built-in operator, built with gcc and checked against numpy.

Each case in :data:`schedule_cases.CASES` is one recipe (default, tiled + reordered, vectorized,
unrolled, parallel, compute_at, cache_write, cache_read packing, inlined padding, rfactor, nparts
splits, auto-unroll pragma, vector widths) on one shape, dividing the tile sizes or not.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from schedule_cases import CASES, RECIPES, SHAPES, Case, check_against_reference, tolerances

import autosched as asc
from autosched.ops.schedules import default_schedule, has_hand_written

pytestmark = pytest.mark.requires("gcc")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_schedule_matches_reference(case: Case) -> None:
    wl, s = case.schedule()
    check_against_reference(wl, s, case.recipe.target)


BUILTIN_OPERATORS = {"matmul", "matmul_lowp", "batch_matmul", "dense", "conv2d_nchw", "conv2d_nhwc",
                     "depthwise_conv2d_nchw", "max_pool2d", "avg_pool2d", "softmax", "relu", "add",
                     # the network workloads of autosched.graph (their recipes: graph_schedule_cases)
                     "fused_conv2d", "fused_conv2d_packed", "fused_conv2d_nchwc",
                     "fused_depthwise_nchwc",                      "fused_dense", "fused_batch_matmul",
                     "fused_elementwise",
                     "global_avg_pool2d", "transpose", "broadcast_to", "pad", "layer_norm", "softmax_axis",
                     "fused_conv", "fused_conv_transpose", "pool", "reduce", "slice", "gather",
                     "index_to_float", "instance_norm", "resize", "fused_dense_packed", "lstm_state",
                     "lstm_hidden"}


@pytest.mark.parametrize(
    ("args", "target"),
    [((1, 5, 13, 11, 3, 2, 1), "c -num-threads=2"), ((2, 3, 9, 20, 2, 2, 0), "c -num-threads=1"),
     ((1, 4, 8, 8, 3, 1, 1), "c -num-threads=1")],
    ids=["resnet-like-3x3s2-pad", "2x2s2-no-pad", "3x3s1"],
)
def test_the_default_of_max_pool_is_hand_written(args: tuple[int, ...], target: str) -> None:
    wl = asc.get_workload("max_pool2d", args)
    schedule, how = default_schedule(wl, target)
    assert how == "autosched.ops.schedules.max_pool2d_cpu" and has_hand_written(wl)
    annotations = [getattr(st, "annotation", "") for st in schedule.steps]
    assert "vectorize" in annotations and ("parallel" in annotations) == ("threads=2" in target)
    check_against_reference(wl, schedule, target, seed=4)  # padded with the lowest value, not 0


def test_every_builtin_operator_has_schedules() -> None:
    """Every built-in workload is covered, each by several recipes and shapes."""
    registered = {w.name for w in asc.list_workloads()}
    # other test modules may register their own workloads in this process: ignore "test*" names
    builtin = {n for n in registered if not n.startswith("test")}
    assert builtin == BUILTIN_OPERATORS, f"new or missing built-in operators: {builtin ^ BUILTIN_OPERATORS}"
    covered = {r.op for r in RECIPES}
    assert builtin <= covered, f"operators without schedules: {sorted(builtin - covered)}"
    for op in builtin:
        assert len([r for r in RECIPES if r.op == op]) >= 5, op
        assert len(SHAPES[op]) >= 2, op


def test_case_ids_are_unique() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("seed", [1, 2])
def test_same_kernel_other_inputs(seed: int) -> None:
    """A kernel is a function of its inputs, not of the inputs it first ran on."""
    case = next(c for c in CASES if c.id == "matmul-odd-cache_write_and_pack")
    wl, s = case.schedule()
    check_against_reference(wl, s, case.recipe.target, seed=seed)


def test_te_style_user_matmul() -> None:
    """The DESIGN example: a user-written matmul (not a registered workload), tiled, vectorized,
    parallel, on a shape that does not divide the tiles."""
    M, N, K = 37, 45, 29
    A = asc.placeholder((M, K), name="A")
    B = asc.placeholder((K, N), name="B")
    k = asc.reduce_axis(K, name="k")
    C = asc.compute((M, N), lambda i, j: asc.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = asc.create_schedule(C.op)
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 8, 16)
    s[C].vectorize(ji)
    s[C].parallel(io)
    f = asc.build(s, [A, B, C], target="c -num-threads=2")
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    b = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    c = np.full((M, N), np.nan, np.float32)
    f(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


def test_user_stencil_with_if_then_else_and_max_min() -> None:
    """A user DAG with a guarded read, a max and a min reduction, split and vectorized."""
    n = 23
    X = asc.placeholder((n,), name="X")
    Y = asc.compute((n,), lambda i: asc.if_then_else(i > 0, X[i] - X[i - 1], X[i]), name="Y")
    r = asc.reduce_axis(5, name="r")
    Z = asc.compute((n - 4,), lambda i: asc.max(Y[i + r], axis=r), name="Z")
    r2 = asc.reduce_axis(5, name="r2")
    W = asc.compute((n - 4,), lambda i: asc.min(Y[i + r2], axis=r2), name="W")
    s = asc.create_schedule([Z, W])
    zo, zi = s[Z].split(s[Z].op.axis[0], factor=4)
    s[Z].vectorize(zi)
    s[W].unroll(s[W].op.reduce_axis[0])
    f = asc.build(s, [X, Z, W])
    x = np.random.default_rng(3).uniform(-1, 1, n).astype(np.float32)
    z = np.full(n - 4, np.nan, np.float32)
    w = np.full(n - 4, np.nan, np.float32)
    f(x, z, w)
    y = np.concatenate([x[:1], np.diff(x)])
    win = np.lib.stride_tricks.sliding_window_view(y, 5)
    np.testing.assert_allclose(z, win.max(axis=1), rtol=1e-6)
    np.testing.assert_allclose(w, win.min(axis=1), rtol=1e-6)


def test_kernel_time_runs_the_kernel() -> None:
    """``time`` runs the kernel on the arrays given (its output is the reference afterwards) and
    reports a positive, finite time for each repeat (a timer that never ran would report 0)."""
    case = next(c for c in CASES if c.id == "matmul-even-parallel_fused")
    wl, s = case.schedule()
    f = asc.build(s, wl.tensors(), target=case.recipe.target)
    inputs = wl.random_inputs(0)
    out = np.zeros(wl.outputs[0].shape, np.float32)
    times = f.time(*inputs, out, number=2, repeat=2)
    assert len(times) == 2 and all(0 < t < math.inf for t in times), times
    np.testing.assert_allclose(out, wl.reference(*inputs)[0], **tolerances(wl))


def test_tvm_x86_softmax_schedule() -> None:
    """TVM's x86 softmax schedule (topi): every producer computed at the output's row loop.

    expval has two consumers (expsum and softmax), both inside that loop; TVM accepts this.
    """
    wl = asc.get_workload("softmax", (7, 13))
    s = asc.create_schedule(wl.outputs)
    OUT = s[wl.outputs[0]]
    i, j = OUT.op.axis
    s.stages["expval"].compute_at(OUT, i)
    s.stages["expsum"].compute_at(OUT, i)
    s.stages["maxelem"].compute_at(OUT, i)
    OUT.parallel(i)
    check_against_reference(wl, s, "c -num-threads=2")


def _conv_pad_at_unrolled(s: asc.Schedule, wl: asc.Workload) -> None:
    C = s[wl.outputs[0]]
    n, f, y, x = C.op.axis
    yo, yi = C.split(y, factor=2)
    C.reorder(n, yo, f, yi, x)
    s.stages["pad"].compute_at(C, yi)
    C.unroll(yi)


def _matmul_cache_write_at_unrolled(s: asc.Schedule, wl: asc.Workload) -> None:
    (Ct,) = wl.outputs
    CC = s.cache_write(Ct, "local")
    C = s[Ct]
    i, j = C.op.axis
    io, jo, ii, ji = C.tile(i, j, 2, 4)
    s[CC].compute_at(C, ii)
    C.unroll(ii)


def _softmax_auto_unroll_over_attached(s: asc.Schedule, wl: asc.Workload) -> None:
    OUT = s[wl.outputs[0]]
    i, j = OUT.op.axis
    io, ii = OUT.split(i, factor=2)
    s.stages["expval"].compute_inline()
    s.stages["expsum"].compute_at(OUT, ii)
    OUT.pragma(io, "auto_unroll_max_step", 512)


UNROLLED_ATTACH = {
    "conv_pad_at_unrolled_loop": ("conv2d_nchw", (1, 2, 6, 6, 3, 3, 3, 1, 1, 1), _conv_pad_at_unrolled),
    "matmul_cache_write_at_unrolled_loop": ("matmul", (4, 8, 5), _matmul_cache_write_at_unrolled),
    "softmax_auto_unroll_over_attached": ("softmax", (4, 6), _softmax_auto_unroll_over_attached),
}


@pytest.mark.parametrize("name", list(UNROLLED_ATTACH))
def test_compute_at_inside_unrolled_loop(name: str) -> None:
    """A stage computed inside a loop that is unrolled: each unrolled copy has its own buffer."""
    op, args, apply = UNROLLED_ATTACH[name]
    wl = asc.get_workload(op, args)
    s = asc.create_schedule(wl.outputs)
    apply(s, wl)
    check_against_reference(wl, s)


UNLOAD_SCRIPT = """
import gc
import numpy as np
import autosched as asc

for n in range(10):
    A = asc.placeholder((64,), name="A")
    B = asc.compute((64,), lambda i: A[i] + float(n), name="B")
    s = asc.create_schedule(B)
    s[B].parallel(s[B].op.axis[0])
    f = asc.build(s, [A, B], target="c -num-threads=2")
    a = np.ones(64, np.float32)
    b = np.zeros(64, np.float32)
    f(a, b)
    assert (b == 1 + n).all()
    del f
    gc.collect()
print("done")
"""


def _run_unload_script(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    root = str(Path(asc.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    env["AUTOSCHED_CACHE"] = str(tmp_path / "cache")
    env.pop("LD_PRELOAD", None)
    env["OMP_WAIT_POLICY"] = "active"  # idle OpenMP threads keep running: a crash shows at once
    return subprocess.run([sys.executable, "-X", "faulthandler", "-c", UNLOAD_SCRIPT], env=env,
                          capture_output=True, text=True, timeout=300)


def test_dropping_parallel_kernels_does_not_crash(tmp_path: Path) -> None:
    """Build, run and drop OpenMP kernels one after another (what a tuner does), in a child process
    so that a crash fails this test only."""
    proc = _run_unload_script(tmp_path)
    assert "done" in proc.stdout, (
        f"child exited with {proc.returncode} before the end\nstdout:\n{proc.stdout}\n"
        f"stderr:\n{proc.stderr[-2000:]}")


def test_process_with_parallel_kernels_exits_cleanly(tmp_path: Path) -> None:
    """A program that ran OpenMP kernels exits with status 0 (no crash at interpreter shutdown,
    even with OMP_WAIT_POLICY=active, where OpenMP's idle threads keep spinning)."""
    proc = _run_unload_script(tmp_path)
    assert proc.returncode == 0, (
        f"child exited with {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-2000:]}")
