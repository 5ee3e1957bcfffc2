"""Lowering of ``scan``: the init rows, then a sequential loop over the remaining rows of the first
axis, each row computed from the rows before it (the state reads become reads of the output)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..expr import BinOp, ComputeOp, Const, Expr, Load, ScanOp, Var, rewrite, substitute
from .ir import For, Stmt, Store, seq

if TYPE_CHECKING:  # an annotation only: the lowerer calls this module
    from .lowering import Lowerer


def lower_scan(lw: Lowerer, op: ScanOp) -> Stmt:
    """The loop nests of ``op``: init over rows ``[0, k)``, update over ``[k, n)`` with ``t`` outermost."""
    out = lw.buffers[op.name]
    result = op.output(0)
    shape = [d for d in op.shape if isinstance(d, int)]
    rows = op.init.shape[0]
    if len(shape) != len(op.shape) or not isinstance(rows, int):
        raise ValueError(f"scan {op.name!r}: symbolic shapes are not supported by scan (shape {op.shape})")
    parts: list[Stmt] = []
    for label, part, first, count in (
        ("init", op.init, 0, rows),
        ("update", op.update, rows, shape[0] - rows),
    ):
        if count <= 0:
            continue
        cop = part.op
        assert isinstance(cop, ComputeOp)
        loop_vars = [Var(f"{op.name}.{label}.{iv.name}") for iv in cop.axis]
        extents = [count, *shape[1:]]
        for v, n in zip(loop_vars, extents, strict=True):
            lw.ranges[v] = (0, n - 1)
        values: list[Expr] = list(loop_vars)
        if first:
            values[0] = BinOp("add", loop_vars[0], Const(first), "int32")

        def from_state(e: Expr) -> Expr | None:
            if isinstance(e, Load) and e.tensor.op is op.state.op:
                return Load(result, tuple(rewrite(i, from_state) for i in e.indices))
            return None

        body = rewrite(lw.inline(cop.body), from_state)
        body = substitute(body, {iv.var: v for iv, v in zip(cop.axis, values, strict=True)})
        stmt: Stmt = Store(out, lw.flatten(values, out), lw.to_buffers(body))
        for v, n in zip(reversed(loop_vars), reversed(extents), strict=True):
            stmt = For(v, 0, n, "serial", stmt)
        parts.append(stmt)
    return seq(parts)
