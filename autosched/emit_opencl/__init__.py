"""The OpenCL C dialect of the C-style printer (pure: it never compiles)."""

from __future__ import annotations

from typing import ClassVar

from ..emit_c.gpu import KernelPrinter, emit_kernels
from ..lower.gpu import GpuFunc
from ..lower.vector_ir import VecStore
from ..lower.vectorize import VectorCaps
from .vector import OPENCL_CAPS, vector_store


class OpenCLPrinter(KernelPrinter):
    """OpenCL C 1.2: ``__kernel``, ``__global`` buffers, ``__local`` tiles, work-item functions."""

    kernel_qualifier = "__kernel void"
    arg_qualifier = "__global "
    restrict = "restrict"
    shared_qualifier = "__local "
    barrier = "barrier(CLK_LOCAL_MEM_FENCE);"
    helper_qualifier = "inline"
    math_suffix: ClassVar[dict[str, str]] = {}  # OpenCL's math functions are overloaded: exp, not expf
    type_names = {
        "int8": "char", "int16": "short", "int32": "int", "int64": "long",
        "uint8": "uchar", "uint16": "ushort", "uint32": "uint", "uint64": "ulong",
        "bool": "uchar", "float16": "half",
    }  # fmt: skip
    thread_index = {
        "blockIdx.x": "(int)get_group_id(0)", "blockIdx.y": "(int)get_group_id(1)",
        "blockIdx.z": "(int)get_group_id(2)", "threadIdx.x": "(int)get_local_id(0)",
        "threadIdx.y": "(int)get_local_id(1)", "threadIdx.z": "(int)get_local_id(2)",
    }  # fmt: skip
    prelude = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable"

    def vector_caps(self) -> VectorCaps:
        """Contiguous stores of 2-16 floats as ``vstoreN`` of ``vloadN`` loads (see vector.py)."""
        return OPENCL_CAPS

    def vector_store(self, s: VecStore) -> list[str]:
        return [vector_store(self, s)]


def emit_opencl(func: GpuFunc) -> tuple[str, list[str]]:
    """(OpenCL C source, kernel names in launch order) of ``func``."""
    return emit_kernels(OpenCLPrinter(), func)


__all__ = ["OpenCLPrinter", "emit_opencl"]
