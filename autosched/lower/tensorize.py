"""Lowering of ``tensorize``: check the region under the tensorized loop against the intrinsic's
compute, then replace it by a call of the intrinsic's C.

The check, with one error naming the first difference:
- extents: the intrinsic's data axes match the stage's last data axes and its reduce axes the
  stage's last reduce axes; each has one loop in the region with the intrinsic's extent (a
  stage axis the intrinsic lacks has no loop in the region);
- arithmetic: the stage's expression and the intrinsic's have the same structure (operations,
  constants, casts, reducer, dtypes), tensors matched by position;
- access: each buffer's flat index is affine in the region's loops, with the strides the
  intrinsic's buffer declares (a stride variable takes the schedule's stride).

Non-dividing splits leave partial tiles at the ends: there the call is skipped for the ordinary
loop nest of the region (a guarded fallback), so any factor is correct; the region's first and
last points decide, since every guard is affine with positive coefficients in the loops.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..expr import (
    BinOp,
    Call,
    Cast,
    Cmp,
    Const,
    Expr,
    Load,
    Logic,
    Not,
    Reduce,
    Select,
    Tensor,
    Var,
    as_expr,
    substitute,
    to_str,
    walk,
)
from ..schedule import ScheduleError, Stage
from ..te.intrin import TensorIntrin
from .ir import BufAddress, Buffer, BufLoad, CallStmt, IfThenElse, Stmt, Store, seq
from .loops import Leaf
from .simplify import conjoin, simplify

if TYPE_CHECKING:  # annotations only: the lowerer calls this module
    from .lowering import Lowerer, StageContext


class TensorizeError(ScheduleError):
    """The region under a tensorized loop does not match the intrinsic."""


def lower_tensorized(
    lw: Lowerer,
    stage: Stage,
    ctx: StageContext,
    targets: list[tuple[Buffer, Expr]],
    extras: dict[int, list[Stmt]],
) -> Stmt:
    """The stage's loops outside the tensorized one, around a call of the intrinsic (and the
    fallback nest for partial tiles)."""
    ((axis, intrin),) = stage.tensorized.items()
    where = f"tensorize {stage.name} at {axis} with {intrin.name}"
    leaves = ctx.nest.leaves
    names = [lf.name for lf in leaves]
    if axis not in names:
        raise TensorizeError(f"{where}: {axis} is no longer a loop (split or fused after tensorize)")
    p = names.index(axis)
    outer, inner = leaves[:p], leaves[p:]
    if any(level >= p for level in extras):
        raise TensorizeError(f"{where}: a stage is computed at a loop inside the region; attach it outside")
    if stage.store_predicate is not None:
        raise TensorizeError(f"{where}: a stage with a store predicate cannot be tensorized")
    try:
        call_args = _match(lw, stage, ctx, intrin, inner, targets[0])
    except TensorizeError as err:
        raise TensorizeError(f"{where}: {err}") from None
    body = ctx.bodies[0]
    inner_vars = {lf.var for lf in inner}
    inner_preds = [c for c in ctx.preds if any(v in inner_vars for v in walk(c))]
    outer_preds = [c for c in ctx.preds if c not in inner_preds]
    partial = isinstance(body, Reduce) and any(lf.axis_kind == "reduce" for lf in outer)
    if not isinstance(body, Reduce):
        parts = ["body"]
        fallback = seq(Store(b, i, lw.to_buffers(v)) for (b, i), v in zip(targets, ctx.bodies, strict=True))
        fallback = lw.build(inner, fallback, {}, lw.place(inner_preds, inner))
    elif partial:
        parts = ["update"]
        fallback = lw.build(
            inner, lw.reduction_update(stage, body, targets), {}, lw.place(inner_preds, inner)
        )
    else:
        parts = ["body"] if intrin.impl.body is not None else ["reset", "update"]
        update = lw.reduction_update(stage, body, targets)
        placed = lw.place(inner_preds, inner)
        r0, init = lw.reduction_init(body, inner, targets, placed)
        fallback = lw.build(inner, update, {r0 - 1: [init]}, placed)
    if partial and intrin.impl.update is None:
        loop = next(lf.name for lf in outer if lf.axis_kind == "reduce")
        raise TensorizeError(
            f"{where}: the region is inside reduction loop {loop}, so the intrinsic must declare an "
            "update (body, reset, update); it has none (tensorize outside that loop instead)"
        )
    if parts == ["body"] and intrin.impl.body is None:
        raise TensorizeError(f"{where}: the intrinsic has no body for a region that is not a reduction")
    call = seq(CallStmt(intrin, part, call_args) for part in parts)
    bottom: Stmt = call
    if inner_preds:
        corners: list[dict[Var, Expr]] = [
            {lf.var: Const(0) for lf in inner},
            {lf.var: as_expr(lf.extent) - 1 for lf in inner},
        ]
        full = conjoin([simplify(substitute(c, m), lw.ranges) for c in inner_preds for m in corners])
        bottom = IfThenElse(full, call, fallback)
    outer_extras = {k: list(v) for k, v in extras.items()}
    if partial:
        assert isinstance(body, Reduce)
        r0, init = lw.reduction_init(body, leaves, targets, lw.place(list(ctx.preds), leaves))
        outer_extras.setdefault(r0 - 1, []).append(init)
    return lw.build(outer, bottom, outer_extras, lw.place(outer_preds, outer))


# ---------------------------------------------------------------------------- the check


def _match(
    lw: Lowerer,
    stage: Stage,
    ctx: StageContext,
    intrin: TensorIntrin,
    inner: Sequence[Leaf],
    out: tuple[Buffer, Expr],
) -> tuple[Expr, ...]:
    """Check the region against ``intrin``; the call's arguments (pointers, then strides)."""
    leaf_of = _axes(stage, ctx, intrin, inner)
    loads: list[tuple[Load, Load]] = []
    _same(ctx.bodies[0], intrin.op.body, loads)
    bound: dict[Var, Expr] = {}
    pointers: dict[str, Expr] = {}
    out_t = intrin.output
    pointers[out_t.name] = _access(
        lw, intrin, out_t, tuple(iv.var for iv in intrin.op.axis), out, leaf_of, bound
    )
    for mine, theirs in loads:
        bl = lw.to_buffers(mine)
        assert isinstance(bl, BufLoad)
        ptr = _access(lw, intrin, theirs.tensor, theirs.indices, (bl.buffer, bl.index), leaf_of, bound)
        old = pointers.setdefault(theirs.tensor.name, ptr)
        if old != ptr:
            raise TensorizeError(f"{theirs.tensor.name} is read at two different places of the region")
    args: list[Expr] = [pointers[out_t.name], *(pointers[t.name] for t in intrin.inputs)]
    return (*args, *(bound.get(v, Const(0)) for v in intrin.stride_vars))


def _axes(
    stage: Stage, ctx: StageContext, intrin: TensorIntrin, inner: Sequence[Leaf]
) -> dict[Var, Leaf | None]:
    """The loop of the region each intrinsic axis runs over (``None``: a region of extent 1)."""
    op = stage.op
    mine_d, mine_r = list(op.axis), list(op.reduce_axis)
    theirs_d, theirs_r = list(intrin.op.axis), list(intrin.op.reduce_axis)
    if len(theirs_d) > len(mine_d) or len(theirs_r) > len(mine_r):
        raise TensorizeError(
            f"the intrinsic has {len(theirs_d)} data and {len(theirs_r)} reduce axes, the stage "
            f"{len(mine_d)} and {len(mine_r)}"
        )
    pairs = dict(zip(mine_d[len(mine_d) - len(theirs_d) :], theirs_d, strict=True))
    pairs |= dict(zip(mine_r[len(mine_r) - len(theirs_r) :], theirs_r, strict=True))
    inner_vars = {lf.var: lf for lf in inner}
    out: dict[Var, Leaf | None] = {}
    for iv in (*mine_d, *mine_r):
        value = ctx.nest.values[iv.name]
        used = [inner_vars[v] for v in dict.fromkeys(walk(value)) if isinstance(v, Var) and v in inner_vars]
        coefs = [
            simplify(substitute(value, {lf.var: Const(1)}) - substitute(value, {lf.var: Const(0)}))
            for lf in used
        ]
        if any(c != Const(1) for c in coefs) or len(used) > 1:
            names = ", ".join(lf.name for lf in used)
            raise TensorizeError(
                f"axis {iv.name} has loops {names} inside the region: split it once, fuse none"
            )
        theirs = pairs.get(iv)
        if theirs is None:
            if used:
                raise TensorizeError(
                    f"axis {iv.name} has loop {used[0].name} (extent {used[0].extent}) inside the region, "
                    "but the intrinsic has no axis for it"
                )
            continue
        extent = used[0].extent if used else 1
        if extent != theirs.extent:
            raise TensorizeError(
                f"axis {iv.name}: extent {extent} in the region vs {theirs.extent} in the intrinsic's "
                f"axis {theirs.name}"
            )
        out[theirs.var] = used[0] if used else None
    return out


def _same(mine: Expr, theirs: Expr, loads: list[tuple[Load, Load]]) -> None:
    """Whether ``mine`` computes what ``theirs`` does (tensor reads collected in ``loads``)."""

    def differ(what: str) -> TensorizeError:
        return TensorizeError(f"the region computes {to_str(mine)}, the intrinsic {to_str(theirs)}: {what}")

    if isinstance(theirs, Load):
        if not isinstance(mine, Load):
            raise differ(f"{to_str(mine)} where the intrinsic reads {theirs.tensor.name}")
        if mine.dtype != theirs.dtype:
            raise differ(f"{mine.tensor.name} is {mine.dtype}, {theirs.tensor.name} is {theirs.dtype}")
        loads.append((mine, theirs))
        return
    if type(mine) is not type(theirs):
        raise differ(f"a {type(mine).__name__} where the intrinsic has a {type(theirs).__name__}")
    if mine.dtype != theirs.dtype:
        raise differ(f"dtype {mine.dtype} vs {theirs.dtype}")
    if isinstance(theirs, Reduce):
        assert isinstance(mine, Reduce)
        if mine.combiner != theirs.combiner:
            raise differ("a different reducer")
        if mine.where is not None or theirs.where is not None or mine.sources or theirs.sources:
            raise differ("tensorize supports one-output reductions without where")
        _same(mine.source, theirs.source, loads)
        return
    if isinstance(theirs, Var):
        raise differ(f"the intrinsic uses {theirs.name} outside a tensor read, which tensorize cannot check")
    if isinstance(theirs, (Const, BinOp, Cmp, Logic, Cast, Call)):
        key = {
            Const: ("value",),
            BinOp: ("op",),
            Cmp: ("op",),
            Logic: ("op",),
            Cast: ("type",),
            Call: ("name",),
        }
        for f in key[type(theirs)]:
            if getattr(mine, f) != getattr(theirs, f):
                raise differ(f"{getattr(mine, f)!r} vs {getattr(theirs, f)!r}")
    elif not isinstance(theirs, (Select, Not)):
        raise differ(f"tensorize cannot compare a {type(theirs).__name__}")
    from_mine, from_theirs = _kids(mine), _kids(theirs)
    if len(from_mine) != len(from_theirs):
        raise differ("a different number of operands")
    for a, b in zip(from_mine, from_theirs, strict=True):
        _same(a, b, loads)


def _kids(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, (BinOp, Cmp, Logic)):
        return (e.a, e.b)
    if isinstance(e, Select):
        return (e.cond, e.true_value, e.false_value)
    if isinstance(e, (Not, Cast)):
        return (e.a,) if isinstance(e, Not) else (e.value,)
    if isinstance(e, Call):
        return e.args
    return ()


def _access(
    lw: Lowerer,
    intrin: TensorIntrin,
    t: Tensor,
    indices: Sequence[Expr],
    mine: tuple[Buffer, Expr],
    leaf_of: dict[Var, Leaf | None],
    bound: dict[Var, Expr],
) -> Expr:
    """Check the region's flat index ``mine`` of buffer against the intrinsic's access of ``t``
    at ``indices``; bind its stride variables; the pointer to the region's first element."""
    buf, index = mine
    decl = intrin.buffer(t)
    strides = intrin.strides(t)
    zero: dict[Var, Expr] = {lf.var: Const(0) for lf in leaf_of.values() if lf is not None}
    base = simplify(substitute(index, zero), lw.ranges)
    residual: Expr = index - base
    offset: Expr = Const(0)
    for v, lf in leaf_of.items():
        # the intrinsic's coefficient of axis v: sum over dimensions of (index coefficient * stride)
        dims = [
            (d, simplify(substitute(i, {v: Const(1)}) - substitute(i, {v: Const(0)})))
            for d, i in enumerate(indices)
        ]
        dims = [(d, c) for d, c in dims if c != Const(0)]
        got = (
            Const(0)
            if lf is None
            else simplify(substitute(index, {**zero, lf.var: Const(1)}) - base, lw.ranges)
        )
        if lf is not None:
            residual = residual - got * lf.var
        if not dims:
            if got != Const(0):
                raise TensorizeError(
                    f"{buf.name} depends on loop {lf.name if lf else v.name} in the region, the intrinsic's "
                    f"{decl.name} does not depend on axis {v.name}"
                )
            continue
        d, c = dims[0]
        if len(dims) > 1 or not isinstance(c, Const):
            raise TensorizeError(f"the intrinsic's {decl.name} must use axis {v.name} in one dimension only")
        scale, want = int(c.value), strides[d]
        if lf is None:
            continue
        if isinstance(want, Var):
            value = simplify(got // scale if scale != 1 else got, lw.ranges)
            if bound.setdefault(want, value) != value:
                raise TensorizeError(
                    f"stride {want.name} is {to_str(bound[want])} and {to_str(value)} in the region"
                )
        elif simplify(got - as_expr(want) * scale, lw.ranges) != Const(0):
            step = to_str(simplify(as_expr(want) * scale))
            raise TensorizeError(
                f"{buf.name} moves by {to_str(got)} per step of loop {lf.name}, the intrinsic's {decl.name} "
                f"by {step} per step of axis {v.name} (a transposed or strided access?)"
            )
    for d, i in enumerate(indices):
        const = simplify(substitute(i, dict.fromkeys(leaf_of, Const(0))))
        if const != Const(0):
            offset = offset + const * _stride_value(strides[d], bound)
    if simplify(residual, lw.ranges) != Const(0):
        raise TensorizeError(f"{buf.name}'s index {to_str(index)} is not affine in the region's loops")
    return BufAddress(buf, simplify(base - offset, lw.ranges))


def _stride_value(s: object, bound: dict[Var, Expr]) -> Expr:
    if isinstance(s, Var):
        return bound.get(s, Const(0))
    assert isinstance(s, int)
    return Const(s)
