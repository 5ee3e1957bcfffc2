"""The GPU backends: ``opencl`` (pyopencl, any platform, PoCL's CPU device included) and ``cuda``
(NVRTC to PTX here; pycuda to launch where a GPU is).

Both lower the same way (:func:`~autosched.lower.gpu.split_kernels` under the target's thread and
shared-memory limits) and differ in the printer and the loader only.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ..emit_cuda import emit_cuda
from ..emit_opencl import emit_opencl
from ..lower.gpu import GpuFunc, split_kernels
from ..lower.ir import PrimFunc
from ..runner.compile import default_cache_dir
from ..runner.cuda import CudaKernel, cuda_driver, nvrtc_compile
from ..runner.gpu_program import GpuCallable, GpuProgram, Launch
from ..runner.kernel import ArgSpec, ScalarArg
from ..runner.local_runner import LocalRunner
from ..runner.measure import (
    Builder,
    BuildResult,
    Closing,
    MeasureErrorNo,
    MeasureInput,
    MeasureOption,
    Runner,
)
from ..runner.opencl import OpenCLKernel
from ..target import Target
from .base import Backend, register_backend


class GpuBackend(Backend):
    """Lowering to kernels and launches, shared by the GPU kinds; subclasses print and load."""

    gpu = True

    def print_kernels(self, func: GpuFunc) -> tuple[str, list[str]]:
        """(source, kernel names in launch order) in this kind's dialect."""
        raise NotImplementedError

    def program(self, func: PrimFunc, target: Target) -> GpuProgram:
        """``func`` split into kernels, checked against ``target``'s limits, and printed."""
        assert target.max_threads_per_block is not None and target.shared_memory_bytes is not None
        gfunc = split_kernels(func, target.max_threads_per_block, target.shared_memory_bytes)
        source, names = self.print_kernels(gfunc)
        launches = tuple(Launch(n, k.grid, k.block) for n, k in zip(names, gfunc.kernels, strict=True))
        temps = tuple((b.dtype, b.size) for b in gfunc.temps if isinstance(b.size, int))
        return GpuProgram(self.kind, source, launches, temps, target.device_type or "", target.platform or "")

    def source(
        self, func: PrimFunc, target: Target, portable: bool = False, timing: bool | None = None
    ) -> str:
        """The kernels' source; the launch (host side) belongs to the runner."""
        return self.program(func, target).source

    def load(self, program: GpuProgram, specs: Sequence[ArgSpec], target: Target) -> GpuCallable:
        """The program compiled and loaded on this machine's device."""
        raise NotImplementedError

    def build(
        self,
        func: PrimFunc,
        target: Target,
        specs: Sequence[ArgSpec],
        sizes: Sequence[str] = (),
        cache_dir: Path | None = None,
        scalars: Sequence[ScalarArg] = (),
    ) -> GpuCallable:
        """A callable over numpy arrays that copies them to the device, launches, copies back
        (scalar arguments are C-target only: the driver refuses them before this)."""
        if scalars:
            raise NotImplementedError(f"scalar arguments are C-target only, not {self.kind}")
        return self.load(self.program(func, target), specs, target)

    def builder(self, option: MeasureOption) -> Builder:
        """:class:`GpuBuilder`: lowering and printing here, the device compile in the runner."""
        return GpuBuilder(self)

    def runner(self, option: MeasureOption) -> Runner:
        """:class:`~autosched.runner.LocalRunner`: its isolated worker loads GPU programs with
        :mod:`~autosched.runner.gpu_load` (a hang or a crash costs one trial, as for C)."""
        return LocalRunner(option)


@register_backend
class OpenCLBackend(GpuBackend):
    """OpenCL C through pyopencl."""

    kind = "opencl"

    def print_kernels(self, func: GpuFunc) -> tuple[str, list[str]]:
        """OpenCL C (see :mod:`autosched.emit_opencl`)."""
        return emit_opencl(func)

    def load(self, program: GpuProgram, specs: Sequence[ArgSpec], target: Target) -> GpuCallable:
        """Built by the OpenCL driver (see :mod:`autosched.runner.opencl`)."""
        return OpenCLKernel(program, specs)


@register_backend
class CudaBackend(GpuBackend):
    """CUDA C++ through NVRTC and pycuda."""

    kind = "cuda"

    def print_kernels(self, func: GpuFunc) -> tuple[str, list[str]]:
        """CUDA C++ (see :mod:`autosched.emit_cuda`)."""
        return emit_cuda(func)

    def ptx(self, func: PrimFunc, target: Target) -> bytes:
        """PTX for ``target``'s architecture (``sm_80`` when the target names none): a compile-only
        build that needs no GPU."""
        return nvrtc_compile(self.program(func, target).source, target.gpu_arch or "sm_80")

    def load(self, program: GpuProgram, specs: Sequence[ArgSpec], target: Target) -> GpuCallable:
        """Compiled by NVRTC for the target's (or the device's) architecture, loaded by pycuda."""
        return CudaKernel(program, specs, target.gpu_arch)

    def runner(self, option: MeasureOption) -> Runner:
        """The GPU runner, once a CUDA device is known to be visible (else a one-line error)."""
        cuda_driver()
        return super().runner(option)


class GpuBuilder(Closing):
    """Lowers and prints GPU candidates in this process; each program is written to the kernel cache
    (by content) and its path is the build's ``lib_path``. The device compile happens when the
    runner's worker loads it (a rejected source is a ``COMPILE_ERROR`` with the build log there)."""

    def __init__(self, backend: GpuBackend, cache_dir: Path | None = None) -> None:
        self.backend = backend
        self.cache_dir = cache_dir

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        """One :class:`BuildResult` per input; illegal or unlaunchable programs are
        ``INSTANTIATION_ERROR`` with the reason."""
        cache = self.cache_dir if self.cache_dir is not None else default_cache_dir()
        out = []
        for inp in inputs:
            start = time.perf_counter()
            task = inp.task
            result = BuildResult(None, task.func_name, tuple(task.arg_specs()))
            try:
                program = self.backend.program(task.lowered(inp.steps).func(), task.target)
            except Exception as e:  # illegal steps, a failed check, a lowering failure
                kind, message = MeasureErrorNo.INSTANTIATION_ERROR, f"{type(e).__name__}: {e}"
                out.append(replace(result, error_no=kind, error_msg=message))
                continue
            path = program.save(cache)
            out.append(replace(result, lib_path=str(path), time_cost=time.perf_counter() - start))
        return out
