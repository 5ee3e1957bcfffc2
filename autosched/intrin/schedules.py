"""Schedules that use the library's intrinsics: a matmul tensorized with :func:`~.gemm.gemm_ukernel`."""

from __future__ import annotations

from ..expr import Tensor
from ..schedule import Schedule, create_schedule
from ..target import Target
from .gemm import gemm_ukernel


def matmul_ukernel(
    tensors: list[Tensor],
    mr: int = 6,
    nr: int = 16,
    kc: int = 256,
    isa: str = "auto",
    target: Target | str = "c",
) -> Schedule:
    """``C = A @ B`` (``C[i, j] = sum(A[i, k] * B[k, j])``) in ``mr x nr`` register blocks: for each
    block of ``nr`` columns (in parallel on a multi-threaded target) and ``kc`` reductions, a packed
    ``kc x nr`` panel of B (contiguous, in L1) serves one micro-kernel call per ``mr`` rows. Any
    shape works: partial blocks at the ends take the plain loop nest, ordered to vectorize over
    the columns."""
    tgt = Target.parse(target)
    A, B, C = tensors
    (M, K), N = A.shape, B.shape[1]
    # a split never exceeds a fixed axis (a symbolic one is guarded)
    mr, nr, kc = (f if not isinstance(n, int) else min(f, n) for f, n in ((mr, M), (nr, N), (kc, K)))
    s = create_schedule(C)
    panel = s.cache_read(B, "local", [C])
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, ii = s[C].split(i, mr)
    jo, ji = s[C].split(j, nr)
    ko, ki = s[C].split(k, kc)
    s[C].reorder(jo, ko, io, ii, ki, ji)
    if (tgt.num_threads or 1) > 1:
        s[C].parallel(jo)
    s[panel].compute_at(s[C], ko)
    s[C].tensorize(ii, gemm_ukernel(mr, nr, kc, C.dtype, isa))
    return s
