"""CUDA vector statements: a vectorized loop of 4 iterations that stores 4 contiguous floats at an
index provably a multiple of 4 (every coefficient and the constant of the affine index divisible
by 4) becomes one ``float4`` store, and each of its contiguous loads with such an index one
``float4`` load; other operands are computed per lane. Only global and shared buffers are
accessed as ``float4`` (device allocations are 256-byte aligned and shared tiles are declared
``__align__(16)``); anything else stays a scalar loop."""

from __future__ import annotations

from ..emit_c.gpu import KernelPrinter
from ..expr import Const, Expr, Var, rewrite, substitute
from ..lower.access import aligned_run
from ..lower.ir import BufLoad, For, Store
from ..lower.simplify import simplify

LANES = ("x", "y", "z", "w")


def float4_store(p: KernelPrinter, s: For, lanes: dict[Var, str]) -> list[str] | None:
    """The lines of loop ``s`` as ``float4`` accesses printed by ``p`` (``lanes`` receives the
    per-lane text of each vector temporary while they print), or None if it does not fit."""
    body = s.body
    if not (isinstance(body, Store) and isinstance(s.begin, int) and s.extent == 4):
        return None
    if not _vector_access(body.buffer.dtype, body.buffer.scope, body.index, s):
        return None
    loads: dict[BufLoad, Var] = {}

    def lift(e: Expr) -> Expr | None:
        if isinstance(e, BufLoad) and _vector_access(e.dtype, e.buffer.scope, e.index, s):
            return loads.setdefault(e, Var(f"{e.buffer.name}_v4_{len(loads)}"))
        return None

    value = rewrite(body.value, lift)
    lines = ["{"]
    for load, v in loads.items():
        at = _at(p, load.index, s, 0)
        lines.append(f"  const float4 {p.var(v)} = *(const float4*)&{p.buf(load.buffer)}[{at}];")
    out = Var(f"{body.buffer.name}_v4_out")
    lines.append(f"  float4 {p.var(out)};")
    for i, lane in enumerate(LANES):
        lanes.update({v: f"{p.var(v)}.{lane}" for v in loads.values()})
        lane_value = simplify(substitute(value, {s.var: Const(s.begin + i)}))
        lines.append(f"  {p.var(out)}.{lane} = {p.expr(lane_value)};")
        lanes.clear()
    lines.append(f"  *(float4*)&{p.buf(body.buffer)}[{_at(p, body.index, s, 0)}] = {p.var(out)};")
    return lines + ["}"]


def _vector_access(dtype: str, scope: str, index: Expr, s: For) -> bool:
    """Whether ``index`` reads 4 contiguous floats from a 16-byte aligned address over ``s``."""
    if dtype != "float32" or scope not in ("global", "shared"):
        return False
    assert isinstance(s.begin, int)
    return aligned_run(index, s.var, s.begin, 4)


def _at(p: KernelPrinter, index: Expr, s: For, lane: int) -> str:
    assert isinstance(s.begin, int)
    return p.expr(simplify(substitute(index, {s.var: Const(s.begin + lane)})))
