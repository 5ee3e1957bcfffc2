"""Low-precision matmul over a packed weight: ``matmul_lowp`` (u8 x s8, s8 x s8 or u8 x u8 -> s32,
or bf16 -> f32), whose default schedule tensorizes with AMX, AVX-512 VNNI / AVX512-BF16, NEON
sdot / udot or the portable C path."""

from __future__ import annotations

import numpy as np

from ..expr import Tensor
from ..intrin.dot import KINDS, numpy_reference, packed_tensors
from .common import check_positive
from .registry import workload


def _ref(a: np.ndarray, b: np.ndarray, *, kind: str) -> np.ndarray:
    return numpy_reference(a, b, kind)


def _flops(M: int, N: int, K: int, *_: object) -> int:
    return 2 * M * N * K


@workload("matmul_lowp", reference=_ref, flops=_flops)
def matmul_lowp(M: int, N: int, K: int, kind: str = "vnni") -> list[Tensor]:
    """C(M, N) = A(M, K) @ B with B packed ``[N/16, K/g, 16, g]`` (``asc.intrin.pack_b``):
    ``kind="vnni"``: uint8 x int8 -> int32 (g = 4); ``"sdot"``: int8 x int8 and ``"udot"``: uint8 x
    uint8 -> int32 (g = 4, AArch64's dot products); ``"bf16"``: bfloat16 -> float32 (g = 2)."""
    check_positive("matmul_lowp", M=M, N=N, K=K)
    if kind not in KINDS:
        raise ValueError(f"matmul_lowp: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    return packed_tensors(M, N, K, kind)
