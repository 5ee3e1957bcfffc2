"""Measurement: LocalBuilder and LocalRunner with the real compiler and real worker processes.

Deliberately broken kernels (written by hand, with the emitted timing harness) each cost one
candidate: a segfault, an abort or a hang is one error, and the next candidate measures fine.
"""

from __future__ import annotations

import random
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.emit_c import HEADER, timing_entries
from autosched.runner import (
    BuildResult,
    CompilerNotFound,
    LocalBuilder,
    LocalRunner,
    MeasureErrorNo,
    MeasureInput,
    MeasureOption,
    compile_shared,
    load_kernel,
    measure_batch,
)
from autosched.runner.measure_worker import compare
from autosched.schedule.steps import SplitStep
from autosched.space.generated import SketchSpace
from autosched.target import Target
from autosched.task import Task

pytestmark = pytest.mark.requires("gcc")

Err = MeasureErrorNo
N = 64


@asc.workload("test_measure.vadd", override=True)
def vadd(n: int) -> list[asc.Tensor]:
    """C = A + B: a user workload, unknown to the spawned worker's registry."""
    A = asc.placeholder((n,), name="A")
    B = asc.placeholder((n,), name="B")
    return [A, B, asc.compute((n,), lambda i: A[i] + B[i], name="C")]


VADD = Task("test_measure.vadd", (N,), "c -num-threads=1")
LOOP = f"for (int i = 0; i < {N}; ++i)"
BODIES = {
    "good": f"{LOOP} C[i] = A[i] + B[i];",
    "segfault": "*(volatile float *)(uintptr_t)16 = A[0];",
    "abort": "abort();",
    "hang": "volatile int spin = 1;\n  while (spin) {}",
    "crash_while_timing": f"static int calls;\n  if (++calls > 1) abort();\n  {LOOP} C[i] = A[i] + B[i];",
    "fails": "return -1;",
    "wrong": f"{LOOP} C[i] = A[i] - B[i];",
    "partial": f"for (int i = 0; i < {N // 2}; ++i) C[i] = A[i] + B[i];",
    "writes_input": f"{LOOP} C[i] = A[i] + B[i];\n  A[3] = 7.0f;",
    "count": f"static int calls;\n  ++calls;\n  {LOOP} C[i] = (float)calls + 0.0f * (A[i] + B[i]);",
}


def kernel_source(name: str, body: str, harness: bool = True) -> str:
    """A hand-written kernel with the emitted kernels' ABI (and their timing harness)."""
    params = [("float", "A"), ("float", "B"), ("float", "C")]
    text = f"{HEADER}\nint {name}(float* A, float* B, float* C) {{\n  {body}\n  return 0;\n}}\n\n"
    return text + (timing_entries(name, params) if harness else "")


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    cache = tmp_path_factory.mktemp("broken-kernels")
    target = Target.parse("c -num-threads=1")
    with ThreadPoolExecutor(4) as pool:
        sources = [kernel_source(f"k_{name}", body) for name, body in BODIES.items()]
        paths = pool.map(lambda src: compile_shared(src, target, cache_dir=cache), sources)
        return {name: str(path) for name, path in zip(BODIES, paths, strict=True)}


def built(libs: dict[str, str], name: str) -> BuildResult:
    return BuildResult(libs[name], f"k_{name}", tuple(VADD.arg_specs()), time_cost=0.01)


FAST = MeasureOption(repeat=2, min_repeat_ms=1, run_timeout=1.5)


# -- LocalBuilder ------------------------------------------------------------------------------


def test_build_and_run_sampled_programs(tmp_path: Path) -> None:
    task = Task("matmul", (32, 48, 40), "c -num-threads=1")
    space = SketchSpace(task.workload, task.target)
    rng = random.Random(0)
    inputs = [MeasureInput(task, space.steps(space.sample(rng))) for _ in range(3)]
    inputs.append(inputs[0])  # duplicate sources compile once
    option = MeasureOption(repeat=4, min_repeat_ms=2)
    with LocalBuilder(n_parallel=2, cache_dir=tmp_path) as builder, LocalRunner(option) as runner:
        builds = builder.build(inputs)
        assert [b.error_no for b in builds] == [Err.NO_ERROR] * 4, [b.error_msg for b in builds]
        assert builds[3].lib_path == builds[0].lib_path
        assert len(list(tmp_path.glob("*.so"))) == len({b.lib_path for b in builds})
        assert all(b.time_cost > 0 and b.func_name == task.func_name for b in builds)
        assert builds[0].arg_specs == tuple(task.arg_specs())
        start = time.time()
        results = measure_batch(builder, runner, inputs[:2])  # cached: no compile this time
    assert all(r.ok and r.error_msg == "" for r in results), [r.error_msg for r in results]
    for r in results:
        assert len(r.costs) == 4 and all(0 < c < 0.1 for c in r.costs)
        assert r.all_cost > 4 * 2e-3 and start <= r.timestamp <= time.time()


def test_instantiation_error_names_the_step() -> None:
    task = Task("matmul", (32, 48, 40), "c -num-threads=1")
    bad = MeasureInput(task, (SplitStep("C", "nope", 4, None),))
    with LocalBuilder() as builder, LocalRunner() as runner:
        (b,) = builder.build([bad])
        assert b.error_no == Err.INSTANTIATION_ERROR and b.lib_path is None
        assert re.match(r"ScheduleError: .*'nope'", b.error_msg), b.error_msg
        (r,) = runner.run([bad], [b])  # passed straight through: the worker never starts
    assert r.error_no == Err.INSTANTIATION_ERROR and r.error_msg == b.error_msg and r.costs == ()
    assert not r.ok and r.median == float("inf")


def test_compile_error_keeps_the_compiler_message(tmp_path: Path) -> None:
    task = Task("matmul", (8, 8, 8), "c -num-threads=1 -cflags='-include no_such_header.h'")
    with LocalBuilder(cache_dir=tmp_path) as builder:
        (b,) = builder.build([MeasureInput(task, ())])
    assert b.error_no == Err.COMPILE_ERROR and b.lib_path is None
    assert "no_such_header.h" in b.error_msg and "compile failed: gcc" in b.error_msg


def test_build_timeout(tmp_path: Path) -> None:
    task = Task("matmul", (64, 64, 64), "c -num-threads=1")
    with LocalBuilder(timeout=0.001, cache_dir=tmp_path) as builder:
        (b,) = builder.build([MeasureInput(task, ())])
    assert b.error_no == Err.BUILD_TIMEOUT and "killed after 0.001 s" in b.error_msg
    assert not list(tmp_path.glob("*.so"))


def test_missing_compiler_ends_the_run(tmp_path: Path) -> None:
    task = Task("matmul", (8, 8, 8), "c -cc=no-such-cc -num-threads=1")
    with LocalBuilder(cache_dir=tmp_path) as builder, pytest.raises(CompilerNotFound, match="install"):
        builder.build([MeasureInput(task, ())])


# -- LocalRunner: broken kernels cost one candidate --------------------------------------------


BROKEN = {
    "segfault": (Err.RUNTIME_ERROR, "worker died: SIGSEGV"),
    "abort": (Err.RUNTIME_ERROR, "worker died: SIGABRT"),
    "crash_while_timing": (Err.RUNTIME_ERROR, "worker died: SIGABRT"),
    "hang": (Err.RUN_TIMEOUT, r"no result within 1.5 s; worker killed"),
    "fails": (Err.RUNTIME_ERROR, "could not allocate"),
    "wrong": (Err.WRONG_ANSWER, r"output C: \d+ of 64 elements differ; max abs error .* at \(\d+,\)"),
    "partial": (Err.WRONG_ANSWER, r"output C: 32 of 64 elements differ, 32 are NaN .* first at \(32,\)"),
    "writes_input": (Err.WRONG_ANSWER, "the kernel wrote to its input A"),
}


@pytest.mark.parametrize(("name", "error", "message"), [(k, *v) for k, v in BROKEN.items()], ids=list(BROKEN))
def test_broken_kernel_costs_one_candidate(libs: dict[str, str], name: str, error: Err, message: str) -> None:
    inputs = [MeasureInput(VADD, ())] * 3
    with LocalRunner(FAST) as runner:
        bad, good, again = runner.run(inputs, [built(libs, name), built(libs, "good"), built(libs, name)])
    assert bad.error_no == error and re.search(message, bad.error_msg), bad.error_msg
    assert bad.costs == () and bad.all_cost >= 0.01
    assert good.ok and len(good.costs) == 2, good.error_msg
    assert again.error_no == error  # and the runner still works after the next candidate


def test_check_off_accepts_a_wrong_kernel(libs: dict[str, str]) -> None:
    with LocalRunner(MeasureOption(repeat=1, min_repeat_ms=0, check=False)) as runner:
        (r,) = runner.run([MeasureInput(VADD, ())], [built(libs, "wrong")])
    assert r.ok and len(r.costs) == 1


def test_unloadable_library_is_a_runtime_error(libs: dict[str, str], tmp_path: Path) -> None:
    missing = BuildResult(str(tmp_path / "missing.so"), "k_good", tuple(VADD.arg_specs()))
    with LocalRunner(FAST) as runner:
        r, good = runner.run([MeasureInput(VADD, ())] * 2, [missing, built(libs, "good")])
        with pytest.raises(ValueError, match="2 inputs but 1 build"):
            runner.run([MeasureInput(VADD, ())] * 2, [missing])
    assert r.error_no == Err.RUNTIME_ERROR and "cannot load the kernel" in r.error_msg
    assert good.ok


def test_repeats_and_min_repeat_ms(libs: dict[str, str]) -> None:
    with LocalRunner(MeasureOption(repeat=5, min_repeat_ms=10, cooldown_ms=1, flush_cache=True)) as runner:
        (r,) = runner.run([MeasureInput(VADD, ())], [built(libs, "good")])
    assert r.ok and len(r.costs) == 5, r.error_msg
    assert r.all_cost >= 6 * 0.01  # calibration + 5 repeats of at least 10 ms each
    assert all(0 < c < 1e-4 for c in r.costs)  # seconds per call: many calls per repeat


# -- the C timing harness -----------------------------------------------------------------------


def test_bench_runs_warm_up_then_repeats(libs: dict[str, str]) -> None:
    k = load_kernel(libs["count"], "k_count", VADD.arg_specs())
    a, b = VADD.workload.random_inputs(0)
    c = np.zeros(N, np.float32)
    k(a, b, c)
    calls = int(c[0])
    times = k.bench(a, b, c, number=1, repeat=3)
    assert len(times) == 3 and k.last_number == 1
    assert int(c[0]) - calls == 1 + 3  # one warm-up call, then three repeats of one
    calls = int(c[0])
    times = k.bench(a, b, c, number=2, repeat=2, min_repeat_ms=5)
    assert len(times) == 2 and k.last_number > 2  # min_repeat_ms raised number
    assert int(c[0]) - calls >= 1 + 2 * k.last_number
    start = time.perf_counter()
    k.bench(a, b, c, repeat=3, cooldown_ms=30)  # (flush_cache: see test_repeats_and_min_repeat_ms)
    assert time.perf_counter() - start >= 0.09
    for kwargs in ({"number": 0}, {"repeat": 0}, {"min_repeat_ms": -1}, {"cooldown_ms": float("nan")}):
        with pytest.raises(ValueError, match=next(iter(kwargs))):
            k.bench(a, b, c, **kwargs)


def test_bench_needs_the_harness(tmp_path: Path) -> None:
    source = kernel_source("bare", BODIES["good"], harness=False)
    source += "double bare__time(float* A, float* B, float* C, int n) { return A && B && C ? n : 0; }\n"
    k = load_kernel(compile_shared(source, Target.parse("c"), cache_dir=tmp_path), "bare", VADD.arg_specs())
    a, b = VADD.workload.random_inputs(0)
    with pytest.raises(RuntimeError, match="no bare__bench entry"):
        k.bench(a, b, np.zeros(N, np.float32))


# -- the answer check ---------------------------------------------------------------------------


def test_compare_tolerances_by_dtype() -> None:
    want = np.linspace(-50, 50, 101).astype(np.float32)
    assert compare("Y", want * (1 + 1e-5), want) is None
    assert compare("Y", want + 0.04, want) is None  # atol scales with max |expected|
    one_off = np.where(np.arange(101) == 7, want + 0.2, want)
    assert "max abs error 0.2 at (7,)" in str(compare("Y", one_off, want))
    w64 = want.astype(np.float64)
    assert compare("Y", w64 * (1 + 1e-12), w64) is None
    assert compare("Y", w64 * (1 + 1e-6), w64) is not None
    ints = np.arange(10, dtype=np.int32)
    assert compare("Y", ints.copy(), ints) is None
    assert "1 of 10 elements differ" in str(compare("Y", ints + (ints == 4), ints))
    flags = np.array([True, False, True])
    unwritten = flags.copy()
    unwritten.view(np.uint8)[1] = 0x4D
    assert compare("Y", flags.copy(), flags) is None and compare("Y", unwritten, flags) is not None
    assert "shape (3,), reference shape (4,)" in str(compare("Y", flags, np.ones(4, bool)))


def test_the_worker_is_replaced_after_recycle_after_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    import autosched.runner.local_runner as lr

    monkeypatch.setattr(lr, "RECYCLE_AFTER", 2)
    task = Task("relu", (8, 8), target="c -num-threads=1")
    inp = MeasureInput(task, ())
    option = MeasureOption(repeat=1, min_repeat_ms=0.0)
    with LocalBuilder() as builder, LocalRunner(option) as runner:
        build = builder.build([inp])
        pids = []
        for _ in range(5):
            (res,) = runner.run([inp], build)
            assert res.ok, res.error_msg
            pids.append(runner._worker.proc.pid if runner._worker is not None else None)
    assert len(set(pids)) == 3 and pids[0] == pids[1] != pids[2] == pids[3] != pids[4]
