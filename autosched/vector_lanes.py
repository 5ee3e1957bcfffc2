"""How a run of elements splits into vectors: shared by the workloads' hand-written schedules, the
templates' cost estimates and the C emitter's vector printer, so all three count vectors alike."""

from __future__ import annotations


def chunks_of(extent: int, width: int) -> list[int]:
    """Vector lengths covering ``extent``: full vectors, then halving powers of two (1 = scalar)."""
    out: list[int] = []
    rest = extent
    lanes = width
    while rest:
        while lanes > rest:
            lanes //= 2
        out.append(lanes)
        rest -= lanes
    return out
