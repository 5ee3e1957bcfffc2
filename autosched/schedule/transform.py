"""DAG rewrites that schedule primitives need: cache stages and rfactor's split reduction."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..expr import (
    CommReducer,
    ComputeOp,
    Expr,
    Extent,
    IterVar,
    Load,
    Logic,
    Operation,
    Reduce,
    Select,
    Var,
    as_expr,
    is_static,
    static,
    substitute,
)
from ..te.extent import ext_ceil_div, ext_mul
from .stage import ScheduleError, ScheduleLike, SplitRel, Stage

IDENTITY = {"sum": 0, "max": float("-inf"), "min": float("inf")}


def split_stage(s: ScheduleLike, stage: Stage, make: Callable[[], tuple[ComputeOp, ComputeOp]]) -> None:
    """Replace ``stage`` by the two ops ``make`` returns: a new stage placed just before it, then its
    own new op; a ``ValueError`` of ``make`` (the DAG rewrite refusing) becomes a ``ScheduleError``."""
    try:
        first, replacement = make()
    except ValueError as err:
        raise ScheduleError(str(err)) from None
    s.insert_stage(first, before=stage.name)
    stage.reset(replacement)


def make_cache_op(op: ComputeOp, cache_name: str) -> tuple[ComputeOp, ComputeOp]:
    """(cache stage computing ``op``'s bodies, replacement for ``op`` that copies from the cache);
    every output of a tuple compute moves to the cache together."""
    cache = ComputeOp(cache_name, op.axis, op.body, op.tag, dict(op.attrs), op.others)
    return cache, copy_op(cache, op.name, [iv.name for iv in op.axis])


def copy_op(src: Operation, name: str, axes: Sequence[str] | None = None) -> ComputeOp:
    """A stage ``name`` that copies every output of ``src`` (same shape, one output per output),
    over axes named ``axes`` (default ``ax0``, ``ax1``, ...)."""
    names = list(axes) if axes is not None else [f"ax{d}" for d in range(len(src.shape))]
    axis = tuple(IterVar(Var(a), n, "data") for a, n in zip(names, src.shape, strict=True))
    idx = tuple(iv.var for iv in axis)
    loads = [Load(src.output(k), idx) for k in range(src.num_outputs)]
    return ComputeOp(name, axis, loads[0], "cache", {}, tuple(loads[1:]))


def identity_value(combiner: str, dtype: str) -> Expr:
    """The neutral element of a reduction in ``dtype``."""
    value = IDENTITY[combiner]
    if dtype.startswith("int"):
        bits = int(dtype[3:])
        value = {"sum": 0, "max": -(2 ** (bits - 1)), "min": 2 ** (bits - 1) - 1}[combiner]
    return as_expr(value, dtype)


def make_rfactor_ops(
    op: ComputeOp, axis: str, split: SplitRel | None, factor_axis: int
) -> tuple[ComputeOp, ComputeOp]:
    """Factor reduction ``op`` over loop ``axis`` into (partial-result stage, final reduction).

    ``axis`` is a root reduce axis (``split`` is None) or one half of a single split of one.
    A ``comm_reducer`` (tuple-valued too) combines the partial results with its own combine, as
    TVM does: every output of a tuple reduction moves to the partial stage together.
    """
    body = op.body
    if not isinstance(body, Reduce):
        raise ValueError(f"{op.name} is not a reduction")
    roots = {iv.name: iv for iv in body.axis}
    root = roots[split.parent if split is not None else axis]
    where = body.where
    if split is None:
        new_data = IterVar(Var(f"{axis}.v"), root.extent, "data")
        value: Expr = new_data.var + root.begin if root.begin else new_data.var
        kept = [iv for iv in body.axis if iv.name != root.name]
    else:
        factor, n_outer = _rfactor_split_extents(split, root.extent)
        outer = (split.outer, n_outer)
        inner = (split.inner, factor)
        is_outer = axis == split.outer
        data_name, data_ext = outer if is_outer else inner
        red_name, red_ext = inner if is_outer else outer
        new_data = IterVar(Var(data_name), data_ext, "data")
        red = IterVar(Var(red_name), red_ext, "reduce")
        o_var, i_var = (new_data.var, red.var) if is_outer else (red.var, new_data.var)
        value = o_var * factor + i_var
        if static(ext_mul(n_outer, factor)) != static(root.extent) or not is_static(root.extent):
            bound = value < root.extent
            where = bound if where is None else Logic("and", where, bound)
        if root.begin:
            value = value + root.begin
        kept = [red if iv.name == root.name else iv for iv in body.axis]
    mapping = {root.var: value}
    sources = [substitute(src, mapping) for src in body.all_sources]
    where = None if where is None else substitute(where, mapping)
    rf_axis = list(op.axis)
    rf_axis.insert(factor_axis, new_data)
    if kept:
        rf_bodies = _reduce_like(body, sources, tuple(kept), where)
    elif where is not None:
        idents = reduce_identity(body.combiner, [src.dtype for src in sources])
        rf_bodies = tuple(Select(where, src, i) for src, i in zip(sources, idents, strict=True))
    else:
        rf_bodies = tuple(sources)
    rf = ComputeOp(f"{op.name}.rf", tuple(rf_axis), rf_bodies[0], op.tag, dict(op.attrs), rf_bodies[1:])
    final_red = IterVar(Var(f"{new_data.name}.r"), new_data.extent, "reduce")
    axis_out = tuple(IterVar(Var(iv.name), iv.extent, "data") for iv in op.axis)
    idx = [iv.var for iv in axis_out]
    idx.insert(factor_axis, final_red.var)
    loads: list[Expr] = [Load(rf.output(c), tuple(idx)) for c in range(rf.num_outputs)]
    final = _reduce_like(body, loads, (final_red,), None)
    return rf, ComputeOp(op.name, axis_out, final[0], op.tag, {}, final[1:])


def _rfactor_split_extents(split: SplitRel, extent: Extent) -> tuple[Extent, Extent]:
    """(inner, outer) extents of a split of a reduce axis of ``extent`` (symbolic too): the
    outer one times the inner one covers the extent; a guard masks what lies past it."""
    ext = static(extent)
    if split.factor is not None:
        factor = split.factor if ext is None else min(split.factor, ext)
        return factor, ext_ceil_div(extent, factor)
    nparts = split.nparts or 1
    if ext is None:
        return ext_ceil_div(extent, nparts), nparts
    factor = min(-(-ext // nparts), ext)
    return factor, -(-ext // factor)


def reduce_identity(combiner: str | CommReducer, dtypes: Sequence[str]) -> list[Expr]:
    """The neutral element of each component of a reduction (one unless a tuple reducer)."""
    if isinstance(combiner, str):
        return [identity_value(combiner, dtypes[0])]
    return list(combiner.identity)


def _reduce_like(
    body: Reduce, sources: Sequence[Expr], axes: tuple[IterVar, ...], where: Expr | None
) -> tuple[Expr, ...]:
    """A reduction with ``body``'s combiner of ``sources`` over ``axes``: one ``Reduce`` per
    component (a tuple reducer's components share every source)."""
    if not body.sources:
        return (Reduce(body.combiner, sources[0], axes, where),)
    srcs = tuple(sources)
    return tuple(Reduce(body.combiner, src, axes, where, c, srcs) for c, src in enumerate(srcs))
