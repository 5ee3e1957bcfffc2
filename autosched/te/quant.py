"""Quantization as expressions: ``quantize``, ``dequantize``, ``requantize`` and the rounding they
share, built from ordinary nodes (casts, ``floor``, ``min``/``max``, selects), so that they print
in any emitter, evaluate in the numpy reference and fuse into a stage's epilogue like any other
elementwise expression.

The scale and zero point are numbers (per tensor) or expressions such as ``S[j]`` (per channel).
Rounding is half to even (numpy's ``rint``), exact for every float32 value (computed in float64);
the result saturates to the integer type's range before the cast.
"""

from __future__ import annotations

import math

from ..dtypes import dtype as _dtype
from .functions import floor, if_then_else
from .functions import max as _max
from .functions import min as _min
from .nodes import Const, Expr, ExprLike, as_expr, cast, compare, logic

_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "int32": (-(2**31), 2**31 - 1)}


def _scale(value: ExprLike, who: str) -> Expr:
    """``value`` as an expression; a constant must be a finite non-zero number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value == 0 or not math.isfinite(value):
            raise ValueError(f"{who}: the scale must be a finite non-zero number, got {value!r}")
        return Const(float(value), "float32")
    e = as_expr(value)
    if isinstance(e, Const) and (e.value == 0 or not math.isfinite(float(e.value))):
        raise ValueError(f"{who}: the scale must be a finite non-zero number, got {e.value!r}")
    return e


def _int_range(dtype: str, who: str) -> tuple[int, int]:
    if dtype not in _RANGES:
        raise ValueError(f"{who}: dtype must be one of {', '.join(_RANGES)}, got {dtype!r}")
    return _RANGES[dtype]


def round_half_even(x: ExprLike) -> Expr:
    """``x`` rounded to the nearest integer, ties to even (numpy's ``rint``), as a float64: exact
    for every float32 or float64 ``x`` below 2^52 in magnitude."""
    w = cast(x, "float64")
    t = floor(w + 0.5)
    tie = compare("eq", t - w, 0.5)
    odd = compare("eq", t - 2.0 * floor(t * 0.5), 1.0)
    return if_then_else(logic("and", tie, odd), t - 1.0, t)


def saturate(x: ExprLike, dtype: str) -> Expr:
    """``x`` (a float) clamped to the range of the integer ``dtype``, then cast to it."""
    lo, hi = _int_range(dtype, "saturate")
    w = cast(x, "float64")
    return cast(_max(_min(w, float(hi)), float(lo)), dtype)


def quantize(x: ExprLike, scale: ExprLike, zero_point: ExprLike = 0, dtype: str = "int8") -> Expr:
    """``saturate(round_half_even(x / scale) + zero_point)`` as ``dtype`` (int8, uint8, int16,
    int32); the division is in ``x``'s float type."""
    _int_range(dtype, "quantize")
    e = as_expr(x)
    if not _dtype(e.dtype).is_float:
        raise ValueError(f"quantize: x must be a float expression, got {e.dtype}")
    s = _scale(scale, "quantize")
    q = round_half_even(e / cast(s, e.dtype)) + cast(zero_point, "float64")
    return saturate(q, dtype)


def dequantize(q: ExprLike, scale: ExprLike, zero_point: ExprLike = 0, dtype: str = "float32") -> Expr:
    """``(q - zero_point) * scale`` in the float ``dtype``."""
    s = _scale(scale, "dequantize")
    return (cast(q, dtype) - cast(zero_point, dtype)) * cast(s, dtype)


def requantize(acc: ExprLike, multiplier: ExprLike, zero_point: ExprLike = 0, dtype: str = "int8") -> Expr:
    """An int32 accumulator to ``dtype``: ``saturate(round_half_even(acc * multiplier) +
    zero_point)`` with ``multiplier`` = (input scale * weight scale) / output scale, the product
    in float64 (exact for any int32 ``acc`` and float32 ``multiplier``)."""
    _int_range(dtype, "requantize")
    m = _scale(multiplier, "requantize")
    q = round_half_even(cast(acc, "float64") * cast(m, "float64")) + cast(zero_point, "float64")
    return saturate(q, dtype)
