"""Neural-network layers: ``dense`` (matmul + bias + ReLU epilogue) and ``softmax``."""

from __future__ import annotations

import numpy as np

from .. import expr as te
from ..dtypes import dtype as _dtype
from ..expr import Tensor
from .common import accumulator, check_positive
from .registry import workload


def _dense_ref(data: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    acc = accumulator(data.dtype.name)
    return np.maximum(data.astype(acc) @ weight.astype(acc).T + bias.astype(acc), 0)


def _dense_flops(M: int, N: int, K: int, *_: object) -> int:
    return 2 * M * N * K + 2 * M * N


@workload("dense", reference=_dense_ref, flops=_dense_flops)
def dense(M: int, N: int, K: int, dtype: str = "float32") -> list[Tensor]:
    """out(M, N) = max(data(M, K) @ weight(N, K).T + bias(N), 0), in stages dense then out."""
    check_positive("dense", M=M, N=N, K=K)
    data = te.placeholder((M, K), dtype, name="data")
    weight = te.placeholder((N, K), dtype, name="weight")
    bias = te.placeholder((N,), dtype, name="bias")
    k = te.reduce_axis(K, name="k")
    mm = te.compute((M, N), lambda i, j: te.sum(data[i, k] * weight[j, k], axis=k), name="dense")
    out = te.compute((M, N), lambda i, j: te.max(mm[i, j] + bias[j], te.const(0, dtype)), name="out")
    return [data, weight, bias, out]


def _softmax_ref(data: np.ndarray) -> np.ndarray:
    x = data.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _softmax_flops(M: int, N: int, *_: object) -> int:
    return 5 * M * N


@workload("softmax", reference=_softmax_ref, flops=_softmax_flops)
def softmax(M: int, N: int, dtype: str = "float32") -> list[Tensor]:
    """softmax(M, N) of data(M, N) over the last axis: stages maxelem, expval, expsum, softmax."""
    check_positive("softmax", M=M, N=N)
    if not _dtype(dtype).is_float:
        raise ValueError(f"softmax: dtype must be a float type, got {dtype}")
    data = te.placeholder((M, N), dtype, name="data")
    k1, k2 = te.reduce_axis(N, name="k"), te.reduce_axis(N, name="k")
    maxelem = te.compute((M,), lambda i: te.max(data[i, k1], axis=k1), name="maxelem")
    expval = te.compute((M, N), lambda i, j: te.exp(data[i, j] - maxelem[i]), name="expval")
    expsum = te.compute((M,), lambda i: te.sum(expval[i, k2], axis=k2), name="expsum")
    out = te.compute((M, N), lambda i, j: expval[i, j] / expsum[i], name="softmax")
    return [data, out]
