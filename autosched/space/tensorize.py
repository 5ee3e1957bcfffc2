"""The ``tensorize`` sketch rule (MetaSchedule's auto-tensorization, for the dot-product intrinsics): a
stage that computes ``sum(A[..., k].astype(acc) * B[..., k, ..., j].astype(acc))`` (a matmul, a
batched matmul, an NHWC convolution: :mod:`autosched.schedule.dot_layout`) over the input types
of a dot-product kind (u8 x s8 -> s32 on x86; s8 x s8 and u8 x u8 -> s32 on AArch64; bf16 ->
f32) gets a sketch in which ``B`` is laid out in the kind's panels (``dot_layout``) and each
block of ``mr`` rows (of the stage's axis ``i``, the one before last) x 16 columns x ``kc``
reductions is one call of the fastest intrinsic the target allows (VNNI, AVX2, AMX, NEON dot
products: :func:`autosched.intrin.lowp.pick_path`). No schedule is written for the operator: a
user's own int8 matmul or convolution finds the intrinsic in the search.

The annotation draws ``mr`` (among the sizes that keep the path's accumulators in registers)
and ``kc`` (multiples of the kind's ``k`` group dividing K) as one-level tiles of the stage's
``i`` and ``k`` axes, so mutation and crossover treat them as any tile; whether the outer loops
go to the threads is its ``parallel``. A computed ``A`` (a padding stage) is computed at the
root (the sketch's ``root`` rule): inlined into the stage, the intrinsic would no longer match
it. N must divide by 16 and K by the group; on x86's AVX-512 path, an N that divides by 32 gets
panels of 32 columns (two vectors per call: 1,908 against 1,726 GOP/s for a 1024-cubed VNNI
matmul on two Zen 5 cores, benchmarks/bench_lowp.py).
"""

from __future__ import annotations

import random

from ..expr import ComputeOp, IterVar, Tensor, as_int
from ..intrin.dot import COLS, KINDS, LANES, MAX_ACCUMULATORS
from ..intrin.lowp import block_sizes, pick_path, tensorize_dot
from ..schedule import Schedule
from ..schedule.dot_layout import match_dot
from ..target import Target

#: rows per call worth trying, per path: AVX2 keeps 4 accumulators a row in 16 registers, AVX-512
#: one in 32 (up to 28 rows, beside a panel of B and a broadcast of A), NEON 4 in 32, AMX one to
#: four 16-row tiles
MR_CHOICES = {"avx2": (1, 2, 3, 4), "dot": tuple(range(4, 29)), "neon": (2, 3, 4, 6), "amx": (16, 32, 48, 64)}
#: AVX-512's rows where none of its choices divides the stage's rows
DOT_FALLBACK = (4, 6, 8, 12, 16)
MAX_KC = 2048


def dot_plan(op: ComputeOp, target: Target) -> tuple[str, str] | None:
    """(dot kind, path) if the rule applies to ``op`` on ``target``, else None."""
    if not target.is_cpu:
        return None
    found = match_dot(op)
    if found is None:
        return None
    for kind, d in KINDS.items():
        if (found.a.dtype, found.b.dtype, found.acc) != (d.a_dtype, d.b_dtype, d.acc):
            continue
        if found.n % LANES or found.kk % d.group:
            return None
        path = pick_path(kind, target)
        return (kind, path) if path != "portable" else None
    return None


def panel_cols(op: ComputeOp, kind: str, path: str) -> int:
    """Columns per call (and per panel of the laid-out ``B``): 32 on x86's AVX-512 ``dot`` path
    where N divides by 32, else 16."""
    found = match_dot(op)
    assert found is not None, f"{op.name}: the tensorize rule does not apply"
    wide = path == "dot" and KINDS[kind].machine == "x86_64" and found.n % COLS[-1] == 0
    return COLS[-1] if wide else LANES


def mr_choices(kind: str, path: str, rows: int, cols: int = LANES) -> tuple[int, ...]:
    """Rows per intrinsic call of ``cols`` columns that annotation draws for ``kind`` on ``path``,
    for a stage of ``rows`` rows: those that divide it where any does (AMX's tiles excepted). A
    partial block runs the plain loop nest, scalar code: with blocks of 9 of a 28-pixel row the
    tuner's best int8 convolution ran at 0.79x the float32 one, with dividing blocks 3.1-3.5x
    (benchmarks/bench_auto_tensorize.py, two Zen 5 cores)."""
    path = "neon" if path == "dot" and KINDS[kind].machine == "aarch64" else path
    options = MR_CHOICES[path]
    if path == "amx":
        return options
    fallback = DOT_FALLBACK if path == "dot" else options
    if path == "dot":
        fits = MAX_ACCUMULATORS * LANES // cols  # rows of accumulators that fit the registers
        options, fallback = (tuple(r for r in rs if r <= fits) for rs in (options, fallback))
    return tuple(r for r in options if rows % r == 0) or fallback


def legal_rows(mr: int, choices: tuple[int, ...]) -> int:
    """The largest of ``choices`` not over ``mr`` (else the smallest): a tile that mutation moved
    off the choices (a factor of 3 from 12 gives 9) back on them."""
    return max((r for r in choices if r <= mr), default=min(choices))


def kc_choices(kind: str, path: str, k: int) -> tuple[int, ...]:
    """Reductions per call: the multiples of the path's step that divide K, up to :data:`MAX_KC`."""
    step = 64 if path == "amx" else KINDS[kind].group
    options = [d for d in range(step, min(k, MAX_KC) + 1, step) if k % d == 0]
    return tuple(options) or (block_sizes(kind, path, 1, k)[1],)


def _axes(op: ComputeOp) -> tuple[IterVar, IterVar]:
    """The stage's row axis ``i`` and its reduce axis ``k``."""
    found = match_dot(op)
    assert found is not None, f"{op.name}: the tensorize rule does not apply"
    return op.axis[-2], found.k


def operands(op: ComputeOp) -> tuple[Tensor, Tensor]:
    """``(A, B)`` of a stage the rule applies to."""
    found = match_dot(op)
    assert found is not None, f"{op.name}: the tensorize rule does not apply"
    return found.a.tensor, found.b.tensor


def sample(op: ComputeOp, target: Target, rng: random.Random) -> tuple[dict[str, list[int]], int]:
    """(tiles, parallel) of a random ``tensorize`` annotation of ``op``."""
    kind, path = _plan(op, target)
    i, k = _axes(op)
    tiles = {
        i.name: [rng.choice(mr_choices(kind, path, as_int(i.extent), panel_cols(op, kind, path)))],
        k.name: [rng.choice(kc_choices(kind, path, as_int(k.extent)))],
    }
    return tiles, 1 if (target.num_threads or 1) > 1 else 0


def knob_options(op: ComputeOp, target: Target) -> list[tuple[str, tuple[tuple[int, ...], ...]]]:
    """(axis, one-level tile options) of the rule's grid knobs."""
    kind, path = _plan(op, target)
    i, k = _axes(op)
    rows = mr_choices(kind, path, as_int(i.extent), panel_cols(op, kind, path))
    return [
        (i.name, tuple((m,) for m in rows)),
        (k.name, tuple((c,) for c in kc_choices(kind, path, as_int(k.extent)))),
    ]


def apply(s: Schedule, name: str, tiles: dict[str, list[int]], parallel: int, target: Target) -> None:
    """Lay the stage's ``B`` out, then block and tensorize it as ``tiles`` and ``parallel`` say."""
    op = s[name].op
    assert isinstance(op, ComputeOp)
    kind, path = _plan(op, target)
    i, k = _axes(op)
    cols = panel_cols(op, kind, path)
    mr = legal_rows(tiles[i.name][0], mr_choices(kind, path, as_int(i.extent), cols))
    threads = target.num_threads or 1
    packed = s.dot_layout(op.output(0), KINDS[kind].group, cols)
    tensorize_dot(
        s, s[name].op.output(0), kind, path, mr, tiles[k.name][0], threads if parallel else 1, cols
    )
    if threads > 1:
        s[packed].parallel(s[packed].op.axis[0])


def _plan(op: ComputeOp, target: Target) -> tuple[str, str]:
    plan = dot_plan(op, target)
    assert plan is not None, f"{op.name}: the tensorize rule does not apply"
    return plan
