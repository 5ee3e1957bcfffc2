"""Expression nodes: the frozen dataclasses of a tensor expression, their constructors and printing.

Expression nodes are small frozen dataclasses, so two expressions that print the same are equal and
hash the same. ``_Ops`` gives nodes and iteration variables their arithmetic operators, which build
nodes with :func:`binary`, :func:`compare` and :func:`logic`; ``str(e)`` is :func:`to_str`. So the
classes, the constructors and the printer are one module, with nothing of autosched under it but
:mod:`autosched.dtypes`. Tensors and operations (what ``Load`` reads) are in :mod:`.tensor`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from ..dtypes import dtype as _dtype
from ..dtypes import promote

if TYPE_CHECKING:  # annotations only: tensor.py and reducers.py build on this module
    from .reducers import CommReducer
    from .tensor import Tensor

ExprLike = Union["_Ops", int, float, bool]
#: a loop extent or a tensor dimension: a constant, or an integer expression of shape variables
#: (``asc.var`` / ``asc.size_var``) whose value a built kernel takes from its arrays
Extent = Union[int, "Expr"]


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

    def equal(self, o: ExprLike) -> Expr:
        """``self == o`` as an expression node (te's ``PrimExpr.equal``)."""
        return compare("eq", self, o)

    def not_equal(self, o: ExprLike) -> Expr:
        """``self != o`` as an expression node."""
        return compare("ne", self, o)


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
    """A reduction of ``source`` over ``axis`` with ``combiner``; only the top of a compute body.

    ``combiner`` is a built-in name (:data:`REDUCERS`) or a :class:`CommReducer`. A tuple reducer
    (argmax over (index, value)) gives one ``Reduce`` per component: ``sources`` holds every
    component's source, ``value_index`` says which one this is, and ``source`` is that one.
    """

    combiner: str | CommReducer
    source: Expr
    axis: tuple[IterVar, ...]
    where: Expr | None = None
    value_index: int = 0
    sources: tuple[Expr, ...] = ()

    @property
    def dtype(self) -> str:
        return self.source.dtype

    @property
    def all_sources(self) -> tuple[Expr, ...]:
        """Every component's source (one entry unless this is a tuple reduction)."""
        return self.sources or (self.source,)


@dataclass(frozen=True, slots=True)
class IterVar(_Ops):
    """An iteration axis: a variable over ``[begin, begin + extent)``; kind "data" or "reduce"."""

    var: Var
    extent: Extent
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


def as_pair(a: ExprLike, b: ExprLike) -> tuple[Expr, Expr]:
    """Convert both operands; a Python number takes the type of the other operand."""
    if isinstance(a, (Expr, IterVar)):
        ea = as_expr(a)
        return ea, as_expr(b, ea.dtype)
    eb = as_expr(b)
    return as_expr(a, eb.dtype), eb


def binary(op: str, a: ExprLike, b: ExprLike) -> Expr:
    """Build a binary arithmetic node with type promotion."""
    ea, eb = as_pair(a, b)
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
    ea, eb = as_pair(a, b)
    return Cmp(op, ea, eb)


def logic(op: str, a: ExprLike, b: ExprLike) -> Expr:
    """Logical and/or of two conditions."""
    return Logic(op, as_expr(a), as_expr(b))


def cast(x: ExprLike, dtype: str) -> Expr:
    """Convert ``x`` to ``dtype``."""
    e = as_expr(x)
    d = _dtype(dtype).name
    return e if e.dtype == d else Cast(d, e)


# ---------------------------------------------------------------------------- printing

# Operators written infix, with the same symbol here and in C (the C printer uses this table).
INFIX = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "eq": "==",
    "ne": "!=",
    "and": "&&",
    "or": "||",
}
_SYM = INFIX | {"floordiv": "//", "floormod": "%"}


def to_str(e: Expr) -> str:
    """A readable, deterministic rendering of an expression."""
    if isinstance(e, Const):
        return repr(e.value) if e.type in ("int32", "float32", "bool") else f"{e.type}({e.value!r})"
    if isinstance(e, Var):
        return e.name
    if isinstance(e, BinOp) and e.op in ("min", "max"):
        return f"{e.op}({to_str(e.a)}, {to_str(e.b)})"
    if isinstance(e, (BinOp, Cmp, Logic)):
        return f"({to_str(e.a)} {_SYM[e.op]} {to_str(e.b)})"
    if isinstance(e, Not):
        return f"!{to_str(e.a)}"
    if isinstance(e, Select):
        return f"select({to_str(e.cond)}, {to_str(e.true_value)}, {to_str(e.false_value)})"
    if isinstance(e, Cast):
        return f"{e.type}({to_str(e.value)})"
    if isinstance(e, Call):
        return f"{e.name}({', '.join(to_str(a) for a in e.args)})"
    if isinstance(e, Load):
        return f"{e.tensor.name}[{', '.join(to_str(i) for i in e.indices)}]"
    if isinstance(e, Reduce):
        axes = ", ".join(f"{iv.name}:[{iv.begin},{iv.begin + iv.extent})" for iv in e.axis)
        where = "" if e.where is None else f", where={to_str(e.where)}"
        name = e.combiner if isinstance(e.combiner, str) else e.combiner.render()
        if e.sources:
            srcs = ", ".join(to_str(x) for x in e.sources)
            return f"{name}(({srcs}), axis=[{axes}]{where})[{e.value_index}]"
        return f"{name}({to_str(e.source)}, axis=[{axes}]{where})"
    if hasattr(e, "render"):
        return str(e.render(to_str))
    raise TypeError(f"not an expression: {e!r}")
