"""Tensor intrinsics for ``s[T].tensorize``: declare your own with :func:`autosched.decl_tensor_intrin`
(C text, or a :class:`CImpl` with reset/update parts and a file-scope preamble), or use one of the
library's: :func:`gemm_ukernel`, a register-blocked GEMM micro-kernel (AVX-512 / AVX2+FMA chosen
from the CPU at run time, NEON on aarch64, a portable C fallback); and the low-precision ones:
:func:`dot_intrin` (AVX-512 VNNI u8 x s8 -> s32, AVX512-BF16; on AArch64 NEON sdot / udot, s8 x s8
and u8 x u8 -> s32) and :func:`amx_intrin` (AMX tiles)
over a weight packed by :func:`pack_b`, with :func:`matmul_lowp`, the default schedule of
:func:`packed_tensors`.
"""

from __future__ import annotations

from ..te.buffer import decl_buffer
from ..te.intrin import RESOLVERS, CImpl, IntrinBuffer, TensorIntrin, decl_tensor_intrin, get_intrin
from .amx import amx_intrin
from .by_name import library_intrin
from .dot import dot_intrin, pack_b, packed_tensors
from .gemm import ISAS, gemm_ukernel
from .lowp import matmul_lowp
from .schedules import matmul_ukernel

RESOLVERS.append(library_intrin)  # recorded steps naming the library's intrinsics replay anywhere

__all__ = [
    "CImpl",
    "IntrinBuffer",
    "ISAS",
    "TensorIntrin",
    "amx_intrin",
    "decl_buffer",
    "decl_tensor_intrin",
    "dot_intrin",
    "gemm_ukernel",
    "get_intrin",
    "matmul_lowp",
    "matmul_ukernel",
    "pack_b",
    "packed_tensors",
]
