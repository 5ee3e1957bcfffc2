"""The CUDA C dialect of the C-style printer (pure: it never compiles)."""

from __future__ import annotations

from ..emit_c.gpu import KernelPrinter, emit_kernels
from ..expr import Expr
from ..lower.gpu import GpuFunc, GpuKernel
from ..lower.vector_ir import Extract, VecLoad, VecStore
from ..lower.vectorize import VectorCaps
from .vector import CUDA_CAPS, extract, float4_store


class CudaPrinter(KernelPrinter):
    """CUDA C++ for NVRTC: ``extern "C" __global__`` kernels, ``__shared__`` tiles (16-byte aligned),
    ``__syncthreads``, ``float4`` loads and stores where aligned."""

    kernel_qualifier = 'extern "C" __global__ void'
    restrict = "__restrict__"
    shared_qualifier = "__shared__ __align__(16) "
    barrier = "__syncthreads();"
    helper_qualifier = "__device__ inline"
    type_names = {
        "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
        "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int",
        "uint64": "unsigned long long", "bool": "bool",
    }  # fmt: skip
    thread_index = {
        "blockIdx.x": "(int)blockIdx.x", "blockIdx.y": "(int)blockIdx.y", "blockIdx.z": "(int)blockIdx.z",
        "threadIdx.x": "(int)threadIdx.x", "threadIdx.y": "(int)threadIdx.y",
        "threadIdx.z": "(int)threadIdx.z",
    }  # fmt: skip
    # NVRTC compiles without the C library's headers: the constants the printer uses
    prelude = "#define INFINITY __int_as_float(0x7f800000)\n#define NAN __int_as_float(0x7fffffff)"

    def __init__(self) -> None:
        super().__init__()
        self.temps: dict[VecLoad, str] = {}  # a float4 load -> its temporary, while a store prints

    def expr(self, e: Expr) -> str:
        return extract(e, self.temps) if isinstance(e, Extract) else super().expr(e)

    def vector_caps(self) -> VectorCaps:
        """Aligned, contiguous runs of 4 floats as ``float4`` accesses (see vector.py)."""
        return CUDA_CAPS

    def vector_store(self, s: VecStore) -> list[str]:
        return float4_store(self, s, self.temps)

    def launch_bounds(self, k: GpuKernel) -> str:
        """``__launch_bounds__(threads per block)``."""
        return f"__launch_bounds__({k.threads}) "


def emit_cuda(func: GpuFunc) -> tuple[str, list[str]]:
    """(CUDA source, kernel names in launch order) of ``func``."""
    return emit_kernels(CudaPrinter(), func)


__all__ = ["CudaPrinter", "emit_cuda"]
