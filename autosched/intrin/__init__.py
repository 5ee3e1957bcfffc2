"""Tensor intrinsics for ``s[T].tensorize``: declare your own with :func:`autosched.decl_tensor_intrin`
(C text, or a :class:`CImpl` with reset/update parts and a file-scope preamble), or use one of the
library's: :func:`gemm_ukernel`, a register-blocked GEMM micro-kernel (AVX-512 / AVX2+FMA chosen
from the CPU at run time, NEON on aarch64, a portable C fallback).
"""

from __future__ import annotations

from ..te.buffer import decl_buffer
from ..te.intrin import CImpl, IntrinBuffer, TensorIntrin, decl_tensor_intrin, get_intrin
from .gemm import ISAS, gemm_ukernel
from .schedules import matmul_ukernel

__all__ = [
    "CImpl",
    "IntrinBuffer",
    "ISAS",
    "TensorIntrin",
    "decl_buffer",
    "decl_tensor_intrin",
    "gemm_ukernel",
    "get_intrin",
    "matmul_ukernel",
]
