"""Cost-model features: hand-computed vectors, the documented table, determinism, templates, and
the lowering cache shared with the builder."""

from __future__ import annotations

import gc
import hashlib
import os
import random
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.lower.cache import LRUCache
from autosched.model import (
    extract_features,
    feature_names,
    knob_values,
    log_scaled_features,
    shape_invariant_features,
)
from autosched.model import features as features_module
from autosched.model.features import FEATURE_CACHE
from autosched.runner.measure import MeasureInput
from autosched.schedule import ScheduleError
from autosched.schedule.steps import SplitStep
from autosched.search.tuning_space import make_space
from autosched.task import BUILT_SCHEDULES, LOWERING_CACHE, Task

ROOT = Path(__file__).resolve().parents[2]
NAMES = feature_names()
LOG = log_scaled_features()


def tiled_matmul() -> MeasureInput:
    """C = A @ B, 4x4x4: i split by 2, loops (i.outer, k, i.inner, j), j vectorized."""
    task = Task("matmul", (4, 4, 4), target="c -num-threads=1")
    _, _, C = task.workload.tensors()
    s = asc.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, ii = s[C].split(i, factor=2)
    s[C].reorder(io, k, ii, j)
    s[C].vectorize(j)
    return MeasureInput(task, tuple(s.steps))


def expected(raw: dict[str, float]) -> np.ndarray:
    """A feature row from raw values (log columns scaled), zeros elsewhere."""
    row = np.zeros(len(NAMES))
    for name, value in raw.items():
        i = NAMES.index(name)
        row[i] = np.log2(1 + value) if LOG[i] else value
    return row


def buffer(k: int, **raw: float) -> dict[str, float]:
    return {f"buf{k}_{name}": v for name, v in raw.items()}


NO_UNROLL_OR_PARALLEL = {"unroll_pos_none": 1, "parallel_pos_none": 1}
VECTOR_J = {"vec_num": 1, "vec_prod": 4, "vec_len": 4, "vec_pos_inner": 1}


def test_hand_computed_matmul_rows() -> None:
    feats = extract_features([tiled_matmul()])[0]
    assert feats.dtype == np.float32 and feats.shape == (2, len(NAMES))
    # row 0: C[ii*4 + io*8 + j] = 0 over io(2) ii(2) j(4, vectorized): 16 iterations
    init = {
        "int_addsub": 2 * 16, "int_mul": 2 * 16, **VECTOR_J, **NO_UNROLL_OR_PARALLEL,
        # C written once per iteration: 64 bytes, all of C; 4 vectors of 4 floats share a line each
        # run of j; the 16 floats fit one 64-byte line; no reuse
        **buffer(0, write=1, bytes=64, unique_bytes=64, lines=4, unique_lines=1, reuse_none=1,
                 bytes_d_reuse_ct=64, unique_bytes_d_reuse_ct=64, lines_d_reuse_ct=4, stride=1),
        "outer_prod": 16, "num_loops": 3,
    }
    np.testing.assert_allclose(feats[0], expected(init), rtol=1e-6)
    # row 1: C[c] = C[c] + A[ii*4 + io*8 + k] * B[k*4 + j] over io(2) k(4) ii(2) j(4): 64 iterations
    flops = [1 / 6, 8 / 36, 16 / 56, 64 / 128, 128 / 192]  # per byte, blocks of 1, 4, 8, 32, 64 its
    ai = np.interp(np.linspace(0, 6, 10), [0, 2, 3, 5, 6], flops)
    update = {
        "float_addsub": 64, "float_mul": 64, "int_addsub": 7 * 64, "int_mul": 7 * 64,
        **VECTOR_J, **NO_UNROLL_OR_PARALLEL,
        # C: read and written; reused across k (4 times, 8 iterations and 56 bytes apart)
        **buffer(0, rw=1, bytes=512, unique_bytes=64, lines=16, unique_lines=1, reuse_loop=1,
                 reuse_dis_iter=8, reuse_dis_bytes=56, reuse_ct=4, bytes_d_reuse_ct=128,
                 unique_bytes_d_reuse_ct=16, lines_d_reuse_ct=4, stride=1),
        # B[k*4 + j]: reused across ii (twice, 4 iterations = C 4 + A 1 + B 4 floats apart)
        **buffer(1, read=1, bytes=256, unique_bytes=64, lines=16, unique_lines=1, reuse_loop=1,
                 reuse_dis_iter=4, reuse_dis_bytes=36, reuse_ct=2, bytes_d_reuse_ct=128,
                 unique_bytes_d_reuse_ct=32, lines_d_reuse_ct=8, stride=1),
        # A[ii*4 + io*8 + k]: reused across j (4 times, 1 iteration apart); a line serves 8
        # iterations (j, then 2 of ii at stride 4)
        **buffer(2, read=1, bytes=256, unique_bytes=64, lines=8, unique_lines=1, reuse_loop=1,
                 reuse_dis_iter=1, reuse_dis_bytes=12, reuse_ct=4, bytes_d_reuse_ct=64,
                 unique_bytes_d_reuse_ct=16, lines_d_reuse_ct=2, stride=4),
        **{f"ai_{i}": v for i, v in enumerate(ai)},
        "outer_prod": 64, "num_loops": 4,
    }
    np.testing.assert_allclose(feats[1], expected(update), rtol=1e-6)


def test_allocation_unroll_and_pragma_features() -> None:
    task = Task("matmul", (8, 8, 8), target="c -num-threads=1")
    _, _, C = task.workload.tensors()
    s = asc.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, ii = s[C].split(i, factor=4)
    s[C].parallel(io)
    s[CL].compute_at(s[C], io)
    ci, cj = s[CL].op.axis
    (ck,) = s[CL].op.reduce_axis
    s[CL].reorder(ck, ci, cj)
    s[CL].unroll(ci)
    s[C].pragma(io, "auto_unroll_max_step", 16)
    feats = extract_features([MeasureInput(task, tuple(s.steps))])[0]
    rows = {name: feats[:, NAMES.index(name)] for name in NAMES}
    # stores: C.local init, C.local update, C copy-out; all under the parallel io(2)
    assert feats.shape[0] == 3
    np.testing.assert_array_equal(rows["parallel_num"], [1, 1, 1])
    np.testing.assert_allclose(rows["parallel_prod"], np.log2(3.0))
    np.testing.assert_array_equal(rows["parallel_pos_outer"], [1, 1, 1])
    # C.local (4x8 floats = 128 bytes) is allocated inside io: 2 allocations
    np.testing.assert_allclose(rows["alloc_size"][:2], np.log2(129.0))
    np.testing.assert_allclose(rows["alloc_outer_prod"][:2], np.log2(3.0))
    assert rows["alloc_size"][2] == 0  # C is an argument
    np.testing.assert_allclose(rows["auto_unroll_max_step"], np.log2(17.0))
    assert rows["unroll_num"][1] >= 1


def test_gpu_binding_extents() -> None:
    task = Task("matmul", (8, 8, 8), target="cuda")
    _, _, C = task.workload.tensors()
    s = asc.create_schedule(C.op)
    i, j = s[C].op.axis
    s[C].bind(i, asc.thread_axis("blockIdx.x"))
    s[C].bind(j, asc.thread_axis("threadIdx.x"))
    feats = extract_features([MeasureInput(task, tuple(s.steps))])[0]
    for name, raw in (("is_gpu", 1), ("block_x_len", np.log2(9)), ("thread_x_len", np.log2(9)),
                      ("block_y_len", 0), ("vthread_len", 0)):
        np.testing.assert_allclose(feats[:, NAMES.index(name)], raw, err_msg=name)
    cpu = extract_features([tiled_matmul()])[0]
    assert not cpu[:, NAMES.index("is_gpu") : NAMES.index("vthread_len") + 1].any()


def test_names_and_masks() -> None:
    assert len(NAMES) == len(set(NAMES)) == features_module.NUM_FEATURES
    inv = shape_invariant_features()
    assert inv.dtype == bool and inv.shape == LOG.shape == (len(NAMES),)
    assert inv[NAMES.index("vec_len")] and not inv[NAMES.index("outer_prod")]
    assert not inv[NAMES.index("buf0_bytes")] and inv[NAMES.index("ai_3")]
    assert not LOG[NAMES.index("ai_0")] and LOG[NAMES.index("buf4_stride")]


def _expand(pattern: str) -> list[str]:
    """``buf{k}_x`` -> buf0_x..buf4_x; ``a_{x,y}`` -> a_x, a_y; ``ai_{0..9}`` -> ai_0..ai_9."""
    if "{k}" in pattern:
        return [n for k in range(5) for n in _expand(pattern.replace("{k}", str(k)))]
    m = re.search(r"\{([^}]*)\}", pattern)
    if not m:
        return [pattern]
    body = m.group(1)
    if ".." in body:
        lo, hi = body.split("..")
        options = [str(v) for v in range(int(lo), int(hi) + 1)]
    else:
        options = body.split(",")
    return [n for o in options for n in _expand(pattern[: m.start()] + o + pattern[m.end() :])]


def test_docstring_table_documents_every_dimension() -> None:
    doc = features_module.__doc__ or ""
    lines = doc.splitlines()
    rulers = [i for i, line in enumerate(lines) if line.startswith("========  ====")]
    assert len(rulers) == 3  # above the header, below it, below the last row
    documented: dict[str, tuple[bool, bool]] = {}
    for line in lines[rulers[1] + 1 : rulers[2]]:
        dim, name, *rest = line.split()
        flags = rest[:2]
        for n in _expand(name):
            documented[n] = ("log" in flags, "inv" in flags)
    # the buffer rows are listed once, k = 0..4, in order of k after the per-store groups
    assert sorted(documented) == sorted(NAMES)
    for i, name in enumerate(NAMES):
        assert documented[name] == (bool(LOG[i]), bool(shape_invariant_features()[i])), name


DETERMINISM_SCRIPT = """
import hashlib, random
from autosched.model import extract_features
from autosched.runner.measure import MeasureInput
from autosched.search.tuning_space import make_space
from autosched.task import Task
digest = hashlib.sha256()
for args in (("conv2d_nchw", (1, 16, 14, 14, 16, 3, 3, 1, 1)), ("matmul", (64, 48, 32))):
    task = Task(*args, target="c -num-threads=1")
    space, rng = make_space(task, "sketch"), random.Random(7)
    programs = [MeasureInput(task, space.sample(rng).steps) for _ in range(12)]
    for f in extract_features(programs):
        digest.update(repr(f.shape).encode() + f.tobytes())
print(digest.hexdigest())
"""


def test_bit_identical_across_processes() -> None:
    def run(seed: str) -> str:
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        out = subprocess.run([sys.executable, "-c", DETERMINISM_SCRIPT], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert run("1") == run("2")


def test_same_features_on_every_call() -> None:
    task = Task("matmul", (32, 32, 32), target="c -num-threads=1")
    space, rng = make_space(task, "sketch"), random.Random(3)
    programs = [MeasureInput(task, space.sample(rng).steps) for _ in range(8)]
    first = extract_features(programs)
    LOWERING_CACHE.clear()
    FEATURE_CACHE.clear()
    again = extract_features(programs)
    for a, b in zip(first, again, strict=True):
        assert hashlib.sha256(a.tobytes()).digest() == hashlib.sha256(b.tobytes()).digest()


def test_lowering_and_features_leave_no_ir_in_reference_cycles() -> None:
    """A lowered program is freed by reference counting once dropped: no lowering state or IR
    node waits in a reference cycle for the garbage collector (recursive closures used to keep
    each program's whole lowering alive until a collection, which made the search's collections
    long). A schedule and its stages point at each other and may remain."""
    task = Task("fused_conv2d_packed", (1, 16, 14, 14, 16, 3, 3, 1, 1, 8, ""), target="c -num-threads=1")
    space, rng = make_space(task, "sketch"), random.Random(5)
    programs = [MeasureInput(task, space.sample(rng).steps) for _ in range(6)]
    LOWERING_CACHE.clear()
    FEATURE_CACHE.clear()
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        extract_features(programs)
        LOWERING_CACHE.clear()
        gc.collect()
        kinds = {type(o).__name__ for o in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert "Stage" in kinds or not kinds  # the check sees cycles where there are some
    leaked = kinds & {"Lowerer", "StageContext", "Lowered", "For", "Store", "BufLoad", "Buffer", "function"}
    assert not leaked, f"lowering left reference cycles holding {sorted(leaked)}"


def test_a_schedule_kept_by_the_space_lowers_as_its_steps_replayed() -> None:
    """The sketch space keeps the schedule it built for a new program; the program's first
    lowering takes it instead of replaying the steps, and gives the same code."""
    task = Task("fused_conv2d_packed", (1, 16, 14, 14, 16, 3, 3, 1, 1, 8, ""), target="c -num-threads=2")
    space, rng = make_space(task, "sketch"), random.Random(11)
    LOWERING_CACHE.clear()
    BUILT_SCHEDULES.clear()
    cands = [c for c in space.candidates([space.sample_point(rng) for _ in range(12)]) if c is not None]
    assert len(BUILT_SCHEDULES) == len({c.steps for c in cands}) > 0
    kept = [task.source(c.steps) for c in cands]
    assert len(BUILT_SCHEDULES) == 0  # each one taken by its lowering
    LOWERING_CACHE.clear()
    assert [task.source(c.steps) for c in cands] == kept  # now replayed


def test_illegal_program_has_no_rows() -> None:
    task = Task("matmul", (8, 8, 8), target="c")
    bad = MeasureInput(task, (SplitStep("C", "no_such_axis", 2, None),))
    (feats,) = extract_features([bad])
    assert feats.shape == (0, len(NAMES))


def test_template_programs_get_knob_values() -> None:
    task = Task("matmul", (64, 64, 64), target="c -num-threads=1")
    space, rng = make_space(task, "template"), random.Random(0)
    cands = [space.sample(rng) for _ in range(5)]
    feats = extract_features([MeasureInput(task, c.steps, c.program) for c in cands])
    widths = {f.shape[1] for f in feats}
    assert len(widths) == 1 and widths.pop() > len(NAMES)
    for f, c in zip(feats, cands, strict=True):
        knobs = knob_values(c.program)
        assert knobs is not None
        np.testing.assert_array_equal(f[:, len(NAMES):], np.tile(np.float32(knobs), (f.shape[0], 1)))
    assert knob_values({"space": "sketch"}) is None and knob_values(None) is None
    assert knob_values({"space": "template", "knobs": {"t": [1, 3], "a": ["none", "vec"], "b": True}}) == [
        1.0, 2.0, 0.0, 2.0, 1.0
    ]


# ------------------------------------------------------------------------------- lowering cache


def test_lowering_is_shared_by_the_builder_and_features() -> None:
    """A built program is lowered once for its source and its features; a program only described
    (what most of the search's programs are) is lowered for that and not kept."""
    LOWERING_CACHE.clear()
    FEATURE_CACHE.clear()
    inp = tiled_matmul()
    extract_features([inp])
    assert len(LOWERING_CACHE) == 0
    FEATURE_CACHE.clear()
    inp.task.source(inp.steps)  # what the builder calls
    assert (LOWERING_CACHE.misses, LOWERING_CACHE.hits) == (1, 0)
    extract_features([inp])
    assert (LOWERING_CACHE.misses, LOWERING_CACHE.hits) == (1, 1)
    same_task = Task("matmul", (4, 4, 4), target="c -num-threads=1")
    assert same_task.lowered(inp.steps) is inp.task.lowered(inp.steps)
    other_target = Task("matmul", (4, 4, 4), target="c -num-threads=2")
    assert other_target.lowered(inp.steps) is not inp.task.lowered(inp.steps)


def test_lowering_failures_are_cached_and_raised_again() -> None:
    task = Task("matmul", (8, 8, 8), target="c")
    steps = (SplitStep("C", "no_such_axis", 2, None),)
    LOWERING_CACHE.clear()
    for _ in range(2):
        with pytest.raises(ScheduleError, match="no_such_axis"):
            task.lowered(steps)
    assert (LOWERING_CACHE.misses, LOWERING_CACHE.hits) == (1, 1)


def test_lru_cache_is_bounded_and_thread_safe() -> None:
    cache: LRUCache[object] = LRUCache(3)
    for key in range(5):
        cache.get(key, object)
    assert len(cache) == 3
    cache.get(2, object)  # 2 becomes the most recent; a new key drops 3, the oldest
    cache.get(9, object)
    made: list[int] = []
    cache.get(3, lambda: made.append(3) or object())
    assert made == [3]
    with pytest.raises(ValueError):
        LRUCache(0)

    big: LRUCache[object] = LRUCache(100)
    seen: list[list[object]] = [[] for _ in range(4)]

    def worker(out: list[object]) -> None:
        for key in range(200):
            out.append(big.get(key % 50, object))

    threads = [threading.Thread(target=worker, args=(s,)) for s in seen]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(big) == 50
    for key in range(50):  # every thread got the one stored object for each key
        assert {id(s[key]) for s in seen} == {id(s[key + 50]) for s in seen} == {id(big.get(key, object))}
