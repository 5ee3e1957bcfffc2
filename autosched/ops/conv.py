"""2-D convolutions: ``conv2d_nchw``, ``conv2d_nhwc`` and ``depthwise_conv2d_nchw``.

Each has a padding stage named ``pad`` when ``pad > 0`` (an ``if_then_else`` that a schedule can
inline) and an output stage that reduces over the kernel taps. The references pad with ``np.pad``
and accumulate one kernel tap at a time over strided slices, in float64 (int64 for integers).
"""

from __future__ import annotations

import numpy as np

from .. import expr as te
from ..expr import Expr, Tensor
from .common import accumulator, check_positive, conv_out_size, pad_nchw, pad_nhwc, scaled, windows
from .registry import workload


def _conv2d_nchw_ref(
    data: np.ndarray, kernel: np.ndarray, *, stride: int, pad: int, dilation: int
) -> np.ndarray:
    acc = accumulator(data.dtype.name)
    x: np.ndarray = np.pad(data.astype(acc), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, _, h, w = data.shape
    k, _, r, s = kernel.shape
    p = conv_out_size("conv2d_nchw", h, r, stride, pad, dilation)
    q = conv_out_size("conv2d_nchw", w, s, stride, pad, dilation)
    out: np.ndarray = np.zeros((n, k, p, q), dtype=acc)
    for ry in range(r):
        for rx in range(s):
            tap = windows(x, (2, 3), (ry, rx), (p, q), stride, dilation)
            out += np.einsum("nchw,kc->nkhw", tap, kernel[:, :, ry, rx].astype(acc))
    return out


def _conv2d_flops(
    N: int, C: int, H: int, W: int, K: int, R: int, S: int, stride: int, pad: int, dilation: int, *_: object
) -> int:
    p = conv_out_size("conv2d", H, R, stride, pad, dilation)
    q = conv_out_size("conv2d", W, S, stride, pad, dilation)
    return 2 * N * K * p * q * C * R * S


@workload("conv2d_nchw", reference=_conv2d_nchw_ref, flops=_conv2d_flops)
def conv2d_nchw(
    N: int,
    C: int,
    H: int,
    W: int,
    K: int,
    R: int,
    S: int,
    stride: int = 1,
    pad: int = 0,
    dilation: int = 1,
    dtype: str = "float32",
) -> list[Tensor]:
    """conv(N, K, P, Q) of data(N, C, H, W) with kernel(K, C, R, S); reduce axes rc, ry, rx."""
    check_positive("conv2d_nchw", N=N, C=C, H=H, W=W, K=K, R=R, S=S)
    p = conv_out_size("conv2d_nchw", H, R, stride, pad, dilation)
    q = conv_out_size("conv2d_nchw", W, S, stride, pad, dilation)
    data = te.placeholder((N, C, H, W), dtype, name="data")
    kernel = te.placeholder((K, C, R, S), dtype, name="kernel")
    src = pad_nchw(data, pad, 0) if pad > 0 else data
    rc, ry, rx = te.reduce_axis(C, "rc"), te.reduce_axis(R, "ry"), te.reduce_axis(S, "rx")

    def body(n: Expr, f: Expr, y: Expr, x: Expr) -> Expr:
        h = scaled(y, stride) + scaled(ry.var, dilation)
        w = scaled(x, stride) + scaled(rx.var, dilation)
        return te.sum(src[n, rc, h, w] * kernel[f, rc, ry, rx], axis=[rc, ry, rx])

    return [data, kernel, te.compute((N, K, p, q), body, name="conv")]


def _conv2d_nhwc_ref(
    data: np.ndarray, kernel: np.ndarray, *, stride: int, pad: int, dilation: int
) -> np.ndarray:
    acc = accumulator(data.dtype.name)
    x: np.ndarray = np.pad(data.astype(acc), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    n, h, w, _ = data.shape
    r, s, _, k = kernel.shape
    p = conv_out_size("conv2d_nhwc", h, r, stride, pad, dilation)
    q = conv_out_size("conv2d_nhwc", w, s, stride, pad, dilation)
    out: np.ndarray = np.zeros((n, p, q, k), dtype=acc)
    for ry in range(r):
        for rx in range(s):
            tap = windows(x, (1, 2), (ry, rx), (p, q), stride, dilation)
            out += np.einsum("nhwc,ck->nhwk", tap, kernel[ry, rx].astype(acc))
    return out


def _conv2d_nhwc_flops(
    N: int, H: int, W: int, C: int, K: int, R: int, S: int, stride: int, pad: int, dilation: int, *_: object
) -> int:
    return _conv2d_flops(N, C, H, W, K, R, S, stride, pad, dilation)


@workload("conv2d_nhwc", reference=_conv2d_nhwc_ref, flops=_conv2d_nhwc_flops)
def conv2d_nhwc(
    N: int,
    H: int,
    W: int,
    C: int,
    K: int,
    R: int,
    S: int,
    stride: int = 1,
    pad: int = 0,
    dilation: int = 1,
    dtype: str = "float32",
) -> list[Tensor]:
    """conv(N, P, Q, K) of data(N, H, W, C) with kernel(R, S, C, K); reduce axes ry, rx, rc."""
    check_positive("conv2d_nhwc", N=N, H=H, W=W, C=C, K=K, R=R, S=S)
    p = conv_out_size("conv2d_nhwc", H, R, stride, pad, dilation)
    q = conv_out_size("conv2d_nhwc", W, S, stride, pad, dilation)
    data = te.placeholder((N, H, W, C), dtype, name="data")
    kernel = te.placeholder((R, S, C, K), dtype, name="kernel")
    src = pad_nhwc(data, pad, 0) if pad > 0 else data
    ry, rx, rc = te.reduce_axis(R, "ry"), te.reduce_axis(S, "rx"), te.reduce_axis(C, "rc")

    def body(n: Expr, y: Expr, x: Expr, f: Expr) -> Expr:
        h = scaled(y, stride) + scaled(ry.var, dilation)
        w = scaled(x, stride) + scaled(rx.var, dilation)
        return te.sum(src[n, h, w, rc] * kernel[ry, rx, rc, f], axis=[ry, rx, rc])

    return [data, kernel, te.compute((N, p, q, K), body, name="conv")]


def _depthwise_ref(
    data: np.ndarray, kernel: np.ndarray, *, stride: int, pad: int, dilation: int
) -> np.ndarray:
    acc = accumulator(data.dtype.name)
    x: np.ndarray = np.pad(data.astype(acc), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, w = data.shape
    _, _, r, s = kernel.shape
    p = conv_out_size("depthwise_conv2d_nchw", h, r, stride, pad, dilation)
    q = conv_out_size("depthwise_conv2d_nchw", w, s, stride, pad, dilation)
    out: np.ndarray = np.zeros((n, c, p, q), dtype=acc)
    for ry in range(r):
        for rx in range(s):
            tap = windows(x, (2, 3), (ry, rx), (p, q), stride, dilation)
            out += tap * kernel[:, 0, ry, rx].astype(acc)[None, :, None, None]
    return out


def _depthwise_flops(
    N: int, C: int, H: int, W: int, R: int, S: int, stride: int, pad: int, dilation: int, *_: object
) -> int:
    p = conv_out_size("depthwise_conv2d_nchw", H, R, stride, pad, dilation)
    q = conv_out_size("depthwise_conv2d_nchw", W, S, stride, pad, dilation)
    return 2 * N * C * p * q * R * S


@workload("depthwise_conv2d_nchw", reference=_depthwise_ref, flops=_depthwise_flops)
def depthwise_conv2d_nchw(
    N: int,
    C: int,
    H: int,
    W: int,
    R: int,
    S: int,
    stride: int = 1,
    pad: int = 0,
    dilation: int = 1,
    dtype: str = "float32",
) -> list[Tensor]:
    """depthwise(N, C, P, Q) of data(N, C, H, W) with kernel(C, 1, R, S), one filter per channel."""
    check_positive("depthwise_conv2d_nchw", N=N, C=C, H=H, W=W, R=R, S=S)
    p = conv_out_size("depthwise_conv2d_nchw", H, R, stride, pad, dilation)
    q = conv_out_size("depthwise_conv2d_nchw", W, S, stride, pad, dilation)
    data = te.placeholder((N, C, H, W), dtype, name="data")
    kernel = te.placeholder((C, 1, R, S), dtype, name="kernel")
    src = pad_nchw(data, pad, 0) if pad > 0 else data
    ry, rx = te.reduce_axis(R, "ry"), te.reduce_axis(S, "rx")

    def body(n: Expr, c: Expr, y: Expr, x: Expr) -> Expr:
        h = scaled(y, stride) + scaled(ry.var, dilation)
        w = scaled(x, stride) + scaled(rx.var, dilation)
        return te.sum(src[n, c, h, w] * kernel[c, 0, ry, rx], axis=[ry, rx])

    return [data, kernel, te.compute((N, C, p, q), body, name="depthwise")]
