"""User-defined reductions, as te's ``comm_reducer``, and the extreme values of a dtype.

``comm_reducer(combine, identity, name)`` gives a callable used like ``sum``:
``reducer(expr, axis=k, where=...)``. ``combine(lhs, rhs)`` gets the accumulator ``lhs`` and a new
element ``rhs`` (single variables, or tuples of them for a tuple reducer) and returns the new
accumulator; ``identity(*dtypes)`` returns the neutral element(s). Reduce axes are visited in
increasing order, so with the argmax of te's tutorial (``x[1] >= y[1]`` keeps the accumulator)
the first of equal maxima wins, as with ``numpy.argmax``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import dtype as _dtype
from ..dtypes import numpy_dtype
from .nodes import Const, Expr, ExprLike, IterVar, Reduce, Var, as_expr, cast, const, to_str
from .traverse import walk


@dataclass(frozen=True, slots=True)
class CommReducer:
    """A user's commutative reducer (what ``comm_reducer`` builds for the dtypes of one call):
    ``result[c]`` combines the accumulators ``lhs`` with a new element ``rhs``; ``identity[c]`` is
    the neutral element of component ``c``. A reducer over one value has one component."""

    name: str
    lhs: tuple[Var, ...]
    rhs: tuple[Var, ...]
    result: tuple[Expr, ...]
    identity: tuple[Expr, ...]

    def render(self) -> str:
        """A deterministic text with the whole definition (structural keys include it)."""
        def row(xs: tuple[Expr, ...]) -> str:
            return ", ".join(to_str(x) for x in xs)

        args = f"({row(self.lhs)}), ({row(self.rhs)})"
        return f"{self.name}<{args} -> ({row(self.result)}); ({row(self.identity)})>"


def min_value(dtype: str) -> Const:
    """The lowest finite value of ``dtype`` (te's ``min_value``)."""
    d = _dtype(dtype)
    if d.name == "bool":
        return const(False, "bool")
    info = np.finfo(numpy_dtype(d.name)) if d.is_float else np.iinfo(numpy_dtype(d.name))
    return const(float(info.min) if d.is_float else int(info.min), d.name)


def max_value(dtype: str) -> Const:
    """The highest finite value of ``dtype`` (te's ``max_value``)."""
    d = _dtype(dtype)
    if d.name == "bool":
        return const(True, "bool")
    info = np.finfo(numpy_dtype(d.name)) if d.is_float else np.iinfo(numpy_dtype(d.name))
    return const(float(info.max) if d.is_float else int(info.max), d.name)


def _components(value: Any, n: int, what: str, dtypes: Sequence[str], name: str) -> tuple[Expr, ...]:
    """``value`` (one expression, or a tuple of ``n``) as expressions cast to ``dtypes``."""
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if len(items) != n:
        raise ValueError(f"comm_reducer {name!r}: {what} gave {len(items)} values for a reduction of {n}")
    return tuple(cast(as_expr(x, dt), dt) for x, dt in zip(items, dtypes, strict=True))


class Reducer:
    """A commutative reduction made by :func:`comm_reducer`; call it as ``sum`` is called."""

    def __init__(
        self, fcombine: Callable[..., Any], fidentity: Callable[..., Any], name: str = "reduce"
    ) -> None:
        if not callable(fcombine) or not callable(fidentity):
            raise TypeError("comm_reducer(combine, identity): both must be callables")
        self.fcombine = fcombine
        self.fidentity = fidentity
        self.name = str(name)

    def __repr__(self) -> str:
        return f"comm_reducer({self.name!r})"

    def _combine_values(self, values: Sequence[Any]) -> Expr:
        """``combine`` folded over two or more scalar expressions of one dtype, from the left."""
        if any(isinstance(v, (tuple, list)) for v in values):
            raise TypeError(f"comm_reducer {self.name!r}: combine values element by element one at a time")
        exprs = [as_expr(v) for v in values]
        acc = exprs[0]
        for e in exprs[1:]:
            acc = cast(as_expr(self.fcombine(acc, e)), acc.dtype)
        return acc

    def __call__(
        self,
        expr: ExprLike | Sequence[ExprLike],
        axis: IterVar | Sequence[IterVar] | ExprLike,
        where: ExprLike | None = None,
        *more: ExprLike,
    ) -> Expr | tuple[Reduce, ...]:
        """The reduction of ``expr`` (one expression, or a tuple for a tuple reducer) over ``axis``;
        a tuple reducer gives one :class:`Reduce` per component, for a compute returning them.

        Called on plain values instead (``reducer(a, b, ...)``, as te allows), it combines them
        element by element, from the left: ``combine(combine(a, b), c)``."""
        if not isinstance(axis, (IterVar, tuple, list)):
            return self._combine_values([expr, axis, *(() if where is None else (where,)), *more])
        if more:
            raise TypeError(f"{self.name}: extra arguments after axis and where: {more}")
        is_tuple = isinstance(expr, (tuple, list))
        items: Sequence[Any] = expr if isinstance(expr, (tuple, list)) else (expr,)
        srcs = tuple(as_expr(x) for x in items)
        if not srcs:
            raise ValueError(f"comm_reducer {self.name!r}: nothing to reduce")
        axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
        if not axes:
            raise ValueError(f"{self.name}: give at least one reduce_axis")
        for a in axes:
            if not isinstance(a, IterVar) or a.kind != "reduce":
                raise TypeError(f"{self.name}: axis must be created with reduce_axis, got {a!r}")
        dtypes = [s.dtype for s in srcs]
        n = len(srcs)
        lhs = tuple(Var(f"x{c}" if is_tuple else "x", dt) for c, dt in enumerate(dtypes))
        rhs = tuple(Var(f"y{c}" if is_tuple else "y", dt) for c, dt in enumerate(dtypes))
        combined = self.fcombine(lhs if is_tuple else lhs[0], rhs if is_tuple else rhs[0])
        result = _components(combined, n, "combine", dtypes, self.name)
        free = {v for r in result for v in walk(r) if isinstance(v, Var)} - set(lhs) - set(rhs)
        if free:
            raise ValueError(
                f"comm_reducer {self.name!r}: combine uses variables other than its two arguments: "
                f"{sorted(v.name for v in free)}"
            )
        identity = _components(self.fidentity(*dtypes), n, "identity", dtypes, self.name)
        if any(isinstance(v, Var) for e in identity for v in walk(e)):
            raise ValueError(f"comm_reducer {self.name!r}: the identity must be constants")
        cond = None if where is None else as_expr(where)
        reducer = CommReducer(self.name, lhs, rhs, result, identity)
        if not is_tuple:
            return Reduce(reducer, srcs[0], axes, cond)
        return tuple(Reduce(reducer, srcs[c], axes, cond, c, srcs) for c in range(n))


def comm_reducer(
    fcombine: Callable[..., Any], fidentity: Callable[..., Any], name: str = "reduce"
) -> Reducer:
    """A commutative reducer from ``combine(lhs, rhs)`` and ``identity(*dtypes)`` (te's
    ``comm_reducer``); over tuples it reduces several values together (argmax over (index, value))."""
    return Reducer(fcombine, fidentity, name)
