"""CUDA vector statements: what the vectorization pass makes with :data:`CUDA_CAPS`, printed as
``float4`` accesses. A vectorized loop of 4 iterations that stores 4 contiguous floats at an index
provably a multiple of 4 becomes one ``float4`` store, and each of its loads that is such a run
one ``float4`` load; its value is computed lane by lane. Only global and shared buffers are
accessed as ``float4`` (device allocations are 256-byte aligned and shared tiles are declared
``__align__(16)``)."""

from __future__ import annotations

from ..emit_c.gpu import KernelPrinter
from ..expr import Expr, Var, children
from ..lower.vector_ir import Extract, Lanes, VecLoad, VecStore
from ..lower.vectorize import VectorCaps

LANES = ("x", "y", "z", "w")
CUDA_CAPS = VectorCaps(
    dtypes=frozenset({"float32"}), lanes=(4,), aligned_only=True, scopes=frozenset({"global", "shared"}),
    lanewise=True,
)  # fmt: skip


def float4_store(p: KernelPrinter, s: VecStore, temps: dict[VecLoad, str]) -> list[str]:
    """The lines of ``s`` printed by ``p`` (``temps`` receives the name of each ``float4``
    temporary while its lanes print)."""
    assert s.aligned and isinstance(s.value, Lanes), s
    loads = [e.vector for e in _extracts(s.value.values[0])]
    lines = ["{"]
    for load in dict.fromkeys(loads):
        name = temps[load] = p.var(Var(f"{load.buffer.name}_v4_{len(temps)}"))
        at = p.expr(load.index.index(0))
        lines.append(f"  const float4 {name} = *(const float4*)&{p.buf(load.buffer)}[{at}];")
    out = p.var(Var(f"{s.buffer.name}_v4_out"))
    lines.append(f"  float4 {out};")
    for lane, value in zip(LANES, s.value.values, strict=True):
        lines.append(f"  {out}.{lane} = {p.expr(value)};")
    temps.clear()
    lines.append(f"  *(float4*)&{p.buf(s.buffer)}[{p.expr(s.index.index(0))}] = {out};")
    return lines + ["}"]


def extract(e: Extract, temps: dict[VecLoad, str]) -> str:
    """The text of a lane of a ``float4`` temporary."""
    return f"{temps[e.vector]}.{LANES[e.lane]}"


def _extracts(e: Expr) -> list[Extract]:
    """The lanes of vector loads in ``e``, in the order the printer meets them (left to right)."""
    if isinstance(e, Extract):
        return [e]
    return [x for c in children(e) for x in _extracts(c)]
