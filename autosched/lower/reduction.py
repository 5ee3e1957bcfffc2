"""The statements of a reduction's update and init, for built-in and ``comm_reducer`` combiners,
and the storage helpers the lowerer shares: a stage's outputs, storage_align's padded strides."""

from __future__ import annotations

from collections.abc import Sequence

from ..expr import BinOp, CommReducer, Const, Expr, Tensor, Var, substitute
from ..schedule import Stage
from .ir import Allocate, Buffer, BufLoad, Stmt, Store, seq

COMBINE = {"sum": "add", "max": "max", "min": "min"}


def outputs_of(stage: Stage) -> list[Tensor]:
    """The tensors a stage writes (several for a tuple compute)."""
    return [stage.op.output(i) for i in range(stage.op.num_outputs)]


def aligned_strides(shape: Sequence[int], aligns: dict[int, tuple[int, int]]) -> tuple[int, ...]:
    """Row-major strides where the stride of each dimension ``d`` in ``aligns`` is padded up to
    ``k * factor + offset`` (te's storage_align)."""
    out = [1] * len(shape)
    for d in range(len(shape) - 1, -1, -1):
        if d < len(shape) - 1:
            out[d] = out[d + 1] * shape[d + 1]
        if d in aligns and d < len(shape) - 1:
            factor, offset = aligns[d]
            out[d] += (offset - out[d]) % factor
    return tuple(out)


def reduce_update(
    stage: str, combiner: str | CommReducer, targets: Sequence[tuple[Buffer, Expr]], sources: Sequence[Expr]
) -> Stmt:
    """The update of every output of a reduction with one new element ``sources``.

    A tuple reducer's components are combined from the old values of all of them, so the new values
    go to one-element locals first and are stored after.
    """
    accs = [BufLoad(b, i) for b, i in targets]
    if isinstance(combiner, str):
        (buf, index), acc, src = targets[0], accs[0], sources[0]
        return Store(buf, index, BinOp(COMBINE[combiner], acc, src, buf.dtype))
    mapping: dict[Var, Expr] = dict(zip(combiner.lhs, accs, strict=True))
    mapping |= dict(zip(combiner.rhs, sources, strict=True))
    values = [substitute(r, mapping) for r in combiner.result]
    if len(targets) == 1:
        return Store(targets[0][0], targets[0][1], values[0])
    temps = [Buffer(f"{stage}.red{c}", (1,), b.dtype, "local") for c, (b, _) in enumerate(targets)]
    stmts: list[Stmt] = [Allocate(t) for t in temps]
    stmts += [Store(t, Const(0), v) for t, v in zip(temps, values, strict=True)]
    stmts += [Store(b, i, BufLoad(t, Const(0))) for (b, i), t in zip(targets, temps, strict=True)]
    return seq(stmts)
