"""CUDA: NVRTC compiles a :class:`GpuProgram`'s source to PTX (no GPU needed: ``pip install
cuda-bindings nvidia-cuda-nvrtc``), pycuda loads the PTX, launches and times it with CUDA events
(a GPU and its driver needed: ``pip install pycuda``).

PTX is cached by content (source, architecture, NVRTC version) in the kernel cache.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .compile import CompileError, default_cache_dir
from .gpu_program import GpuCallable, GpuProgram
from .kernel import ArgSpec


class CudaUnavailable(RuntimeError):
    """NVRTC or pycuda is missing, or no CUDA device is visible (the message says which)."""


def _nvrtc() -> Any:
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        raise CudaUnavailable(
            'compiling CUDA needs NVRTC: pip install cuda-bindings "nvidia-cuda-nvrtc==13.0.*"'
        ) from None
    return nvrtc


def _ok(nvrtc: Any, result: tuple[Any, ...]) -> Any:
    err, *rest = result
    if int(err) != 0:
        raise CudaUnavailable(f"NVRTC failed: {nvrtc.nvrtcGetErrorString(err)[1].decode()}")
    return rest[0] if rest else None


def nvrtc_version() -> str:
    """``major.minor`` of the NVRTC library in use."""
    nvrtc = _nvrtc()
    err, major, minor = nvrtc.nvrtcVersion()
    _ok(nvrtc, (err,))
    return f"{major}.{minor}"


def nvrtc_compile(source: str, arch: str, cache_dir: Path | None = None) -> bytes:
    """PTX of ``source`` for ``arch`` (``sm_90``, ``compute_80``); a rejected source raises
    :class:`~autosched.runner.CompileError` with NVRTC's log."""
    nvrtc = _nvrtc()
    options = [f"--gpu-architecture={arch}".encode(), b"--std=c++17"]
    key = hashlib.sha256("\0".join([source, arch, nvrtc_version()]).encode()).hexdigest()[:32]
    path = (cache_dir or default_cache_dir()) / "cuda" / f"{key}.ptx"
    if path.exists():
        return path.read_bytes()
    prog = _ok(nvrtc, nvrtc.nvrtcCreateProgram(source.encode(), b"kernel.cu", 0, [], []))
    try:
        err, *_ = nvrtc.nvrtcCompileProgram(prog, len(options), options)
        if int(err) != 0:
            size = _ok(nvrtc, nvrtc.nvrtcGetProgramLogSize(prog))
            log = b" " * size
            _ok(nvrtc, nvrtc.nvrtcGetProgramLog(prog, log))
            raise CompileError(["nvrtc", *(o.decode() for o in options)], log.decode(errors="replace"))
        size = _ok(nvrtc, nvrtc.nvrtcGetPTXSize(prog))
        ptx = b" " * size
        _ok(nvrtc, nvrtc.nvrtcGetPTX(prog, ptx))
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{id(ptx)}.tmp")
    tmp.write_bytes(ptx)
    tmp.replace(path)
    return ptx


@functools.cache
def cuda_context() -> Any:
    """pycuda's driver module with a context on device 0 (made once per process)."""
    try:
        import pycuda.driver as drv
    except ImportError as e:  # pycuda absent, or built without a driver (libcuda.so.1 missing)
        raise CudaUnavailable(f"no CUDA device is visible: pycuda cannot load ({e})") from None
    try:
        drv.init()
        if drv.Device.count() == 0:
            raise CudaUnavailable("no CUDA device is visible: the driver reports no device")
        drv.Device(0).retain_primary_context().push()
    except drv.Error as e:
        raise CudaUnavailable(f"no CUDA device is visible: {e}") from None
    return drv


def device_arch() -> str:
    """``sm_XY`` of CUDA device 0."""
    drv = cuda_context()
    major, minor = drv.Device(0).compute_capability()
    return f"sm_{major}{minor}"


class CudaKernel(GpuCallable):
    """A :class:`GpuProgram` compiled by NVRTC and launched by pycuda on device 0."""

    def __init__(self, program: GpuProgram, args: Sequence[ArgSpec], arch: str | None = None) -> None:
        super().__init__(program, args)
        drv = self._drv = cuda_context()
        ptx = nvrtc_compile(program.source, arch or device_arch())
        module = drv.module_from_buffer(ptx)
        self._funcs = [module.get_function(launch.name) for launch in program.launches]

    def run(self, arrays: Sequence[np.ndarray], number: int) -> float:
        """Copy in, launch ``number`` times, copy the outputs back; seconds between CUDA events
        around the launches."""
        drv = self._drv
        host = [*arrays, *self.temp_arrays()]
        bufs = [drv.to_device(a) if a.nbytes else np.intp(0) for a in host]
        start, end = drv.Event(), drv.Event()
        start.record()
        for _ in range(number):
            for f, launch in zip(self._funcs, self.program.launches, strict=True):
                f(*bufs, grid=launch.grid, block=launch.block)
        end.record()
        end.synchronize()
        for spec, arr, buf in zip(self.args, arrays, bufs, strict=False):
            if spec.is_output and arr.nbytes:
                drv.memcpy_dtoh(arr, buf)
        return float(start.time_till(end)) * 1e-3
