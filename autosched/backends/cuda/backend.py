"""The ``cuda`` backend: CUDA C++ through NVRTC (PTX and CUBIN here, no GPU needed) and pycuda to
launch where a GPU is."""

from __future__ import annotations

from collections.abc import Sequence

from ...emit_cuda import emit_cuda
from ...lower.gpu import GpuFunc
from ...lower.ir import PrimFunc
from ...runner.gpu_program import GpuCallable, GpuProgram
from ...runner.kernel import ArgSpec
from ...runner.measure import MeasureOption, Runner
from ...target import Target
from ..base import register_backend
from ..gpu_common import GpuBackend, HostCall, HostExport
from .driver import CudaKernel, cuda_driver, nvrtc_compile
from .host_code import cuda_host_export
from .target_kind import CudaKind


@register_backend
class CudaBackend(GpuBackend):
    """CUDA C++ through NVRTC and pycuda."""

    kind = "cuda"
    target_kind = CudaKind

    def print_kernels(self, func: GpuFunc) -> tuple[str, list[str]]:
        """CUDA C++ (see :mod:`autosched.emit_cuda`)."""
        return emit_cuda(func)

    def ptx(self, func: PrimFunc, target: Target) -> bytes:
        """PTX for ``target``'s architecture (``sm_80`` when the target names none): a compile-only
        build that needs no GPU."""
        return nvrtc_compile(self.program(func, target).source, target.gpu_arch or "sm_80")

    def load(
        self, program: GpuProgram, specs: Sequence[ArgSpec], target: Target | None = None
    ) -> GpuCallable:
        """Compiled by NVRTC for the target's (else the device's) architecture, loaded by pycuda."""
        return CudaKernel(program, specs, target.gpu_arch if target is not None else None)

    def runner(self, option: MeasureOption) -> Runner:
        """The GPU runner, once a CUDA device is known to be visible (else a one-line error)."""
        cuda_driver()
        return super().runner(option)

    def host_export(self, program: GpuProgram, target: Target, host: HostCall) -> HostExport:
        """kernel.cu (see :mod:`.host_code`)."""
        return cuda_host_export(program, target, host)
