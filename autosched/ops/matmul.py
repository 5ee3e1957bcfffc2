"""Matrix products: ``matmul`` and ``batch_matmul``."""

from __future__ import annotations

import numpy as np

from .. import expr as te
from ..expr import Expr, Tensor
from .common import accumulator, check_positive
from .registry import workload


def _matmul_ref(a: np.ndarray, b: np.ndarray, *, transpose_b: bool) -> np.ndarray:
    acc = accumulator(a.dtype.name)
    return np.matmul(a.astype(acc), (b.T if transpose_b else b).astype(acc))


def _matmul_flops(M: int, N: int, K: int, *_: object) -> int:
    return 2 * M * N * K


@workload("matmul", reference=_matmul_ref, flops=_matmul_flops)
def matmul(M: int, N: int, K: int, dtype: str = "float32", transpose_b: bool = False) -> list[Tensor]:
    """C(M, N) = A(M, K) @ B(K, N), or A @ B.T with B(N, K) when transpose_b."""
    check_positive("matmul", M=M, N=N, K=K)
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((N, K) if transpose_b else (K, N), dtype, name="B")
    k = te.reduce_axis(K, name="k")

    def body(i: Expr, j: Expr) -> Expr:
        return te.sum(A[i, k] * (B[j, k] if transpose_b else B[k, j]), axis=k)

    return [A, B, te.compute((M, N), body, name="C")]


def _batch_matmul_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    acc = accumulator(a.dtype.name)
    return np.einsum("bik,bkj->bij", a.astype(acc), b.astype(acc))


def _batch_matmul_flops(batch: int, M: int, N: int, K: int, *_: object) -> int:
    return 2 * batch * M * N * K


@workload("batch_matmul", reference=_batch_matmul_ref, flops=_batch_matmul_flops)
def batch_matmul(batch: int, M: int, N: int, K: int, dtype: str = "float32") -> list[Tensor]:
    """C(batch, M, N) = A(batch, M, K) @ B(batch, K, N), one matmul per batch index."""
    check_positive("batch_matmul", batch=batch, M=M, N=N, K=K)
    A = te.placeholder((batch, M, K), dtype, name="A")
    B = te.placeholder((batch, K, N), dtype, name="B")
    k = te.reduce_axis(K, name="k")
    C = te.compute((batch, M, N), lambda b, i, j: te.sum(A[b, i, k] * B[b, k, j], axis=k), name="C")
    return [A, B, C]
