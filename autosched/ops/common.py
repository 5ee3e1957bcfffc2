"""Helpers shared by the built-in operators: argument checks, output sizes, padding stages."""

from __future__ import annotations

import numpy as np

from .. import expr as te
from ..expr import Expr, Tensor


def check_positive(op: str, **values: int) -> None:
    """Raise ``ValueError`` naming ``op`` unless every value is a positive int."""
    for name, v in values.items():
        if v < 1:
            raise ValueError(f"{op}: {name} must be >= 1, got {v}")


def conv_out_size(op: str, size: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    """Output extent of a sliding window; raise ``ValueError`` if it would be empty."""
    check_positive(op, stride=stride, dilation=dilation)
    if pad < 0:
        raise ValueError(f"{op}: pad must be >= 0, got {pad}")
    out = (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    if out < 1:
        raise ValueError(
            f"{op}: window of {kernel} (dilation {dilation}) does not fit input {size} padded by {pad}"
        )
    return out


def scaled(v: Expr, factor: int) -> Expr:
    """``v * factor``, without a multiplication by 1 in the DAG."""
    return v if factor == 1 else v * factor


def pad_nchw(data: Tensor, pad: int, value: float | int) -> Tensor:
    """Stage ``pad``: ``data`` (N, C, H, W) padded by ``pad`` on both sides of H and W with ``value``."""
    n_, c_, h_, w_ = data.shape
    fill = te.const(value, data.dtype)

    def body(n: Expr, c: Expr, h: Expr, w: Expr) -> Expr:
        inside = te.all(h >= pad, h < h_ + pad, w >= pad, w < w_ + pad)
        return te.if_then_else(inside, data[n, c, h - pad, w - pad], fill)

    return te.compute((n_, c_, h_ + 2 * pad, w_ + 2 * pad), body, name="pad")


def pad_nhwc(data: Tensor, pad: int, value: float | int) -> Tensor:
    """Stage ``pad``: ``data`` (N, H, W, C) padded by ``pad`` on both sides of H and W with ``value``."""
    n_, h_, w_, c_ = data.shape
    fill = te.const(value, data.dtype)

    def body(n: Expr, h: Expr, w: Expr, c: Expr) -> Expr:
        inside = te.all(h >= pad, h < h_ + pad, w >= pad, w < w_ + pad)
        return te.if_then_else(inside, data[n, h - pad, w - pad, c], fill)

    return te.compute((n_, h_ + 2 * pad, w_ + 2 * pad, c_), body, name="pad")


def lowest(dtype: str) -> float | int:
    """The smallest finite value of ``dtype`` (the padding of a max reduction)."""
    dt = np.dtype(dtype)
    return float(np.finfo(dt).min) if dt.kind == "f" else int(np.iinfo(dt).min)


def accumulator(dtype: str) -> type:
    """The numpy type a reference accumulates ``dtype`` values in: float64 or int64."""
    return np.float64 if np.dtype(dtype).kind == "f" else np.int64


def windows(
    x: np.ndarray,
    axes: tuple[int, int],
    taps: tuple[int, int],
    out: tuple[int, int],
    stride: int,
    dilation: int,
) -> np.ndarray:
    """The slice of ``x`` that kernel tap ``taps`` = (r, s) reads for all outputs, along ``axes``."""
    index = [slice(None)] * x.ndim
    for axis, tap, size in zip(axes, taps, out, strict=True):
        first = tap * dilation
        index[axis] = slice(first, first + stride * (size - 1) + 1, stride)
    return x[tuple(index)]
