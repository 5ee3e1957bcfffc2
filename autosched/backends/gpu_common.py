"""What the GPU kinds (``opencl``, ``cuda``, any a plugin adds) share: lowering to kernels and
launches (:func:`~autosched.lower.gpu.split_kernels` under the target's thread and shared-memory
limits), the builder that prints candidates here, and the runner whose worker loads them. Each kind
differs in its printer, its loader and its host code for export (``backends/<kind>/``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..lower.gpu import GpuFunc, split_kernels
from ..lower.ir import PrimFunc
from ..ops import Workload
from ..runner.compile import default_cache_dir
from ..runner.gpu_load import ProgramLoader
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
from ..schedule import Schedule
from ..target import Target
from .base import Backend
from .gpu_default import default_gpu_schedule


@dataclass(frozen=True)
class HostCall:
    """The exported function that launches a program: its C name and parameter list, each array's
    bytes (the arguments, then the program's temporaries), and which arguments are copied to the
    device and which back."""

    name: str
    params: str
    sizes: tuple[int, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass(frozen=True)
class HostExport:
    """A GPU kind's part of an export: its files, the Makefile's settings and build recipe (over
    ``sources`` with main.c and reference.c), and the tool the README says ``make`` needs."""

    files: dict[str, str]
    make_settings: str
    build: str
    sources: tuple[str, ...]
    tool: str


def size_list(sizes: Sequence[int]) -> str:
    """Byte counts as the items of a C ``size_t`` array initializer."""
    return ", ".join(f"{b}u" for b in sizes)


def copy_lines(host: HostCall, to: str, back: str) -> tuple[list[str], list[str]]:
    """Lines copying the inputs to the device and the outputs back (formats of ``k``)."""
    return [to.format(k=k) for k in host.inputs], [back.format(k=k) for k in host.outputs]


class GpuBackend(Backend):
    """Lowering to kernels and launches, shared by the GPU kinds; subclasses print and load."""

    gpu = True

    def print_kernels(self, func: GpuFunc) -> tuple[str, list[str]]:
        """(source, kernel names in launch order) in this kind's dialect."""
        raise NotImplementedError

    def default_schedule(self, wl: Workload, target: Target) -> tuple[Schedule, str]:
        """The hand-written GPU kernel of ``wl``, else one output element per thread
        (:func:`~.gpu_default.default_gpu_schedule`)."""
        return default_gpu_schedule(wl, target)

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

    def load(
        self, program: GpuProgram, specs: Sequence[ArgSpec], target: Target | None = None
    ) -> GpuCallable:
        """The program compiled and loaded on this machine's device (for ``target``'s architecture
        where it names one)."""
        raise NotImplementedError

    def program_loader(self) -> ProgramLoader:
        """:meth:`load` for the measurement worker, which has no target at hand."""
        return self.load

    def host_export(self, program: GpuProgram, target: Target, host: HostCall) -> HostExport:
        """The host side of an exported program: the files that launch it, and how to build them."""
        raise NotImplementedError(f"{self.kind} programs have no host code for export")

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
        the kind's :meth:`load` (a hang or a crash costs one trial, as for C)."""
        return LocalRunner(option)


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
