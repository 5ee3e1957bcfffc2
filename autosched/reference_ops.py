"""The numpy side of the reference evaluator's expressions: operator tables, built-in reducers,
affine index analysis and out-of-bounds masks (used by :mod:`autosched.reference`)."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable

import numpy as np

from .dtypes import dtype as _dtype
from .expr import BinOp, Cast, Const, Expr, Var


def builtin_reducer(combiner: str, dt: np.dtype) -> tuple[np.ufunc, object, np.dtype]:
    """(ufunc, identity, accumulator dtype) of a combiner for values of ``dt``; sums go to 64 bits."""
    if combiner == "sum":
        return np.add, 0, np.dtype(np.float64 if dt.kind == "f" else np.int64)
    if combiner == "max":
        low = -np.inf if dt.kind == "f" else (False if dt.kind == "b" else np.iinfo(dt).min)
        return np.maximum, low, dt
    if combiner == "min":
        high = np.inf if dt.kind == "f" else (True if dt.kind == "b" else np.iinfo(dt).max)
        return np.minimum, high, dt
    raise ValueError(f"unknown reduction combiner {combiner!r}")


def or_mask(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    """The union of two out-of-bounds masks, either of which may be None (nothing out of bounds)."""
    if a is None:
        return b
    return a if b is None else a | b


def affine(e: Expr) -> tuple[dict[str, int], int] | None:
    """``e`` as ``({var: coefficient}, constant)`` when it is affine in its variables, else None."""
    if isinstance(e, Var):
        return {e.name: 1}, 0
    if isinstance(e, Const):
        return ({}, int(e.value)) if isinstance(e.value, int) and not isinstance(e.value, bool) else None
    if isinstance(e, Cast) and not _dtype(e.type).is_float and not _dtype(e.value.dtype).is_float:
        return affine(e.value) if e.type != "bool" else None
    if not isinstance(e, BinOp) or e.op not in ("add", "sub", "mul"):
        return None
    a, b = affine(e.a), affine(e.b)
    if a is None or b is None:
        return None
    if e.op == "mul":
        if a[0] and b[0]:
            return None
        (coefs, c), k = (a, b[1]) if not b[0] else (b, a[1])
        return {v: k * x for v, x in coefs.items()}, c * k
    sign = 1 if e.op == "add" else -1
    coefs = dict(a[0])
    for v, x in b[0].items():
        coefs[v] = coefs.get(v, 0) + sign * x
    return coefs, a[1] + sign * b[1]


BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "floordiv": np.floor_divide,
    "floormod": np.remainder,
    "min": np.minimum,
    "max": np.maximum,
}
COMPARE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
}


def _erf(x: np.ndarray) -> np.ndarray:
    try:
        special = importlib.import_module("scipy.special")
    except ImportError:
        return np.vectorize(math.erf, otypes=[np.float64])(x)
    return special.erf(x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    one = x.dtype.type(1)
    return one / (one + np.exp(-x))


MATH: dict[str, Callable[..., np.ndarray]] = {
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
    "abs": np.abs,
    "pow": np.power,
    "erf": _erf,
    "floor": np.floor,
    "ceil": np.ceil,
}
