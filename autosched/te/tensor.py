"""Tensors and operations: ``placeholder``, ``compute``, ``reduce_axis`` and the DAG they build.

Operations (``PlaceholderOp``, ``ComputeOp``) are compared by identity: a DAG is a graph of
operations, each named, and its structural key comes from :func:`autosched.te.dag.dag_key`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..dtypes import dtype as _dtype
from .extent import check_extent, ext_sub, extent_vars, static
from .nodes import Expr, ExprLike, Extent, IterVar, Load, Reduce, Var, as_expr
from .traverse import walk


@dataclass(eq=False, slots=True)
class PlaceholderOp:
    """An input tensor of the DAG."""

    name: str
    shape: tuple[Extent, ...]
    dtype: str

    @property
    def axis(self) -> tuple[IterVar, ...]:
        """An input has no loops (present so every stage's ``op.axis`` can be read)."""
        return ()

    @property
    def reduce_axis(self) -> tuple[IterVar, ...]:
        return ()

    @property
    def input_tensors(self) -> tuple[Tensor, ...]:
        return ()

    def output(self, index: int = 0) -> Tensor:
        return Tensor(self)


@dataclass(eq=False, slots=True)
class ComputeOp:
    """A tensor defined elementwise by ``body`` over ``axis`` (and a top-level reduction)."""

    name: str
    axis: tuple[IterVar, ...]
    body: Expr
    tag: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[Extent, ...]:
        return tuple(iv.extent for iv in self.axis)

    @property
    def dtype(self) -> str:
        return self.body.dtype

    @property
    def reduce_axis(self) -> tuple[IterVar, ...]:
        return self.body.axis if isinstance(self.body, Reduce) else ()

    @property
    def input_tensors(self) -> tuple[Tensor, ...]:
        seen: dict[str, Tensor] = {}
        for node in walk(self.body):
            if isinstance(node, Load) and node.tensor.name not in seen:
                seen[node.tensor.name] = node.tensor
        return tuple(seen.values())

    def output(self, index: int = 0) -> Tensor:
        return Tensor(self)


Operation = PlaceholderOp | ComputeOp


@dataclass(frozen=True, slots=True)
class Tensor:
    """The output of an operation; index it (``A[i, j]``) to read it in an expression."""

    op: Operation

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def shape(self) -> tuple[Extent, ...]:
        return self.op.shape

    @property
    def dtype(self) -> str:
        return self.op.dtype

    @property
    def ndim(self) -> int:
        return len(self.op.shape)

    def __getitem__(self, indices: ExprLike | tuple[ExprLike, ...]) -> Load:
        idx = indices if isinstance(indices, tuple) else (indices,)
        if len(idx) != self.ndim:
            raise IndexError(f"tensor {self.name} has {self.ndim} dimensions, indexed with {len(idx)}")
        exprs = tuple(as_expr(i) for i in idx)
        for e in exprs:
            if _dtype(e.dtype).is_float:
                raise TypeError(f"index of {self.name} must be an integer, got {e.dtype}: {e}")
        return Load(self, exprs)

    def __hash__(self) -> int:
        return id(self.op)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tensor) and other.op is self.op

    def __repr__(self) -> str:
        shape = ", ".join(str(d) for d in self.shape) + ("," if len(self.shape) == 1 else "")
        return f"Tensor({self.name}, shape=({shape}), dtype={self.dtype})"


# ---------------------------------------------------------------------------- constructors


def reduce_axis(dom: Extent | tuple[Extent, Extent], name: str = "k") -> IterVar:
    """A reduction axis over ``range(dom)`` or over ``[begin, end)`` when ``dom`` is a pair.

    ``dom`` may use shape variables (``reduce_axis(K)`` with ``K = asc.size_var("K")``); a pair
    needs a constant begin.
    """
    if isinstance(dom, tuple):
        begin, end = dom
        if static(begin) is None:
            raise ValueError(f"reduce_axis {name!r}: the range must begin at a constant, got {begin}")
        begin = int(static(begin) or 0)
    else:
        begin, end = 0, dom
    if isinstance(end, Expr) and static(end) is None:
        extent = check_extent(ext_sub(end, begin) if begin else end, f"reduce_axis {name!r}")
        return IterVar(Var(name), extent, "reduce", begin)
    end_value = static(end) if not isinstance(end, int) else end
    if not isinstance(end_value, int) or isinstance(end, bool):
        raise ValueError(f"reduce_axis {name!r}: bad range end {end!r}")
    if end_value <= begin:
        raise ValueError(f"reduce_axis {name!r}: empty range [{begin}, {end_value})")
    return IterVar(Var(name), end_value - begin, "reduce", begin)


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"tensor names must be non-empty strings, got {name!r}")
    return name


def _check_shape(shape: Iterable[Extent] | Extent, name: str) -> tuple[Extent, ...]:
    shp = tuple(shape) if isinstance(shape, (list, tuple)) else (shape,)
    try:
        return tuple(check_extent(s, f"tensor {name!r}") for s in shp)
    except ValueError:
        raise ValueError(
            f"tensor {name!r}: shape entries must be positive ints or integer expressions "
            f"of asc.var/asc.size_var, got {shp}"
        ) from None


def placeholder(
    shape: Iterable[Extent] | Extent, dtype: str = "float32", name: str = "placeholder"
) -> Tensor:
    """An input tensor; its shape may use shape variables (``asc.size_var``)."""
    name = _check_name(name)
    return Tensor(PlaceholderOp(name, _check_shape(shape, name), _dtype(dtype).name))


def compute(
    shape: Iterable[Extent] | Extent,
    fcompute: Callable[..., ExprLike],
    name: str = "compute",
    tag: str = "",
    attrs: dict[str, Any] | None = None,
) -> Tensor:
    """A tensor whose element at index ``(i, j, ...)`` is ``fcompute(i, j, ...)``.

    The index variables take the names of the lambda's parameters. A reduction (``sum``, ``max``,
    ``min`` over reduce axes) may only be the whole body.
    """
    name = _check_name(name)
    shp = _check_shape(shape, name)
    params = list(inspect.signature(fcompute).parameters.values())
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        names = [f"i{n}" for n in range(len(shp))]
    else:
        names = [p.name for p in params]
    if len(names) != len(shp):
        raise ValueError(
            f"compute {name!r}: shape has {len(shp)} dims but fcompute takes {len(names)} indices"
        )
    axis = tuple(IterVar(Var(n), s, "data") for n, s in zip(names, shp, strict=True))
    body = as_expr(fcompute(*(iv.var for iv in axis)))
    for node in walk(body):
        if isinstance(node, Reduce) and node is not body:
            raise ValueError(f"compute {name!r}: a reduction must be the whole body; put it in its own stage")
    reduce_names = [iv.name for iv in body.axis] if isinstance(body, Reduce) else []
    all_names = names + reduce_names
    if len(set(all_names)) != len(all_names):
        raise ValueError(f"compute {name!r}: axis names must be distinct, got {all_names}")
    shape_vars = {v.name for v in extent_vars(list(shp))}
    for node in walk(body):
        if isinstance(node, Load):
            shape_vars |= {v.name for v in extent_vars(list(node.tensor.shape))}
    if isinstance(body, Reduce):
        shape_vars |= {v.name for v in extent_vars([iv.extent for iv in body.axis])}
    clash = sorted(shape_vars & set(all_names))
    if clash:
        raise ValueError(f"compute {name!r}: axis names {clash} are also shape variables; rename the axes")
    free = {v.name for v in walk(body) if isinstance(v, Var)} - set(all_names) - shape_vars
    if free:
        raise ValueError(
            f"compute {name!r}: body uses variables not bound by it: {sorted(free)} (a shape "
            "variable must appear in the shape of this tensor, of a tensor it reads or of a reduce axis)"
        )
    return Tensor(ComputeOp(name, axis, body, tag, dict(attrs or {})))
