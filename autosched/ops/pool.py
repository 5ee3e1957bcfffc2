"""2-D pooling over NCHW data: ``max_pool2d`` and ``avg_pool2d`` (square windows).

Both pad H and W by ``pad`` on each side in a stage named ``pad``: with the lowest finite value of
the dtype for the max, with zeros for the average. The average always divides by
``kernel * kernel``, so padded zeros count (TVM's ``count_include_pad=True`` default). ``pad`` must
be smaller than ``kernel``, so that every window holds at least one element of the data.
"""

from __future__ import annotations

import numpy as np

from .. import expr as te
from ..dtypes import dtype as _dtype
from ..expr import Expr, Tensor, static_shape
from .common import accumulator, check_positive, conv_out_size, lowest, pad_nchw, scaled, windows
from .registry import workload


def _out_size(op: str, H: int, W: int, kernel: int, stride: int, pad: int) -> tuple[int, int]:
    if pad >= kernel:
        raise ValueError(f"{op}: pad ({pad}) must be smaller than kernel ({kernel})")
    return conv_out_size(op, H, kernel, stride, pad, 1), conv_out_size(op, W, kernel, stride, pad, 1)


def _pool_taps(x: np.ndarray, kernel: int, stride: int, out: tuple[int, int]) -> list[np.ndarray]:
    return [windows(x, (2, 3), (ry, rx), out, stride, 1) for ry in range(kernel) for rx in range(kernel)]


def _window_reduce(op: str, data: Tensor, kernel: int, stride: int, pad: int, combiner: str) -> Tensor:
    """Stage ``pool`` (max) or ``pool_sum`` (sum): the combiner over each kernel window."""
    n_, c_, h_, w_ = static_shape(data.shape)
    p, q = _out_size(op, h_, w_, kernel, stride, pad)
    src = pad_nchw(data, pad, lowest(data.dtype) if combiner == "max" else 0) if pad > 0 else data
    ry, rx = te.reduce_axis(kernel, "ry"), te.reduce_axis(kernel, "rx")
    reduce = te.max if combiner == "max" else te.sum

    def body(n: Expr, c: Expr, y: Expr, x: Expr) -> Expr:
        h = scaled(y, stride) + ry.var
        w = scaled(x, stride) + rx.var
        return reduce(src[n, c, h, w], axis=[ry, rx])

    return te.compute((n_, c_, p, q), body, name="pool" if combiner == "max" else "pool_sum")


def _max_pool_ref(data: np.ndarray, *, kernel: int, stride: int, pad: int) -> np.ndarray:
    hw = ((0, 0), (0, 0), (pad, pad), (pad, pad))
    x: np.ndarray = np.pad(data, hw, constant_values=lowest(data.dtype.name))
    out = _out_size("max_pool2d", data.shape[2], data.shape[3], kernel, stride, pad)
    return np.maximum.reduce(_pool_taps(x, kernel, stride, out))


def _max_pool_flops(N: int, C: int, H: int, W: int, kernel: int, stride: int, pad: int, *_: object) -> int:
    p, q = _out_size("max_pool2d", H, W, kernel, stride, pad)
    return N * C * p * q * kernel * kernel


@workload("max_pool2d", reference=_max_pool_ref, flops=_max_pool_flops)
def max_pool2d(
    N: int, C: int, H: int, W: int, kernel: int, stride: int, pad: int = 0, dtype: str = "float32"
) -> list[Tensor]:
    """pool(N, C, P, Q): the max of each kernel x kernel window of data(N, C, H, W)."""
    check_positive("max_pool2d", N=N, C=C, H=H, W=W, kernel=kernel)
    data = te.placeholder((N, C, H, W), dtype, name="data")
    return [data, _window_reduce("max_pool2d", data, kernel, stride, pad, "max")]


def _avg_pool_ref(data: np.ndarray, *, kernel: int, stride: int, pad: int) -> np.ndarray:
    hw = ((0, 0), (0, 0), (pad, pad), (pad, pad))
    x: np.ndarray = np.pad(data.astype(accumulator(data.dtype.name)), hw)
    out = _out_size("avg_pool2d", data.shape[2], data.shape[3], kernel, stride, pad)
    return np.add.reduce(_pool_taps(x, kernel, stride, out)) / (kernel * kernel)


def _avg_pool_flops(N: int, C: int, H: int, W: int, kernel: int, stride: int, pad: int, *_: object) -> int:
    p, q = _out_size("avg_pool2d", H, W, kernel, stride, pad)
    return N * C * p * q * (kernel * kernel + 1)


@workload("avg_pool2d", reference=_avg_pool_ref, flops=_avg_pool_flops)
def avg_pool2d(
    N: int, C: int, H: int, W: int, kernel: int, stride: int, pad: int = 0, dtype: str = "float32"
) -> list[Tensor]:
    """pool(N, C, P, Q): the mean of each kernel x kernel window, padded zeros included."""
    check_positive("avg_pool2d", N=N, C=C, H=H, W=W, kernel=kernel)
    if not _dtype(dtype).is_float:
        raise ValueError(f"avg_pool2d: dtype must be a float type, got {dtype}")
    data = te.placeholder((N, C, H, W), dtype, name="data")
    pool_sum = _window_reduce("avg_pool2d", data, kernel, stride, pad, "sum")
    area = float(kernel * kernel)
    pool = te.compute(pool_sum.shape, lambda n, c, y, x: pool_sum[n, c, y, x] / area, name="pool")
    return [data, pool]
