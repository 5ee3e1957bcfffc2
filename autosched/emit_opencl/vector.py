"""OpenCL vector statements: a vectorized loop of 2, 4, 8 or 16 iterations that stores one
contiguous run of floats becomes ``vstoreN(value, 0, &buf[base])``, its contiguous loads
``vloadN``, its loop-invariant operands scalars (OpenCL widens them)."""

from __future__ import annotations

from ..emit_c.gpu import KernelPrinter
from ..expr import BinOp, Const, Expr, Var, substitute, walk
from ..lower.access import along
from ..lower.ir import BufLoad, For, Store
from ..lower.simplify import simplify

WIDTHS = (2, 4, 8, 16)
OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
FUNCS = {"min": "fmin", "max": "fmax"}


def vector_store(p: KernelPrinter, s: For) -> str | None:
    """The ``vstoreN`` statement of loop ``s`` printed by ``p``, or None if it does not fit."""
    body = s.body
    if not (isinstance(body, Store) and isinstance(s.begin, int) and s.extent in WIDTHS):
        return None
    if body.buffer.dtype not in ("float32", "float64") or _coef(body.index, s.var) != 1:
        return None
    value = _vec(p, body.value, s, body.buffer.dtype)
    if value is None:
        return None
    return f"vstore{s.extent}({value}, 0, &{p.buf(body.buffer)}[{_at(p, body.index, s)}]);"


def _coef(index: Expr, v: Var) -> int | None:
    """The stride of ``v`` in ``index``, or None if ``index`` is not affine in it."""
    return along(index, v)[2]


def _at(p: KernelPrinter, index: Expr, s: For) -> str:
    """``index`` at the loop's first iteration."""
    assert isinstance(s.begin, int)
    return p.expr(simplify(substitute(index, {s.var: Const(s.begin)})))


def _vec(p: KernelPrinter, e: Expr, s: For, dtype: str) -> str | None:
    """Vector text of ``e`` (scalar text where it does not depend on the loop), or None."""
    if s.var not in walk(e):
        return p.expr(e)
    if isinstance(e, BufLoad):
        if e.dtype != dtype or _coef(e.index, s.var) != 1:
            return None
        return f"vload{s.extent}(0, &{p.buf(e.buffer)}[{_at(p, e.index, s)}])"
    if isinstance(e, BinOp) and (e.op in OPS or e.op in FUNCS):
        a, b = _vec(p, e.a, s, dtype), _vec(p, e.b, s, dtype)
        if a is None or b is None:
            return None
        return f"({a} {OPS[e.op]} {b})" if e.op in OPS else f"{FUNCS[e.op]}({a}, {b})"
    return None
