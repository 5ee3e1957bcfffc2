"""The ``opencl`` backend: OpenCL C through pyopencl, on any platform (PoCL's CPU device included)."""

from __future__ import annotations

from collections.abc import Sequence

from ...emit_opencl import emit_opencl
from ...lower.gpu import GpuFunc
from ...runner.gpu_program import GpuCallable, GpuProgram
from ...runner.kernel import ArgSpec
from ...target import Target
from ..base import register_backend
from ..gpu_common import GpuBackend, HostCall, HostExport
from .driver import OpenCLKernel
from .host_code import opencl_host_export
from .target_kind import OpenCLKind


@register_backend
class OpenCLBackend(GpuBackend):
    """OpenCL C through pyopencl."""

    kind = "opencl"
    target_kind = OpenCLKind

    def print_kernels(self, func: GpuFunc) -> tuple[str, list[str]]:
        """OpenCL C (see :mod:`autosched.emit_opencl`)."""
        return emit_opencl(func)

    def load(
        self, program: GpuProgram, specs: Sequence[ArgSpec], target: Target | None = None
    ) -> GpuCallable:
        """Built by the OpenCL driver for the device the program names (see :mod:`.driver`)."""
        return OpenCLKernel(program, specs)

    def host_export(self, program: GpuProgram, target: Target, host: HostCall) -> HostExport:
        """kernel.cl and kernel_host.c (see :mod:`.host_code`)."""
        return opencl_host_export(program, target, host)
