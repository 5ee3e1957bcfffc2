"""OpenCL vector statements: what the vectorization pass makes with :data:`OPENCL_CAPS` (a loop of
2, 4, 8 or 16 iterations storing one contiguous run of floats), printed as
``vstoreN(value, 0, &buf[base])`` of ``vloadN`` loads, infix operators and ``fmin``/``fmax``; its
loop-invariant operands stay scalars (OpenCL widens them)."""

from __future__ import annotations

from ..emit_c.gpu import KernelPrinter
from ..expr import Expr
from ..lower.vector_ir import Broadcast, VecLoad, VecOp, VecStore
from ..lower.vectorize import VectorCaps

OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
FUNCS = {"min": "fmin", "max": "fmax"}
OPENCL_CAPS = VectorCaps(
    dtypes=frozenset({"float32", "float64"}), ops=frozenset({*OPS, *FUNCS}), lanes=(2, 4, 8, 16)
)


def vector_store(p: KernelPrinter, s: VecStore) -> str:
    """The ``vstoreN`` statement of ``s`` printed by ``p``."""
    return f"vstore{s.index.lanes}({_vec(p, s.value)}, 0, &{p.buf(s.buffer)}[{p.expr(s.index.index(0))}]);"


def _vec(p: KernelPrinter, e: Expr) -> str:
    if isinstance(e, Broadcast):
        return p.expr(e.value)
    if isinstance(e, VecLoad):
        return f"vload{e.lanes}(0, &{p.buf(e.buffer)}[{p.expr(e.index.index(0))}])"
    assert isinstance(e, VecOp) and len(e.args) == 2, e
    a, b = _vec(p, e.args[0]), _vec(p, e.args[1])
    return f"({a} {OPS[e.op]} {b})" if e.op in OPS else f"{FUNCS[e.op]}({a}, {b})"
