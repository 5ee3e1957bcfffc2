"""te's functions over expressions: math (exp, log, ...), reductions (sum, max, min) and conditions
(equal, not_equal, all, if_then_else). :mod:`autosched.expr` re-exports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..dtypes import dtype as _dtype
from ..dtypes import promote
from .nodes import (
    Call,
    Cast,
    Expr,
    ExprLike,
    IterVar,
    Logic,
    Reduce,
    Select,
    as_expr,
    as_pair,
    binary,
    cast,
    compare,
)


def _math(name: str, *args: ExprLike) -> Expr:
    exprs = [as_expr(a) for a in args]
    t = exprs[0].dtype
    for e in exprs[1:]:
        t = promote(t, e.dtype)
    if not _dtype(t).is_float and name != "abs":
        t = "float32"
    return Call(name, tuple(cast(e, t) for e in exprs), t)


def exp(x: ExprLike) -> Expr:
    """Elementwise e**x."""
    return _math("exp", x)


def log(x: ExprLike) -> Expr:
    """Natural logarithm."""
    return _math("log", x)


def sqrt(x: ExprLike) -> Expr:
    """Square root."""
    return _math("sqrt", x)


def tanh(x: ExprLike) -> Expr:
    """Hyperbolic tangent."""
    return _math("tanh", x)


def sigmoid(x: ExprLike) -> Expr:
    """Logistic function 1 / (1 + e**-x)."""
    return _math("sigmoid", x)


def erf(x: ExprLike) -> Expr:
    """Gauss error function."""
    return _math("erf", x)


def floor(x: ExprLike) -> Expr:
    """Round down (floats)."""
    return _math("floor", x)


def ceil(x: ExprLike) -> Expr:
    """Round up (floats)."""
    return _math("ceil", x)


def abs(x: ExprLike) -> Expr:  # noqa: A001 - te's name
    """Absolute value."""
    return _math("abs", x)


def pow(x: ExprLike, y: ExprLike) -> Expr:  # noqa: A001 - te's name
    """``x`` to the power ``y``."""
    return _math("pow", x, y)


def _reduce(
    combiner: str, source: ExprLike, axis: IterVar | Sequence[IterVar], where: ExprLike | None
) -> Reduce:
    axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
    if not axes:
        raise ValueError(f"{combiner}: give at least one reduce_axis")
    for a in axes:
        if not isinstance(a, IterVar) or a.kind != "reduce":
            raise TypeError(f"{combiner}: axis must be created with reduce_axis, got {a!r}")
    return Reduce(combiner, as_expr(source), axes, None if where is None else as_expr(where))


def sum(expr: ExprLike, axis: IterVar | Sequence[IterVar], where: ExprLike | None = None) -> Reduce:  # noqa: A001
    """Sum of ``expr`` over the reduce axes ``axis``."""
    return _reduce("sum", expr, axis, where)


def max(a: ExprLike, axis: Any = None, where: ExprLike | None = None) -> Expr:  # noqa: A001
    """``max(expr, axis=k)`` reduces over ``k``; ``max(a, b)`` is elementwise."""
    if isinstance(axis, IterVar) and axis.kind == "reduce" or isinstance(axis, (list, tuple)):
        return _reduce("max", a, axis, where)
    return binary("max", a, axis)


def min(a: ExprLike, axis: Any = None, where: ExprLike | None = None) -> Expr:  # noqa: A001
    """``min(expr, axis=k)`` reduces over ``k``; ``min(a, b)`` is elementwise."""
    if isinstance(axis, IterVar) and axis.kind == "reduce" or isinstance(axis, (list, tuple)):
        return _reduce("min", a, axis, where)
    return binary("min", a, axis)


# ---------------------------------------------------------------------------- conditions


def equal(a: ExprLike, b: ExprLike) -> Expr:
    """``a == b`` as an expression node."""
    return compare("eq", a, b)


def not_equal(a: ExprLike, b: ExprLike) -> Expr:
    """``a != b`` as an expression node."""
    return compare("ne", a, b)


def indexdiv(a: ExprLike, b: ExprLike) -> Expr:
    """Floor division of integers (te's ``indexdiv`` / ``floordiv``: ``a // b``)."""
    return binary("floordiv", a, b)


def indexmod(a: ExprLike, b: ExprLike) -> Expr:
    """Floor remainder of integers (te's ``indexmod`` / ``floormod``: ``a % b``)."""
    return binary("floormod", a, b)


def all(*conds: ExprLike) -> Expr:  # noqa: A001 - te's name
    """Conjunction of conditions."""
    out = as_expr(conds[0])
    for c in conds[1:]:
        out = Logic("and", out, as_expr(c))
    return out


def if_then_else(cond: ExprLike, t: ExprLike, f: ExprLike) -> Expr:
    """``t`` where ``cond`` holds, else ``f``."""
    et, ef = as_pair(t, f)
    ty = promote(et.dtype, ef.dtype)
    et = et if et.dtype == ty else Cast(ty, et)
    ef = ef if ef.dtype == ty else Cast(ty, ef)
    return Select(as_expr(cond), et, ef)
