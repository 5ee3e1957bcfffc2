"""Features of a lowered program for the cost models: one vector per buffer store (Ansor's design).

``extract_features(programs)`` lowers each program (reusing the task's lowering cache for a program
already built; the search's many others are lowered, described and dropped) and describes every
``Store`` of its loop nest, read before unrolled loops are expanded: what the store computes, how
the loops around it are annotated, how it touches memory, and how much work it does per byte. A
program is a ``(stores x dims)`` float32 array; one whose steps fail to lower has no rows;
:func:`pack_features` stacks a batch into one array.
Columns marked ``log`` hold ``log2(1 + x)``. Columns marked ``inv`` do not grow with the
workload's absolute shape (they describe tiles, annotations and ratios), the ones a model shared
across workloads can use (:func:`shape_invariant_features`). Extracted features are kept in a
bounded cache (:data:`~.feature_cache.FEATURE_CACHE`) by task and steps: a model refits on all of a task's
records after every batch.

Counts are totals over all iterations of the store's loops. "Loops" are the loops around the store,
outermost first; positions one-hot the innermost loop of a kind as innermost, middle or outermost
of the nest. Buffer blocks ``buf{k}_*`` (k = 0..4) describe the five buffers of the store with the
most line fetches (ties: more bytes, then the name); missing ones are zeros. An access's region is
the set of elements the loops touch (see :mod:`autosched.model.store_features`); a cache line is
64 bytes. Reuse: the innermost loop (of more than one iteration) whose variable the buffer's
indices do not use gives *loop* reuse (count: its extent; distance: the iterations and the bytes of
all buffers touched inside it); else a buffer accessed more than once by the store has *serial*
reuse (count: accesses - 1, distance one iteration); else *none*.

========  ==============================  ===  ===  =================================================
dim       name                            log  inv  meaning
========  ==============================  ===  ===  =================================================
0         float_addsub                    log       float additions and subtractions
1         float_mul                       log       float multiplications
2         float_divmod                    log       float divisions (and floor div/mod)
3         float_minmax                    log       float min/max
4         float_math                      log       float math calls (exp, sqrt, tanh...)
5         float_cmp                       log       comparisons of floats
6         int_addsub                      log       integer additions and subtractions (indices too)
7         int_mul                         log       integer multiplications
8         int_divmod                      log       integer divisions and modulos
9         int_minmax                      log       integer min/max
10        int_math                        log       integer math calls
11        int_cmp                         log       comparisons of integers
12        bool_op                         log       logical and/or/not
13        select_op                       log       selects (if-then-else values)
14        cast_op                         log       type casts
15        vec_num                              inv  vectorized loops around the store
16        vec_prod                        log  inv  product of their extents
17        vec_len                         log  inv  extent of the innermost one
18-21     vec_pos_{none,inner,middle,outer}    inv  its position (one-hot; none: no such loop)
22        unroll_num                           inv  unrolled loops (expanded, or left to gcc's unroller)
23        unroll_prod                     log  inv  product of their extents
24        unroll_len                      log  inv  extent of the innermost one
25-28     unroll_pos_{none,inner,middle,outer} inv  its position (one-hot)
29        parallel_num                         inv  parallel loops around the store
30        parallel_prod                   log       product of their extents
31        parallel_len                    log       extent of the innermost one
32-35     parallel_pos_{none,inner,middle,outer} inv  its position (one-hot)
36        is_gpu                               inv  1 for a GPU program
37-39     block_{x,y,z}_len               log       extents of loops bound to blockIdx.x/y/z
40-42     thread_{x,y,z}_len              log  inv  extents of loops bound to threadIdx.x/y/z
43        vthread_len                     log  inv  extent of a loop bound to vthread
44+17k    buf{k}_read                          inv  the store only reads the buffer (one-hot of 3)
45+17k    buf{k}_write                         inv  the store only writes it
46+17k    buf{k}_rw                            inv  the store reads and writes it
47+17k    buf{k}_bytes                    log       bytes accessed, all iterations, all accesses
48+17k    buf{k}_unique_bytes             log       bytes of the region touched by the whole nest
49+17k    buf{k}_lines                    log       cache lines fetched by a streaming pass
50+17k    buf{k}_unique_lines             log       distinct cache lines of the region
51+17k    buf{k}_reuse_loop                    inv  reuse type: loop (one-hot of 3)
52+17k    buf{k}_reuse_serial                  inv  reuse type: serial
53+17k    buf{k}_reuse_none                    inv  reuse type: none
54+17k    buf{k}_reuse_dis_iter           log  inv  reuse distance in iterations
55+17k    buf{k}_reuse_dis_bytes          log  inv  reuse distance in bytes (all buffers of the store)
56+17k    buf{k}_reuse_ct                 log       reuse count
57+17k    buf{k}_bytes_d_reuse_ct         log       bytes / reuse count
58+17k    buf{k}_unique_bytes_d_reuse_ct  log       unique bytes / reuse count
59+17k    buf{k}_lines_d_reuse_ct         log       lines / reuse count
60+17k    buf{k}_stride                   log       index stride (elements) of the innermost moving loop
129-138   ai_{0..9}                            inv  float ops per byte touched, blocks of 1 to all iterations
139       alloc_size                      log  inv  bytes of the stored buffer if allocated here (else 0)
140       alloc_prod                      log       its bytes times the iterations around its allocation
141       alloc_outer_prod                log       iterations of the loops around its allocation
142       alloc_inner_prod                log  inv  iterations of the store per allocation
143       outer_prod                      log       iterations of all loops around the store
144       num_loops                            inv  loops around the store
145       auto_unroll_max_step            log  inv  the auto_unroll_max_step pragma around the store
146       num_guards                           inv  guards (if statements) around the store
========  ==============================  ===  ===  =================================================

Template programs (a ``MeasureInput`` whose ``program`` says ``"space": "template"``) get their
knob values appended to every row (AutoTVM's knob features): :func:`knob_values`.

The output is bit-identical across runs and processes: the walk follows the IR, ties are broken
by name, nothing depends on set order or on salted hashes.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..backends import backend_for
from .feature_cache import FEATURE_CACHE, feature_key
from .feature_workers import fill
from .store_features import AI_SAMPLES, NUM_RAW, TOP_BUFFERS, store_rows

if TYPE_CHECKING:
    from ..runner.measure import MeasureInput

Spec = tuple[str, bool, bool]  # name, log-scaled, shape-invariant

_POS = ("none", "inner", "middle", "outer")
_BUFFER: list[tuple[str, bool, bool]] = [
    ("read", False, True), ("write", False, True), ("rw", False, True),
    ("bytes", True, False), ("unique_bytes", True, False), ("lines", True, False),
    ("unique_lines", True, False), ("reuse_loop", False, True), ("reuse_serial", False, True),
    ("reuse_none", False, True), ("reuse_dis_iter", True, True), ("reuse_dis_bytes", True, True),
    ("reuse_ct", True, False), ("bytes_d_reuse_ct", True, False),
    ("unique_bytes_d_reuse_ct", True, False), ("lines_d_reuse_ct", True, False),
    ("stride", True, False),
]


def _spec() -> list[Spec]:
    out: list[Spec] = []
    for kind in ("float", "int"):
        out += [(f"{kind}_{op}", True, False) for op in ("addsub", "mul", "divmod", "minmax", "math", "cmp")]
    out += [(f"{op}_op", True, False) for op in ("bool", "select", "cast")]
    for ann, outer_dependent in (("vec", False), ("unroll", False), ("parallel", True)):
        out += [(f"{ann}_num", False, True), (f"{ann}_prod", True, not outer_dependent),
                (f"{ann}_len", True, not outer_dependent)]
        out += [(f"{ann}_pos_{p}", False, True) for p in _POS]
    out.append(("is_gpu", False, True))
    out += [(f"block_{a}_len", True, False) for a in "xyz"]
    out += [(f"thread_{a}_len", True, True) for a in "xyz"]
    out.append(("vthread_len", True, True))
    for k in range(TOP_BUFFERS):
        out += [(f"buf{k}_{name}", log, inv) for name, log, inv in _BUFFER]
    out += [(f"ai_{i}", False, True) for i in range(AI_SAMPLES)]
    out += [("alloc_size", True, True), ("alloc_prod", True, False), ("alloc_outer_prod", True, False),
            ("alloc_inner_prod", True, True)]
    out += [("outer_prod", True, False), ("num_loops", False, True), ("auto_unroll_max_step", True, True),
            ("num_guards", False, True)]
    assert len(out) == NUM_RAW
    return out


_SPECS = _spec()
_LOG = np.array([log for _, log, _ in _SPECS])
NUM_FEATURES = len(_SPECS)


def feature_names() -> list[str]:
    """The name of every feature dimension, in column order (the table of this module)."""
    return [name for name, _, _ in _SPECS]


def shape_invariant_features() -> np.ndarray:
    """A boolean mask over the columns: True where the feature does not grow with the workload's
    absolute shape (the ``inv`` column of the table), for models shared across workloads."""
    return np.array([inv for _, _, inv in _SPECS])


def log_scaled_features() -> np.ndarray:
    """A boolean mask over the columns: True where the value is ``log2(1 + x)``."""
    return _LOG.copy()


def _code(value: Any) -> list[float]:
    """A knob value (JSON) as numbers: ints and floats as signed log2(1 + |x|), booleans 0/1,
    annotation names by their place in ``none, unroll, vec`` and other strings by a stable CRC."""
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _code(v)]
    if isinstance(value, bool):
        return [float(value)]
    if isinstance(value, (int, float)):
        return [float(np.sign(value) * np.log2(1.0 + abs(value)))]
    text = str(value)
    known = ("none", "unroll", "vec")
    return [float(known.index(text)) if text in known else float(3 + zlib.crc32(text.encode()) % 997)]


def knob_values(program: dict[str, Any] | None) -> list[float] | None:
    """A template program's knob values as numbers in knob order (None if not from a template).

    The knobs of a template are fixed per task, so every program of a task gets the same count."""
    if not program or program.get("space") != "template" or not isinstance(program.get("knobs"), dict):
        return None
    return [x for v in program["knobs"].values() for x in _code(v)]


def _finish(rows: list[list[float]]) -> np.ndarray:
    out = np.array(rows, dtype=np.float64).reshape(len(rows), NUM_FEATURES)
    out[:, _LOG] = np.log2(1.0 + out[:, _LOG])
    return out.astype(np.float32)


def lowered_features(loops: Any, nest: Any, gpu: bool = False) -> np.ndarray:
    """The ``(stores x dims)`` features of a lowered nest (:class:`~autosched.lower.Lowered`'s
    ``loops`` and ``nest``)."""
    return _finish(store_rows(loops, nest, gpu))


def describe(inp: MeasureInput) -> np.ndarray:
    """The features of program ``inp`` computed afresh (read-only; no rows if its steps do not
    lower): what :func:`program_features` caches. Its lowering is the cached one if the program
    was built, else made for this and dropped (see :meth:`~autosched.task.Task.lowered`)."""
    try:
        low = inp.task.lowered(inp.steps, keep=False)
    except Exception:  # an illegal program: no stores to describe
        feats = np.zeros((0, NUM_FEATURES), dtype=np.float32)
    else:
        feats = lowered_features(low.loops, low.nest, backend_for(inp.task.target).gpu)
    feats.flags.writeable = False
    return feats


def program_features(inp: MeasureInput) -> np.ndarray:
    """The features of one program (no rows if its steps do not lower), knob values appended to
    each row for a template program. Read-only: the array may be shared with other callers."""
    feats = FEATURE_CACHE.get(feature_key(inp.task, inp.steps), lambda: describe(inp))
    knobs = knob_values(inp.program)
    if knobs is not None:
        extra = np.broadcast_to(np.array(knobs, dtype=np.float32), (feats.shape[0], len(knobs)))
        feats = np.concatenate([feats, extra], axis=1)
        feats.flags.writeable = False
    return feats


def extract_features(programs: Sequence[MeasureInput]) -> list[np.ndarray]:
    """One ``(stores x dims)`` float32 array per program (see the module doc); a large batch of
    new programs is described on several cores (:mod:`.feature_workers`)."""
    fill(programs)
    return [program_features(p) for p in programs]


def pack_features(features: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Programs' features as one array: all rows stacked, and the program index of each row."""
    dims = {f.shape[1] for f in features}
    if len(dims) > 1:
        raise ValueError(f"programs with different feature widths {sorted(dims)} "
                         "(templates of different tasks?)")
    counts = np.array([f.shape[0] for f in features], dtype=np.int64)
    rows = np.concatenate(features) if features else np.zeros((0, 0), dtype=np.float32)
    return rows, np.repeat(np.arange(len(features)), counts)
