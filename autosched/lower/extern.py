"""Lowering of extern stages: the body the user wrote, over the kernel's buffers.

Each ``decl_buffer`` of the stage becomes the buffer of the tensor it stands for (an argument of
the kernel or a heap temporary), ``buf.data`` the pointer to it, ``ib.buffer_ptr`` reads and
stores flat accesses to it; loops keep their kind, under names prefixed by the stage's.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..expr import BufferData, BufferRead, Const, DeclBuffer, Expr, Extent, ExternOp, Var, rewrite
from ..schedule import ScheduleError
from ..te.ir_builder import AllocBuffer, Block, Branch, BufferStore, Evaluate, ExternStmt, Loop
from . import ir
from .simplify import span

if TYPE_CHECKING:  # an annotation only: the lowerer calls this module
    from .lowering import Lowerer


class _ExternLowerer:
    def __init__(self, lw: Lowerer, op: ExternOp) -> None:
        self.lw, self.op = lw, op
        self.buffers: dict[DeclBuffer, ir.Buffer] = {}
        self.loop_vars: dict[Var, Var] = {}
        outs = [op.output(k) for k in range(op.num_outputs)]
        for b, t in [*zip(op.in_buffers, op.inputs, strict=True), *zip(op.out_buffers, outs, strict=True)]:
            buf = lw.buffers.get(t.name)
            if buf is None or buf.scope != "global" or any(x != Const(0) for x in lw.bases.get(t.name, ())):
                raise ScheduleError(
                    f"{t.name} is read by the extern stage {op.name}, which takes whole arrays: compute "
                    f"{t.name} at root (not inlined, not at a loop)"
                )
            self.buffers[b] = buf

    def expr(self, e: Expr) -> Expr:
        def fn(n: Expr) -> Expr | None:
            if isinstance(n, BufferData):
                return ir.BufPtr(self.buffers[n.buffer], self.expr(n.index))
            if isinstance(n, BufferRead):
                return ir.BufLoad(self.buffers[n.buffer], self.expr(n.index))
            if isinstance(n, Var):
                return self.loop_vars.get(n)
            return None

        return rewrite(e, fn)

    def extent(self, e: Extent) -> Extent:
        """A loop bound: an int where it is constant."""
        x = self.expr(e) if isinstance(e, Expr) else e
        return int(x.value) if isinstance(x, Const) else x

    def stmt(self, s: ExternStmt) -> ir.Stmt:
        if isinstance(s, Evaluate):
            return ir.Evaluate(self.expr(s.value))
        if isinstance(s, BufferStore):
            return ir.Store(self.buffers[s.buffer], self.expr(s.index), self.expr(s.value))
        if isinstance(s, Loop):
            v = Var(f"{self.op.name}.{s.var.name}", s.var.type)
            begin, extent = self.extent(s.begin), self.extent(s.extent)
            self.loop_vars[s.var] = v
            self.lw.ranges[v] = span(begin, extent)
            return ir.For(v, begin, extent, s.kind, self.stmt(s.body))
        if isinstance(s, Branch):
            other = None if s.otherwise is None else self.stmt(s.otherwise)
            return ir.IfThenElse(self.expr(s.cond), self.stmt(s.then), other)
        if isinstance(s, Block):
            return ir.seq(self.stmt(x) for x in s.stmts)
        if isinstance(s, AllocBuffer):
            size = math.prod(int(d) for d in s.buffer.shape if isinstance(d, int))
            buf = ir.Buffer(f"{self.op.name}.{s.buffer.name}", (size,), s.buffer.dtype, "local")
            self.buffers[s.buffer] = buf
            return ir.Allocate(buf)
        raise TypeError(f"not an extern statement: {s!r}")


def lower_extern(lw: Lowerer, op: ExternOp) -> ir.Stmt:
    """The statements of extern stage ``op`` over the buffers ``lw`` holds for its tensors."""
    return _ExternLowerer(lw, op).stmt(op.body)
