"""Tensor expressions: the DAG a user writes with ``placeholder``, ``compute`` and ``reduce_axis``.

Expression nodes are small frozen dataclasses, so two expressions that print the same are equal and
hash the same. Operations (``PlaceholderOp``, ``ComputeOp``) are compared by identity: a DAG is a
graph of operations, each named, and its structural key comes from :func:`dag_key`.

Comparison operators ``<``, ``<=``, ``>``, ``>=`` build comparison nodes; ``==`` and ``!=`` keep
their Python meaning (structural equality), so use :func:`equal` / :func:`not_equal` in a compute.

Traversal and printing (``walk``, ``rewrite``, ``to_str``, ``dag_key``, ...) live in
:mod:`autosched.expr_visit` and are importable from here too.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Union

from .dtypes import dtype as _dtype
from .dtypes import promote

ExprLike = Union["_Ops", int, float, bool]


class _Ops:
    """Arithmetic operators shared by expressions and iteration variables."""

    __slots__ = ()

    def _expr(self) -> Expr:
        raise NotImplementedError

    def __add__(self, o: ExprLike) -> Expr:
        return binary("add", self, o)

    def __radd__(self, o: ExprLike) -> Expr:
        return binary("add", o, self)

    def __sub__(self, o: ExprLike) -> Expr:
        return binary("sub", self, o)

    def __rsub__(self, o: ExprLike) -> Expr:
        return binary("sub", o, self)

    def __mul__(self, o: ExprLike) -> Expr:
        return binary("mul", self, o)

    def __rmul__(self, o: ExprLike) -> Expr:
        return binary("mul", o, self)

    def __truediv__(self, o: ExprLike) -> Expr:
        return binary("div", self, o)

    def __rtruediv__(self, o: ExprLike) -> Expr:
        return binary("div", o, self)

    def __floordiv__(self, o: ExprLike) -> Expr:
        return binary("floordiv", self, o)

    def __rfloordiv__(self, o: ExprLike) -> Expr:
        return binary("floordiv", o, self)

    def __mod__(self, o: ExprLike) -> Expr:
        return binary("floormod", self, o)

    def __rmod__(self, o: ExprLike) -> Expr:
        return binary("floormod", o, self)

    def __neg__(self) -> Expr:
        return binary("sub", const(0, self._expr().dtype), self)

    def __lt__(self, o: ExprLike) -> Expr:
        return compare("lt", self, o)

    def __le__(self, o: ExprLike) -> Expr:
        return compare("le", self, o)

    def __gt__(self, o: ExprLike) -> Expr:
        return compare("gt", self, o)

    def __ge__(self, o: ExprLike) -> Expr:
        return compare("ge", self, o)

    def __and__(self, o: ExprLike) -> Expr:
        return logic("and", self, o)

    def __or__(self, o: ExprLike) -> Expr:
        return logic("or", self, o)

    def __invert__(self) -> Expr:
        return Not(as_expr(self))

    def __bool__(self) -> bool:
        raise TypeError("a symbolic expression has no truth value; use if_then_else or &, |")

    def astype(self, dtype: str) -> Expr:
        """Cast to ``dtype``."""
        return cast(self, dtype)


class Expr(_Ops):
    """Base of all expression nodes."""

    __slots__ = ()

    @property
    def dtype(self) -> str:
        raise NotImplementedError

    def _expr(self) -> Expr:
        return self

    def __str__(self) -> str:
        return to_str(self)


@dataclass(frozen=True, slots=True)
class Const(Expr):
    value: int | float
    type: str = "int32"

    @property
    def dtype(self) -> str:
        return self.type


@dataclass(frozen=True, slots=True)
class Var(Expr):
    name: str
    type: str = "int32"

    @property
    def dtype(self) -> str:
        return self.type


BINARY_OPS = ("add", "sub", "mul", "div", "floordiv", "floormod", "min", "max")
COMPARE_OPS = ("lt", "le", "gt", "ge", "eq", "ne")


@dataclass(frozen=True, slots=True)
class BinOp(Expr):
    op: str
    a: Expr
    b: Expr
    type: str

    @property
    def dtype(self) -> str:
        return self.type


@dataclass(frozen=True, slots=True)
class Cmp(Expr):
    op: str
    a: Expr
    b: Expr

    @property
    def dtype(self) -> str:
        return "bool"


@dataclass(frozen=True, slots=True)
class Logic(Expr):
    op: str  # "and" | "or"
    a: Expr
    b: Expr

    @property
    def dtype(self) -> str:
        return "bool"


@dataclass(frozen=True, slots=True)
class Not(Expr):
    a: Expr

    @property
    def dtype(self) -> str:
        return "bool"


@dataclass(frozen=True, slots=True)
class Select(Expr):
    cond: Expr
    true_value: Expr
    false_value: Expr

    @property
    def dtype(self) -> str:
        return self.true_value.dtype


@dataclass(frozen=True, slots=True)
class Cast(Expr):
    type: str
    value: Expr

    @property
    def dtype(self) -> str:
        return self.type


MATH_FUNCS = ("exp", "log", "sqrt", "tanh", "sigmoid", "abs", "pow", "erf", "floor", "ceil")


@dataclass(frozen=True, slots=True)
class Call(Expr):
    name: str
    args: tuple[Expr, ...]
    type: str

    @property
    def dtype(self) -> str:
        return self.type


@dataclass(frozen=True, slots=True)
class Load(Expr):
    """Read of ``tensor`` at ``indices`` (what ``A[i, j]`` builds)."""

    tensor: Tensor
    indices: tuple[Expr, ...]

    @property
    def dtype(self) -> str:
        return self.tensor.dtype


REDUCERS = ("sum", "max", "min")


@dataclass(frozen=True, slots=True)
class Reduce(Expr):
    """A reduction of ``source`` over ``axis`` with ``combiner``; only the top of a compute body."""

    combiner: str
    source: Expr
    axis: tuple[IterVar, ...]
    where: Expr | None = None

    @property
    def dtype(self) -> str:
        return self.source.dtype


@dataclass(frozen=True, slots=True)
class IterVar(_Ops):
    """An iteration axis: a variable over ``[begin, begin + extent)``; kind "data" or "reduce"."""

    var: Var
    extent: int
    kind: str = "data"
    begin: int = 0

    @property
    def name(self) -> str:
        return self.var.name

    @property
    def dtype(self) -> str:
        return "int32"

    def _expr(self) -> Expr:
        return self.var


# ---------------------------------------------------------------------------- tensors and ops


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


def const(value: int | float | bool, dtype: str | None = None) -> Const:
    """A constant; the dtype defaults to int32 for ints and float32 for floats."""
    if dtype is None:
        dtype = "float32" if isinstance(value, float) else "bool" if isinstance(value, bool) else "int32"
    d = _dtype(dtype)
    return Const(float(value) if d.is_float else int(value), d.name)


def as_expr(x: ExprLike, like: str | None = None) -> Expr:
    """Turn a Python number or an IterVar into an expression (numbers take the type ``like``)."""
    if isinstance(x, Expr):
        return x
    if isinstance(x, IterVar):
        return x.var
    if isinstance(x, bool):
        return const(x, "bool")
    if isinstance(x, int):
        if like is not None and _dtype(like).is_float:
            return const(float(x), like)
        return const(x, like if like is not None and like != "bool" else "int32")
    if isinstance(x, float):
        return const(x, like if like is not None and _dtype(like).is_float else "float32")
    raise TypeError(f"cannot use {type(x).__name__} {x!r} in a tensor expression")


def _pair(a: ExprLike, b: ExprLike) -> tuple[Expr, Expr]:
    """Convert both operands; a Python number takes the type of the other operand."""
    if isinstance(a, (Expr, IterVar)):
        ea = as_expr(a)
        return ea, as_expr(b, ea.dtype)
    eb = as_expr(b)
    return as_expr(a, eb.dtype), eb


def binary(op: str, a: ExprLike, b: ExprLike) -> Expr:
    """Build a binary arithmetic node with type promotion."""
    ea, eb = _pair(a, b)
    t = promote(ea.dtype, eb.dtype)
    if t == "bool":
        raise TypeError(f"arithmetic '{op}' on booleans: {ea}, {eb}")
    is_float = _dtype(t).is_float
    if op == "div" and not is_float:
        raise TypeError(f"'/' on integers ({ea} / {eb}) is ambiguous; use // (floor division)")
    if op in ("floordiv", "floormod") and is_float:
        raise TypeError(f"'{op}' needs integer operands, got {t}")
    if ea.dtype != t:
        ea = Cast(t, ea)
    if eb.dtype != t:
        eb = Cast(t, eb)
    return BinOp(op, ea, eb, t)


def compare(op: str, a: ExprLike, b: ExprLike) -> Expr:
    """Build a comparison node."""
    ea, eb = _pair(a, b)
    return Cmp(op, ea, eb)


def logic(op: str, a: ExprLike, b: ExprLike) -> Expr:
    """Logical and/or of two conditions."""
    return Logic(op, as_expr(a), as_expr(b))


def equal(a: ExprLike, b: ExprLike) -> Expr:
    """``a == b`` as an expression node."""
    return compare("eq", a, b)


def not_equal(a: ExprLike, b: ExprLike) -> Expr:
    """``a != b`` as an expression node."""
    return compare("ne", a, b)


def all(*conds: ExprLike) -> Expr:  # noqa: A001 - te's name
    """Conjunction of conditions."""
    out = as_expr(conds[0])
    for c in conds[1:]:
        out = Logic("and", out, as_expr(c))
    return out


def if_then_else(cond: ExprLike, t: ExprLike, f: ExprLike) -> Expr:
    """``t`` where ``cond`` holds, else ``f``."""
    et, ef = _pair(t, f)
    ty = promote(et.dtype, ef.dtype)
    et = et if et.dtype == ty else Cast(ty, et)
    ef = ef if ef.dtype == ty else Cast(ty, ef)
    return Select(as_expr(cond), et, ef)


def cast(x: ExprLike, dtype: str) -> Expr:
    """Convert ``x`` to ``dtype``."""
    e = as_expr(x)
    d = _dtype(dtype).name
    return e if e.dtype == d else Cast(d, e)


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


# Traversal and printing, re-exported.
from .expr_math import (  # noqa: E402, F401 - last: expr_math builds on the classes above
    abs,
    ceil,
    erf,
    exp,
    floor,
    log,
    max,
    min,
    pow,
    sigmoid,
    sqrt,
    sum,
    tanh,
)
from .expr_visit import (  # noqa: E402, F401 - last: expr_visit imports the classes above
    INFIX,
    as_tensors,
    children,
    dag_key,
    op_to_str,
    rewrite,
    substitute,
    to_str,
    topo_order,
    walk,
)
