"""Symbolic sizes: ``var`` / ``size_var`` and the helpers for extents that may be expressions.

A tensor dimension or a loop extent is an :data:`~.nodes.Extent`: a Python int, or an integer
expression of *shape variables* (``n = asc.size_var("n")``; ``(n, 2 * m)``; ``n - 2``). A kernel
built over such tensors takes the values of its shape variables from the arrays it is called with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ..dtypes import dtype as _dtype
from .nodes import BinOp, Cast, Const, Expr, Extent, Var, binary
from .traverse import children

#: dtypes a var may have: integers (shape variables or scalar arguments) and floats (scalar arguments)
VAR_DTYPES = ("int32", "int64", "float32", "float64")


def var(name: str = "tindex", dtype: str = "int32") -> Var:
    """A symbolic value (TVM's ``te.var``). An integer var may be a shape variable (a kernel reads
    its value from the arrays) or, like a float var, a scalar argument: listed in the arguments of
    ``asc.build`` / ``asc.lower`` / ``asc.emit``, the kernel takes its value at that position."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"var names must be non-empty strings, got {name!r}")
    d = _dtype(dtype)
    if d.name not in VAR_DTYPES:
        raise TypeError(f"var {name!r}: dtype {dtype} is not supported; use one of {', '.join(VAR_DTYPES)}")
    return Var(name, d.name)


def size_var(name: str = "size", dtype: str = "int32") -> Var:
    """A symbolic size (TVM's ``te.size_var``): an integer :func:`var` known to be non-negative.

    Here every shape variable is a size (a built kernel reads it from an array's shape, which is
    never negative), so this is :func:`var` under TVM's name.
    """
    if _dtype(dtype).is_float:
        raise TypeError(f"size_var {name!r}: a size must have an integer dtype, got {dtype}")
    return var(name, dtype)


def is_static(e: Extent) -> bool:
    """Whether an extent is a known number (a Python int or a constant)."""
    return isinstance(e, (int, Const))


def static(e: Extent) -> int | None:
    """The value of a known extent, else None."""
    if isinstance(e, bool):
        return int(e)
    if isinstance(e, int):
        return e
    if isinstance(e, Const):
        return int(e.value)
    return None


def extent_vars(e: Extent | Iterable[Extent]) -> list[Var]:
    """The shape variables an extent (or a list of extents) uses, in order of first appearance."""
    items = list(e) if isinstance(e, (list, tuple)) else [e]
    out: list[Var] = []
    for item in items:
        if isinstance(item, Expr):
            _vars_into(item, out)
    return out


def _vars_into(node: Expr, out: list[Var]) -> None:
    if isinstance(node, Var):
        if node not in out:
            out.append(node)
        return
    for c in children(node):
        _vars_into(c, out)


def check_extent(e: object, what: str) -> Extent:
    """An extent as given in a shape or a reduce axis: a positive int or an integer expression."""
    if isinstance(e, bool):
        raise ValueError(f"{what}: extents must be positive ints or integer expressions, got {e!r}")
    if isinstance(e, int):
        if e <= 0:
            raise ValueError(f"{what}: extents must be positive, got {e}")
        return e
    if hasattr(e, "_expr") and not isinstance(e, Expr):  # an IterVar
        raise ValueError(f"{what}: a loop axis cannot be an extent; use a var or an int")
    if isinstance(e, Expr):
        if _dtype(e.dtype).is_float or e.dtype == "bool":
            raise ValueError(
                f"{what}: extents must be integer expressions, got {e.dtype} {e} "
                "(a float var is a scalar argument, not a size)"
            )
        if isinstance(e, Const):
            return check_extent(int(e.value), what)
        return e
    raise ValueError(f"{what}: extents must be positive ints or integer expressions, got {e!r}")


def ext_add(a: Extent, b: Extent) -> Extent:
    """``a + b`` on extents (ints stay ints)."""
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    return binary("add", a, b)


def ext_sub(a: Extent, b: Extent) -> Extent:
    """``a - b`` on extents (ints stay ints)."""
    if isinstance(a, int) and isinstance(b, int):
        return a - b
    return binary("sub", a, b)


def ext_mul(a: Extent, b: Extent) -> Extent:
    """``a * b`` on extents (ints stay ints)."""
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    return binary("mul", a, b)


def ext_ceil_div(a: Extent, b: int) -> Extent:
    """``ceil(a / b)`` for a non-negative extent and a positive int."""
    if isinstance(a, int):
        return -(-a // b)
    if b == 1:
        return a
    return BinOp("floordiv", binary("add", a, b - 1), Const(b), a.dtype)


def ext_floor_div(a: Extent, b: int) -> Extent:
    """``floor(a / b)`` for a non-negative extent and a positive int."""
    if isinstance(a, int):
        return a // b
    if b == 1:
        return a
    return BinOp("floordiv", a, Const(b), a.dtype)


_INT_OPS: dict[str, Callable[[int, int], int]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b,
    "floormod": lambda a, b: a % b,
    "min": min,
    "max": max,
}


def evaluate(e: Extent, env: Mapping[str, int]) -> int:
    """The value of an integer extent with shape variables given by name in ``env``."""
    if isinstance(e, int):
        return e
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Var):
        if e.name not in env:
            raise KeyError(e.name)
        return int(env[e.name])
    if isinstance(e, Cast):
        return evaluate(e.value, env)
    if isinstance(e, BinOp) and e.op in _INT_OPS:
        return _INT_OPS[e.op](evaluate(e.a, env), evaluate(e.b, env))
    raise ValueError(f"cannot evaluate {e} as an integer size")


def as_int(e: Extent, what: str = "extent") -> int:
    """A known extent as an int; a symbolic one raises ValueError (fixed-size code paths: built-in
    operators, templates, tuning tasks, the numpy reference, which need every size)."""
    value = static(e)
    if value is None:
        raise ValueError(
            f"{what} {e} is symbolic here; bind its shape variables to sizes first (autosched.expr.bind)"
        )
    return value


def static_shape(shape: Iterable[Extent], what: str = "shape") -> tuple[int, ...]:
    """A shape of known extents as ints (see :func:`as_int`)."""
    return tuple(as_int(d, what) for d in shape)
