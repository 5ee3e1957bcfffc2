"""Lowering of ``scan``: the init stages over their rows, then a sequential loop over the remaining
rows of the first axis in which every stage of the scan's body computes its row ``t``, as scheduled
(split, reorder, annotations of the other axes; body stages attached at the update's loops). The
state reads become reads of the outputs; the updates write the outputs' rows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..expr import Const, Expr, Extent, ScanOp, Var
from ..te.extent import ext_sub
from .ir import Allocate, Buffer, For, Stmt, seq
from .simplify import span

if TYPE_CHECKING:  # an annotation only: the lowerer calls this module
    from .lowering import Lowerer


def lower_scan(lw: Lowerer, op: ScanOp) -> Stmt:
    """The loop nests of ``op``: the inits over rows ``[0, k)``, then ``t`` over ``[k, n)`` with the
    body stages inside, each over the row ``t`` of its region."""
    outs = [lw.buffers[op.output(c).name] for c in range(op.num_outputs)]
    rows, total = op.inits[0].shape[0], op.states[0].shape[0]
    if not isinstance(rows, int):
        raise ValueError(f"scan {op.name!r}: the init's rows must be a number, got {rows}")
    for st, buf in zip(op.states, outs, strict=True):
        _alias(lw, st.name, buf)
    parts: list[Stmt] = []
    for init, buf in zip(op.inits, outs, strict=True):
        _alias(lw, init.name, buf)
        parts.append(lw.lower_stage(lw.s.stages[init.op.name]))
    t = Var(f"{op.name}.t")
    steps = ext_sub(total, rows)
    lw.ranges[t] = span(rows, steps)
    writes = {u.op.name: buf for u, buf in zip(op.updates, outs, strict=True)}
    body: list[Stmt] = []
    for part in op.body:
        stage = lw.s.stages[part.name]
        if stage.attach != ("root",):
            continue  # inlined into its readers, or computed at a loop of another body stage
        if part.name in writes:
            _alias(lw, part.output(0).name, writes[part.name])
        else:  # a whole buffer: rows of earlier steps stay readable
            for k in range(part.num_outputs):
                tensor = part.output(k)
                parts.append(Allocate(lw.allocate(stage, tensor, tuple(tensor.shape), "global")))
                lw.bases[tensor.name] = [Const(0)] * len(tensor.shape)
        region: list[Extent] = [1, *part.shape[1:]]
        lw.regions[part.name] = ([t, *[Const(0)] * (len(region) - 1)], region)
        body.append(lw.lower_stage(stage))
    if not isinstance(steps, int) or steps > 0:  # a symbolic count may be 0: the loop then runs 0 times
        parts.append(For(t, rows, steps, "serial", seq(body)))
    return seq(parts)


def _alias(lw: Lowerer, name: str, buf: Buffer) -> None:
    """Reads and writes of tensor ``name`` go to ``buf`` at absolute indices."""
    lw.buffers[name] = buf
    zero: list[Expr] = [Const(0)] * len(buf.shape)
    lw.bases[name] = zero
