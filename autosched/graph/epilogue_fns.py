"""The elementwise functions of one operand that an epilogue may apply (beyond relu, gelu and
sigmoid, which :mod:`.epilogue` spells as before), and how a step with parameters is spelled.

A step is the function's name, then its parameters each after a colon, written with ``repr`` so
that they read back to the same float: ``clip:0.0:6.0`` (ReLU6), ``leaky_relu:0.01``,
``hard_sigmoid:0.2:0.5``, ``elu:1.0``, ``pow_scalar:2.0`` (x to a constant power; ``pow`` is the
step of two tensors). An unbounded side of a clip is ``-inf`` / ``inf``. Each function has a te
builder and a numpy reference, written independently of each other.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import expr as te
from ..expr import Expr
from ..te import quant

Params = tuple[float, ...]


@dataclass(frozen=True, slots=True)
class UnaryFn:
    """One function: its parameters' names and defaults (None: required), its te builder
    ``build(x, dtype, params)`` and its numpy reference ``numpy(x, params)`` (float64)."""

    params: tuple[str, ...]
    defaults: tuple[float | None, ...]
    build: Callable[[Expr, str, Params], Expr]
    numpy: Callable[[np.ndarray, Params], np.ndarray]


def _c(value: float, dtype: str) -> Expr:
    return te.const(value, dtype)


def _clip_te(x: Expr, dtype: str, p: Params) -> Expr:
    lo, hi = p
    out = x if math.isinf(lo) else te.max(x, _c(lo, dtype))
    return out if math.isinf(hi) else te.min(out, _c(hi, dtype))


def _softplus_te(x: Expr, dtype: str, p: Params) -> Expr:  # never overflows: max(x, 0) + log(1 + e^-|x|)
    return te.max(x, _c(0.0, dtype)) + te.log(_c(1.0, dtype) + te.exp(-te.abs(x)))


def _hard_sigmoid_te(x: Expr, dtype: str, p: Params) -> Expr:
    return te.max(_c(0.0, dtype), te.min(_c(1.0, dtype), x * _c(p[0], dtype) + _c(p[1], dtype)))


def _hard_swish_te(x: Expr, dtype: str, p: Params) -> Expr:
    return x * _hard_sigmoid_te(x, dtype, (1.0 / 6.0, 0.5))


def _leaky_relu_te(x: Expr, dtype: str, p: Params) -> Expr:
    zero = _c(0.0, dtype)
    return te.max(x, zero) + te.min(x, zero) * _c(p[0], dtype)


def _elu_te(x: Expr, dtype: str, p: Params) -> Expr:
    zero = _c(0.0, dtype)
    return te.max(x, zero) + (te.exp(te.min(x, zero)) - _c(1.0, dtype)) * _c(p[0], dtype)


def _selu_te(x: Expr, dtype: str, p: Params) -> Expr:
    return _elu_te(x, dtype, (p[0],)) * _c(p[1], dtype)


def _celu_te(x: Expr, dtype: str, p: Params) -> Expr:
    zero = _c(0.0, dtype)
    return te.max(x, zero) + (te.exp(te.min(x, zero) / _c(p[0], dtype)) - _c(1.0, dtype)) * _c(p[0], dtype)


def _mish_te(x: Expr, dtype: str, p: Params) -> Expr:
    return x * te.tanh(_softplus_te(x, dtype, ()))


def _thresholded_relu_te(x: Expr, dtype: str, p: Params) -> Expr:
    return te.if_then_else(te.compare("gt", x, _c(p[0], dtype)), x, _c(0.0, dtype))


def _equal_te(x: Expr, dtype: str, p: Params) -> Expr:
    return te.if_then_else(te.compare("eq", x, _c(p[0], dtype)), _c(1.0, dtype), _c(0.0, dtype))


def _logical_not_te(x: Expr, dtype: str, p: Params) -> Expr:
    return te.if_then_else(te.compare("eq", x, _c(0.0, dtype)), _c(1.0, dtype), _c(0.0, dtype))


def _quantize_te(x: Expr, dtype: str, p: Params) -> Expr:
    scale, zero, lo, hi = p
    whole = quant.round_half_even(x / _c(scale, dtype)) + te.const(zero, "float64")
    return te.cast(te.max(te.min(whole, te.const(hi, "float64")), te.const(lo, "float64")), dtype)


def _quantize_np(x: np.ndarray, p: Params) -> np.ndarray:
    scale, zero, lo, hi = p
    return np.clip(np.rint(x.astype(np.float32) / np.float32(scale)) + zero, lo, hi).astype(np.float64)


def _pow_te(x: Expr, dtype: str, p: Params) -> Expr:
    return x * x if p[0] == 2.0 else te.pow(x, _c(p[0], dtype))


def _erf_np(x: np.ndarray, p: Params) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _hard_sigmoid_np(x: np.ndarray, p: Params) -> np.ndarray:
    return np.clip(p[0] * x + p[1], 0.0, 1.0)


FUNCTIONS: dict[str, UnaryFn] = {
    "tanh": UnaryFn((), (), lambda x, d, p: te.tanh(x), lambda x, p: np.tanh(x)),
    "erf": UnaryFn((), (), lambda x, d, p: te.erf(x), _erf_np),
    "exp": UnaryFn((), (), lambda x, d, p: te.exp(x), lambda x, p: np.exp(x)),
    "log": UnaryFn((), (), lambda x, d, p: te.log(x), lambda x, p: np.log(x)),
    "sqrt": UnaryFn((), (), lambda x, d, p: te.sqrt(x), lambda x, p: np.sqrt(x)),
    "reciprocal": UnaryFn((), (), lambda x, d, p: _c(1.0, d) / x, lambda x, p: 1.0 / x),
    "neg": UnaryFn((), (), lambda x, d, p: -x, lambda x, p: np.negative(x)),
    "abs": UnaryFn((), (), lambda x, d, p: te.abs(x), lambda x, p: np.abs(x)),
    "softplus": UnaryFn((), (), _softplus_te, lambda x, p: np.logaddexp(0.0, x)),
    "hard_swish": UnaryFn((), (), _hard_swish_te, lambda x, p: x * np.clip(x / 6.0 + 0.5, 0.0, 1.0)),
    "clip": UnaryFn(("min", "max"), (-math.inf, math.inf), _clip_te, lambda x, p: np.clip(x, p[0], p[1])),
    "leaky_relu": UnaryFn(("alpha",), (0.01,), _leaky_relu_te, lambda x, p: np.where(x >= 0, x, p[0] * x)),
    "hard_sigmoid": UnaryFn(("alpha", "beta"), (0.2, 0.5), _hard_sigmoid_te, _hard_sigmoid_np),
    "elu": UnaryFn(("alpha",), (1.0,), _elu_te, lambda x, p: np.where(x > 0, x, p[0] * np.expm1(x))),
    "selu": UnaryFn(("alpha", "gamma"), (1.67326319217681884765625, 1.05070102214813232421875), _selu_te,
                    lambda x, p: p[1] * np.where(x > 0, x, p[0] * np.expm1(x))),
    "celu": UnaryFn(("alpha",), (1.0,), _celu_te,
                    lambda x, p: np.maximum(x, 0) + np.minimum(0, p[0] * np.expm1(x / p[0]))),
    "mish": UnaryFn((), (), _mish_te, lambda x, p: x * np.tanh(np.logaddexp(0.0, x))),
    "softsign": UnaryFn((), (), lambda x, d, p: x / (_c(1.0, d) + te.abs(x)),
                        lambda x, p: x / (1.0 + np.abs(x))),
    "thresholded_relu": UnaryFn(("alpha",), (1.0,), _thresholded_relu_te,
                                lambda x, p: np.where(x > p[0], x, 0.0)),
    "equal": UnaryFn(("value",), (None,), _equal_te, lambda x, p: (x == p[0]).astype(np.float64)),
    "logical_not": UnaryFn((), (), _logical_not_te, lambda x, p: (x == 0).astype(np.float64)),
    "round": UnaryFn((), (), lambda x, d, p: te.cast(quant.round_half_even(x), d), lambda x, p: np.rint(x)),
    # QuantizeLinear / DequantizeLinear per tensor: the integers are whole numbers in the float type
    "quantize": UnaryFn(("scale", "zero_point", "min", "max"), (None, 0.0, None, None),
                        _quantize_te, _quantize_np),
    "dequantize": UnaryFn(("scale", "zero_point"), (None, 0.0),
                          lambda x, d, p: (x - _c(p[1], d)) * _c(p[0], d), lambda x, p: (x - p[1]) * p[0]),
    "pow_scalar": UnaryFn(("exponent",), (None,), _pow_te, lambda x, p: np.power(x, p[0])),
}


def spell(fn: str, params: tuple[float | None, ...]) -> str:
    """The step of ``fn`` with ``params`` (None: the default; a clip's unbounded side)."""
    spec = FUNCTIONS.get(fn)
    if spec is None:
        raise ValueError(f"unknown elementwise function {fn!r}; known: {', '.join(FUNCTIONS)}")
    values = []
    for pname, value, default in zip(spec.params, params, spec.defaults, strict=True):
        given = value if value is not None else default
        if given is None:
            raise ValueError(f"{fn}: parameter {pname} is required")
        v = float(given)
        if math.isnan(v) or (math.isinf(v) and fn != "clip"):
            raise ValueError(f"{fn}: parameter {pname} must be a finite number, got {v}")
        values.append(v)
    return ":".join([fn, *(repr(v) for v in values)])


def split(step: str) -> tuple[str, Params] | None:
    """(function, parameters) of a step of this module; None for any other step; ``ValueError``
    for a step of this module with the wrong parameters."""
    fn, *texts = step.split(":")
    spec = FUNCTIONS.get(fn)
    if spec is None:
        return None
    try:
        params = tuple(float(t) for t in texts)
    except ValueError:
        raise ValueError(f"epilogue step {step!r}: parameters must be numbers, like {fn}:0.5") from None
    if len(params) != len(spec.params):
        names = "".join(f":<{p}>" for p in spec.params)
        raise ValueError(f"epilogue step {step!r} must be spelled {fn}{names}")
    return fn, params
