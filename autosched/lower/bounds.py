"""Bound inference: the region of a producer that one iteration of a consumer's loop reads."""

from __future__ import annotations

from collections.abc import Sequence

from ..expr import Expr, Extent, Load, Operation, Var, walk
from .simplify import INF, Linear, Ranges, linear, rebuild, term_bounds


def _free_term_bounds(t: Expr, free: dict[Var, Extent]) -> tuple[int, int] | None:
    """Inclusive bounds of a term that only the free loops vary (``(i*4 + j) // 8`` in a tile
    of i and j), or None if it also reads a fixed variable or a loop of symbolic extent."""
    variables = {v for v in walk(t) if isinstance(v, Var)}
    if not all(v in free and isinstance(free[v], int) for v in variables):
        return None
    lo, hi = term_bounds(t, {v: (0, int(free[v]) - 1) for v in variables})  # type: ignore[arg-type]
    return None if lo == -INF or hi == INF else (int(lo), int(hi))


def _split_free(lin: Linear, free: dict[Var, Extent]) -> tuple[Linear, int, int] | None:
    """(fixed part, min offset, extent) of an index over the free loops, or None if not affine
    in them (a term of free loops alone, such as a floordiv of a tile's loops, counts by its
    bounds), or if it spans a loop of symbolic extent: the dimension is then taken whole."""
    terms, k = lin
    fixed: dict[Expr, int] = {}
    low, span = 0, 0
    for t, c in terms.items():
        if not any(isinstance(v, Var) and v in free for v in walk(t)):
            fixed[t] = c
            continue
        if isinstance(t, Var):
            n = free[t]
            if not isinstance(n, int):
                return None
            lo, hi = 0, n - 1
        else:
            b = _free_term_bounds(t, free)
            if b is None:
                return None
            lo, hi = b
        low += min(c * lo, c * hi)
        span += abs(c) * (hi - lo)
    return (fixed, 0), k + low, span + 1


def infer_region(
    producer: Operation, consumer_bodies: Sequence[Expr], free: dict[Var, Extent], ranges: Ranges
) -> tuple[list[Expr], list[Extent]]:
    """Per dimension of ``producer``: (base expression, extent) covering every read in the body.

    ``free`` maps the loop variables that vary inside the attach point to their extents; all other
    variables are fixed there. A dimension whose reads are not affine in the free loops, or whose
    reads have different fixed parts, is taken whole.
    """
    shape = producer.shape
    per_dim: list[list[tuple[Linear, int, int] | None]] = [[] for _ in shape]
    for node in (n for body in consumer_bodies for n in walk(body)):
        if isinstance(node, Load) and node.tensor.op.name == producer.name:  # any output of it
            for d, idx in enumerate(node.indices):
                per_dim[d].append(_split_free(linear(idx, ranges), free))
    bases: list[Expr] = []
    extents: list[Extent] = []
    for d, reads in enumerate(per_dim):
        whole = not reads or any(r is None for r in reads)
        if not whole:
            fixed0 = reads[0][0]  # type: ignore[index]
            whole = any(r[0] != fixed0 for r in reads)  # type: ignore[index]
        if whole:
            bases.append(rebuild({}, 0))
            extents.append(shape[d])
            continue
        lo = min(r[1] for r in reads)  # type: ignore[index]
        hi = max(r[1] + r[2] for r in reads)  # type: ignore[index]
        if isinstance(shape[d], int) and hi - lo >= shape[d]:
            bases.append(rebuild({}, 0))
            extents.append(shape[d])
            continue
        bases.append(rebuild(fixed0[0], lo))
        extents.append(hi - lo)
    return bases, extents
