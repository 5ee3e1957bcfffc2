"""TVM's ``tvm.contrib.cblas``: a matrix product computed by the BLAS (OpenBLAS's ``cblas_sgemm`` /
``cblas_dgemm``), as an extern stage other stages can read."""

from __future__ import annotations

from ..expr import Tensor, call_packed, extern


def matmul(lhs: Tensor, rhs: Tensor, transa: bool = False, transb: bool = False) -> Tensor:
    """``lhs @ rhs`` (each transposed first when ``transa`` / ``transb``) by the BLAS: an extern
    stage named ``C``, as TVM's ``cblas.matmul`` builds it. Needs OpenBLAS where it is built
    (Debian: ``apt-get install libopenblas-dev``)."""
    if len(lhs.shape) != 2 or len(rhs.shape) != 2:
        raise ValueError(f"cblas.matmul: 2-d tensors only, got shapes {lhs.shape} and {rhs.shape}")
    n = lhs.shape[1] if transa else lhs.shape[0]
    m = rhs.shape[0] if transb else rhs.shape[1]
    return extern(
        (n, m),
        [lhs, rhs],
        lambda ins, outs: call_packed("tvm.contrib.cblas.matmul", ins[0], ins[1], outs[0], transa, transb),
        name="C",
    )
