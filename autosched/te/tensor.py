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
from .nodes import Expr, ExprLike, IterVar, Load, Reduce, Var, as_expr
from .traverse import walk


@dataclass(eq=False, slots=True)
class PlaceholderOp:
    """An input tensor of the DAG."""

    name: str
    shape: tuple[int, ...]
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
    def shape(self) -> tuple[int, ...]:
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
    def shape(self) -> tuple[int, ...]:
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
        return f"Tensor({self.name}, shape={self.shape}, dtype={self.dtype})"


# ---------------------------------------------------------------------------- constructors


def reduce_axis(dom: int | tuple[int, int], name: str = "k") -> IterVar:
    """A reduction axis over ``range(dom)`` or over ``[begin, end)`` when ``dom`` is a pair."""
    begin, end = (0, dom) if isinstance(dom, int) else (int(dom[0]), int(dom[1]))
    if end <= begin:
        raise ValueError(f"reduce_axis {name!r}: empty range [{begin}, {end})")
    return IterVar(Var(name), end - begin, "reduce", begin)


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"tensor names must be non-empty strings, got {name!r}")
    return name


def _check_shape(shape: Iterable[int] | int, name: str) -> tuple[int, ...]:
    shp = tuple(shape) if not isinstance(shape, int) else (shape,)
    for s in shp:
        if not isinstance(s, int) or isinstance(s, bool) or s <= 0:
            raise ValueError(f"tensor {name!r}: shape entries must be positive ints, got {shp}")
    return shp


def placeholder(shape: Iterable[int] | int, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor."""
    name = _check_name(name)
    return Tensor(PlaceholderOp(name, _check_shape(shape, name), _dtype(dtype).name))


def compute(
    shape: Iterable[int] | int,
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
    free = {v.name for v in walk(body) if isinstance(v, Var)} - set(all_names)
    if free:
        raise ValueError(f"compute {name!r}: body uses variables not bound by it: {sorted(free)}")
    return Tensor(ComputeOp(name, axis, body, tag, dict(attrs or {})))
