"""Pieces the CPU templates share: tile candidates, register budgets, parallel outer loops.

Register tiles come from small candidate sets (a few rows or channels times whole vectors), not
only from divisors of the extent, so a template holds the shapes a hand-written kernel would pick
(a 6 x 64 matmul tile on AVX-512) on extents they do not divide. Unrolling is bounded: a
micro-kernel is unrolled only while its straight-line body stays within :data:`UNROLL_LIMIT`
statements, which keeps every candidate's gcc compile short.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TypeVar

from ...expr import ComputeOp, IterVar, Load, Reduce, Tensor, walk
from ...lower.simplify import linear
from ...schedule import Schedule, Stage
from ...target import Target
from ...vector_lanes import chunks_of
from ..knobs import Config, Entity, OtherEntity

E = TypeVar("E", bound=Entity)

UNROLL_LIMIT = 128
"""Most statements (vector chunks count one each) an unrolled micro-kernel body may have."""

REGISTER_ROWS = (1, 2, 3, 4, 6, 8, 12, 14, 16)
"""Candidate rows (or channels) of a broadcast register tile."""

LOCAL_BYTES = 512 * 1024
"""Most bytes of one buffer computed inside a loop nest (the emitter puts these on the stack)."""


def lanes_of(target: Target, dtype: str) -> int:
    """Elements of ``dtype`` per SIMD register (1 where the target has no SIMD width)."""
    return target.vector_lanes(dtype) if target.vector_bytes else 1


def pow2_upto(n: int) -> list[int]:
    """1, 2, 4, ... up to ``n``."""
    return [1 << e for e in range(max(n, 1).bit_length())]


def vector_tiles(extent: int, lanes: int) -> list[int]:
    """Widths for a vectorized tile: fractions and small multiples of the vector width, and the
    whole extent where it is short (a full row of 56 columns)."""
    widths = {max(1, lanes // 4), max(1, lanes // 2), lanes, 2 * lanes, 3 * lanes, 4 * lanes}
    keep = {w for w in widths if w <= extent}
    if extent <= 4 * lanes:
        keep.add(extent)
    return sorted(keep)


def tile_candidates(
    extent: int, inner: Iterable[int], levels: int = 3, max_block: int | None = None
) -> list[tuple[int, ...]]:
    """Split candidates ``(-1, [middle,] inner)``: an inner (register) factor from ``inner``
    (those that fit the extent, or the extent itself), and for three levels a middle factor that
    is a power of two or covers the whole extent, with the block (middle x inner) at most
    ``max_block``. The outer factor is computed (``-1``)."""
    cap = min(extent, max_block or extent)
    fits = sorted({f for f in inner if f <= cap}) or [min(extent, cap)]
    if levels == 2:
        return [(-1, f) for f in fits]
    out: list[tuple[int, ...]] = []
    for f in fits:
        whole = math.ceil(extent / f)
        mids = [m for m in pow2_upto(whole) if m * f <= cap] + ([whole] if extent <= cap else [])
        out.extend((-1, mid, f) for mid in dict.fromkeys(mids))
    return out


def vector_chunks(extent: int, lanes: int) -> int:
    """Vector statements the emitter writes for a vectorized loop of ``extent``."""
    return max(1, len(chunks_of(extent, lanes)))


def unroll_within(stage: Stage, loops: Sequence[tuple[IterVar, int]], body: int) -> None:
    """Unroll ``loops`` (axis, extent), innermost first, while the unrolled body of ``body``
    statements per iteration stays within :data:`UNROLL_LIMIT`; stop at the first that does not."""
    size = body
    for axis, extent in loops:
        size *= extent
        if size > UNROLL_LIMIT:
            return
        stage.unroll(axis)


def parallel_outer(
    cfg: Config, stage: Stage, batch: Sequence[IterVar], loops: Sequence[IterVar], target: Target
) -> dict[str, IterVar]:
    """On a multi-threaded target, fuse the ``batch`` loops and the first 1 or 2 (knob
    ``parallel``) of ``loops`` into one parallel loop. Returns, for every loop name, the loop that
    now holds it (itself or the fused loop): attach stages there."""
    where = {iv.name: iv for iv in (*batch, *loops)}
    if (target.num_threads or 1) <= 1:
        return where
    cfg.define_knob("parallel", [1, 2])
    group = [*batch, *loops[: int(knob(cfg, "parallel", OtherEntity).val or 1)]]
    fused = stage.fuse(*group) if len(group) > 1 else group[0]
    stage.parallel(fused)
    where.update({iv.name: fused for iv in group})
    return where


def knob(cfg: Config, name: str, kind: type[E]) -> E:
    """The entity of knob ``name``, checked to be of ``kind`` (for the type checker)."""
    entity = cfg[name]
    if not isinstance(entity, kind):
        raise TypeError(f"knob {name!r} holds a {type(entity).__name__}, not a {kind.__name__}")
    return entity


def strided_along(out: Tensor, axis: IterVar) -> bool:
    """Whether ``out`` reads some tensor with a stride above one along ``axis`` in its innermost
    index (a strided convolution's input): vectorized along ``axis``, such a load becomes one load
    per element, so an unrolled body costs one statement per element, not per vector."""
    assert isinstance(out.op, ComputeOp)
    body = out.op.body.source if isinstance(out.op.body, Reduce) else out.op.body
    for e in walk(body):
        if isinstance(e, Load) and e.indices:
            terms, _ = linear(e.indices[-1], {})
            if any(getattr(t, "name", None) == axis.name and abs(c) > 1 for t, c in terms.items()):
                return True
    return False


def place_padding(cfg: Config, s: Schedule) -> bool:
    """Knob ``pad`` where the DAG has a padding stage: computed once at the root (vectorized along
    its last axis) or inlined into its reader (bounds checks in the inner loop). Returns whether
    it was inlined: the emitter then writes a vector loop that reads the padded input as a scalar
    loop, so an unrolled body costs one statement per element, not per vector."""
    if "pad" not in s.stages:
        return False
    cfg.define_knob("pad", ["root", "inline"])
    pad = s.stages["pad"]
    if knob(cfg, "pad", OtherEntity).val == "inline":
        pad.compute_inline()
        return True
    pad.vectorize(pad.op.axis[-1])
    return False
