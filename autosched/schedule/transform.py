"""DAG rewrites that schedule primitives need: cache stages and rfactor's split reduction."""

from __future__ import annotations

from ..expr import ComputeOp, Expr, IterVar, Load, Logic, Reduce, Select, Tensor, Var, as_expr, substitute
from .stage import SplitRel

IDENTITY = {"sum": 0, "max": float("-inf"), "min": float("inf")}


def make_cache_op(op: ComputeOp, cache_name: str) -> tuple[ComputeOp, ComputeOp]:
    """(cache stage computing ``op``'s body, replacement for ``op`` that copies from the cache)."""
    cache = ComputeOp(cache_name, op.axis, op.body, op.tag, dict(op.attrs))
    axis = tuple(IterVar(Var(iv.name), iv.extent, "data") for iv in op.axis)
    copy = ComputeOp(op.name, axis, Load(Tensor(cache), tuple(iv.var for iv in axis)), "cache")
    return cache, copy


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
    """
    body = op.body
    if not isinstance(body, Reduce) or not isinstance(body.combiner, str):
        raise ValueError(f"{op.name} is not a reduction with sum, max or min")
    roots = {iv.name: iv for iv in body.axis}
    root = roots[split.parent if split is not None else axis]
    where = body.where
    if split is None:
        new_data = IterVar(Var(f"{axis}.v"), root.extent, "data")
        value: Expr = new_data.var + root.begin if root.begin else new_data.var
        kept = [iv for iv in body.axis if iv.name != root.name]
    else:
        factor = split.factor if split.factor is not None else -(-root.extent // (split.nparts or 1))
        factor = min(factor, root.extent)
        n_outer = -(-root.extent // factor)
        outer = (split.outer, n_outer)
        inner = (split.inner, factor)
        is_outer = axis == split.outer
        data_name, data_ext = outer if is_outer else inner
        red_name, red_ext = inner if is_outer else outer
        new_data = IterVar(Var(data_name), data_ext, "data")
        red = IterVar(Var(red_name), red_ext, "reduce")
        o_var, i_var = (new_data.var, red.var) if is_outer else (red.var, new_data.var)
        value = o_var * factor + i_var
        if n_outer * factor != root.extent:
            bound = value < root.extent
            where = bound if where is None else Logic("and", where, bound)
        if root.begin:
            value = value + root.begin
        kept = [red if iv.name == root.name else iv for iv in body.axis]
    mapping = {root.var: value}
    source = substitute(body.source, mapping)
    where = None if where is None else substitute(where, mapping)
    rf_axis = list(op.axis)
    rf_axis.insert(factor_axis, new_data)
    if kept:
        rf_body: Expr = Reduce(body.combiner, source, tuple(kept), where)
    elif where is not None:
        rf_body = Select(where, source, identity_value(body.combiner, source.dtype))
    else:
        rf_body = source
    rf = ComputeOp(f"{op.name}.rf", tuple(rf_axis), rf_body, op.tag, dict(op.attrs))
    final_red = IterVar(Var(f"{new_data.name}.r"), new_data.extent, "reduce")
    axis_out = tuple(IterVar(Var(iv.name), iv.extent, "data") for iv in op.axis)
    idx = [iv.var for iv in axis_out]
    idx.insert(factor_axis, final_red.var)
    final = ComputeOp(
        op.name, axis_out, Reduce(body.combiner, Load(Tensor(rf), tuple(idx)), (final_red,)), op.tag
    )
    return rf, final
