"""Shape variables of a DAG, and binding them to numbers (a symbolic DAG made fixed-size)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

from .dag import topo_order
from .extent import evaluate, extent_vars
from .nodes import Const, Expr, Extent, IterVar, Load, Reduce, Var
from .tensor import ComputeOp, Operation, PlaceholderOp, ScanOp, Tensor
from .traverse import rewrite, substitute, walk


def shape_vars(args: Sequence[Tensor]) -> list[Var]:
    """The shape variables of ``args``' shapes, in order of first appearance (the order of a
    kernel's extra ``int`` parameters after its buffers)."""
    out: list[Var] = []
    for t in args:
        for v in extent_vars(list(t.shape)):
            if v not in out:
                out.append(v)
    return out


def dag_shape_vars(outputs: Sequence[Tensor]) -> list[Var]:
    """Every shape variable of the DAG behind ``outputs`` (shapes and reduce axes)."""
    out: list[Var] = []
    for op in topo_order(outputs):
        extents = list(op.shape) + [iv.extent for iv in op.reduce_axis]
        for v in extent_vars(extents):
            if v not in out:
                out.append(v)
    return out


def dag_free_vars(outputs: Sequence[Tensor]) -> dict[Var, str]:
    """The vars the DAG's compute bodies use that no loop binds and no shape has (the values a
    kernel takes as scalar arguments), each with the name of the first stage that uses it.
    Remembered for the last DAGs asked about (lowering asks for every candidate)."""
    return dict(_free_vars(tuple(outputs)))


@functools.lru_cache(maxsize=64)
def _free_vars(outputs: tuple[Tensor, ...]) -> tuple[tuple[Var, str], ...]:
    ops: list[ComputeOp] = []
    for op in topo_order(outputs):
        if isinstance(op, ComputeOp):
            ops.append(op)
        elif isinstance(op, ScanOp):
            ops.extend(op.parts)
    bound = {iv.var for op in ops for iv in (*op.axis, *op.reduce_axis)}
    bound.update(dag_shape_vars(outputs))
    out: dict[Var, str] = {}
    for op in ops:
        for body in op.bodies:
            for e in walk(body):
                if isinstance(e, Reduce):
                    bound.update(iv.var for iv in e.axis)
                elif isinstance(e, Var) and e not in bound:
                    out.setdefault(e, op.name)
    return tuple(out.items())


def bind(outputs: Sequence[Tensor], sizes: Mapping[str, int]) -> list[Tensor]:
    """The DAG behind ``outputs`` with shape variables replaced by the numbers ``sizes`` names
    (by variable name); the tensors returned stand for ``outputs``, same names and order.

    Raises ValueError for a size that is not a positive int or names no variable of the DAG.
    """
    known = {v.name for v in dag_shape_vars(outputs)}
    unknown = sorted(set(sizes) - known)
    if unknown:
        raise ValueError(f"bind: {unknown} name no shape variable of this DAG (it has {sorted(known)})")
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"bind: size {name}={value!r} must be a positive int")
    mapping: dict[Var, Expr] = {v: Const(sizes[v.name], v.dtype) for v in dag_shape_vars(outputs)}
    mapping = {v: c for v, c in mapping.items() if v.name in sizes}
    new: dict[str, Tensor] = {}

    def ext(e: Extent) -> Extent:
        if isinstance(e, int):
            return e
        got = substitute(e, mapping)
        return int(got.value) if isinstance(got, Const) else _fold(got)

    def retarget(e: Expr) -> Expr | None:
        if isinstance(e, Load):
            return Load(new[e.tensor.name], tuple(rewrite(i, retarget) for i in e.indices))
        if isinstance(e, Var):
            return mapping.get(e)
        if isinstance(e, Reduce):
            axis = tuple(_iv(iv, ext) for iv in e.axis)
            where = None if e.where is None else rewrite(e.where, retarget)
            sources = tuple(rewrite(x, retarget) for x in e.sources)
            return Reduce(e.combiner, rewrite(e.source, retarget), axis, where, e.value_index, sources)
        return None

    for op in topo_order(outputs):
        made: Operation
        if isinstance(op, PlaceholderOp):
            made = PlaceholderOp(op.name, tuple(ext(d) for d in op.shape), op.dtype)
        elif isinstance(op, ComputeOp):
            axis = tuple(_iv(iv, ext) for iv in op.axis)
            others = tuple(rewrite(b, retarget) for b in op.others)
            made = ComputeOp(op.name, axis, rewrite(op.body, retarget), op.tag, dict(op.attrs), others)
        else:
            raise ValueError(f"bind: {op.name!r} is a scan or an extern stage; those take fixed shapes only")
        for i in range(made.num_outputs if isinstance(made, ComputeOp) else 1):
            t = made.output(i)
            new[t.name] = t
    return [new[t.name] for t in outputs]


def _iv(iv: IterVar, ext: Callable[[Extent], Extent]) -> IterVar:
    return IterVar(iv.var, ext(iv.extent), iv.kind, iv.begin)


def _fold(e: Expr) -> Extent:
    """A bound extent: a number once it has no variable left (``n - 2`` with ``n`` bound)."""
    return e if extent_vars(e) else evaluate(e, {})
