"""Lowering of ``scan``: the init stages over their rows, then a sequential loop over the remaining
rows of the first axis in which every stage of the scan's body computes its row ``t``, as scheduled
(split, reorder, annotations of the other axes; body stages attached at the update's loops). The
state reads become reads of the outputs; the updates write the outputs' rows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..expr import Const, Expr, Extent, ScanOp, Var
from .ir import Allocate, Buffer, For, Stmt, seq

if TYPE_CHECKING:  # an annotation only: the lowerer calls this module
    from .lowering import Lowerer


def lower_scan(lw: Lowerer, op: ScanOp) -> Stmt:
    """The loop nests of ``op``: the inits over rows ``[0, k)``, then ``t`` over ``[k, n)`` with the
    body stages inside, each over the row ``t`` of its region."""
    outs = [lw.buffers[op.output(c).name] for c in range(op.num_outputs)]
    if any(not isinstance(d, int) for b in outs for d in b.shape):
        raise ValueError(f"scan {op.name!r}: symbolic shapes are not supported by scan (shape {op.shape})")
    for st, buf in zip(op.states, outs, strict=True):
        _alias(lw, st.name, buf)
    parts: list[Stmt] = []
    for init, buf in zip(op.inits, outs, strict=True):
        _alias(lw, init.name, buf)
        parts.append(lw.lower_stage(lw.s.stages[init.op.name]))
    rows, total = op.inits[0].shape[0], op.states[0].shape[0]
    assert isinstance(rows, int) and isinstance(total, int)
    t = Var(f"{op.name}.t")
    lw.ranges[t] = (rows, total - 1)
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
    if total > rows:
        parts.append(For(t, rows, total - rows, "serial", seq(body)))
    return seq(parts)


def _alias(lw: Lowerer, name: str, buf: Buffer) -> None:
    """Reads and writes of tensor ``name`` go to ``buf`` at absolute indices."""
    lw.buffers[name] = buf
    zero: list[Expr] = [Const(0)] * len(buf.shape)
    lw.bases[name] = zero
