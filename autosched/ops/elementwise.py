"""Elementwise operators on 2-D tensors: ``relu`` and ``add``."""

from __future__ import annotations

import numpy as np

from .. import expr as te
from ..expr import Tensor
from .common import check_positive
from .registry import workload


def _elementwise_flops(M: int, N: int, *_: object) -> int:
    return M * N


def _relu_ref(data: np.ndarray) -> np.ndarray:
    return np.where(data > 0, data, np.zeros_like(data))


@workload("relu", reference=_relu_ref, flops=_elementwise_flops)
def relu(M: int, N: int, dtype: str = "float32") -> list[Tensor]:
    """out(M, N) = max(data(M, N), 0)."""
    check_positive("relu", M=M, N=N)
    data = te.placeholder((M, N), dtype, name="data")
    return [data, te.compute((M, N), lambda i, j: te.max(data[i, j], te.const(0, dtype)), name="out")]


def _add_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.add(a, b)


@workload("add", reference=_add_ref, flops=_elementwise_flops)
def add(M: int, N: int, dtype: str = "float32") -> list[Tensor]:
    """C(M, N) = A(M, N) + B(M, N)."""
    check_positive("add", M=M, N=N)
    A = te.placeholder((M, N), dtype, name="A")
    B = te.placeholder((M, N), dtype, name="B")
    return [A, B, te.compute((M, N), lambda i, j: A[i, j] + B[i, j], name="C")]
