"""CUDA: NVRTC compiles a :class:`GpuProgram`'s source to PTX (no GPU needed: ``pip install
cuda-bindings nvidia-cuda-nvrtc``), pycuda loads the PTX, launches and times it with CUDA events
(a GPU and its driver needed: ``pip install pycuda``).

PTX (for a virtual or real architecture) and CUBIN (for a real one, ``sm_XX``: what a target with
``-arch`` loads, no JIT at load time) are cached by content (source, architecture, output kind,
NVRTC version) in the kernel cache.
"""

from __future__ import annotations

import contextlib
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


def nvrtc_compile(source: str, arch: str, cache_dir: Path | None = None, cubin: bool = False) -> bytes:
    """PTX of ``source`` for ``arch`` (``sm_90``, ``compute_80``), or with ``cubin`` the CUBIN for
    a real ``arch`` (``sm_90``); a rejected source raises :class:`~autosched.runner.CompileError`
    with NVRTC's log."""
    if cubin and not arch.startswith("sm_"):
        raise ValueError(f"a CUBIN is for a real architecture (sm_XX), not {arch}")
    nvrtc = _nvrtc()
    options = [f"--gpu-architecture={arch}".encode(), b"--std=c++17"]
    suffix = "cubin" if cubin else "ptx"
    key = hashlib.sha256("\0".join([source, arch, suffix, nvrtc_version()]).encode()).hexdigest()[:32]
    path = (cache_dir or default_cache_dir()) / "cuda" / f"{key}.{suffix}"
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
        get_size, get = (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)
        if not cubin:
            get_size, get = nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX
        ptx = b" " * _ok(nvrtc, get_size(prog))
        _ok(nvrtc, get(prog, ptx))
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{id(ptx)}.tmp")
    tmp.write_bytes(ptx)
    tmp.replace(path)
    return ptx


_CONTEXT: list[Any] = []  # the context this process launches in (made on first use)


def cuda_context() -> Any:
    """pycuda's driver module, with a context on device 0 current (made on first use, and again
    after :func:`reset_cuda_context`)."""
    drv = _driver()
    if not _CONTEXT:
        try:
            _CONTEXT.append(drv.Device(0).make_context())
        except drv.Error as e:
            raise CudaUnavailable(f"no CUDA device is visible: {e}") from None
    return drv


@functools.cache
def _driver() -> Any:
    try:
        import pycuda.driver as drv
    except ImportError as e:  # pycuda absent, or built without a driver (libcuda.so.1 missing)
        raise CudaUnavailable(f"no CUDA device is visible: pycuda cannot load ({e})") from None
    try:
        drv.init()
        if drv.Device.count() == 0:
            raise CudaUnavailable("no CUDA device is visible: the driver reports no device")
    except drv.Error as e:
        raise CudaUnavailable(f"no CUDA device is visible: {e}") from None
    return drv


def reset_cuda_context() -> None:
    """Destroy the current context (a failed launch leaves it unusable: every later call fails
    with the same error); the next :func:`cuda_context` makes a fresh one."""
    if _CONTEXT:
        ctx = _CONTEXT.pop()
        with contextlib.suppress(Exception):  # a context broken by a fault may refuse to pop
            ctx.pop()
        with contextlib.suppress(Exception):
            ctx.detach()


def device_arch() -> str:
    """``sm_XY`` of CUDA device 0."""
    drv = cuda_context()
    major, minor = drv.Device(0).compute_capability()
    return f"sm_{major}{minor}"


class CudaKernel(GpuCallable):
    """A :class:`GpuProgram` compiled by NVRTC and launched by pycuda on device 0; a failed launch
    is a :class:`~autosched.runner.gpu_program.DeviceError` (a ``RUNTIME_ERROR`` in a runner) and
    the context is made again for the next program."""

    def __init__(self, program: GpuProgram, args: Sequence[ArgSpec], arch: str | None = None) -> None:
        super().__init__(program, args)
        drv = self._drv = cuda_context()
        # a target's -arch gets a CUBIN (no JIT at load time); else PTX for this device's arch
        image = nvrtc_compile(program.source, arch, cubin=True) if arch else nvrtc_compile(
            program.source, device_arch()
        )
        module = drv.module_from_buffer(image)
        self._funcs = [module.get_function(launch.name) for launch in program.launches]

    def run(self, arrays: Sequence[np.ndarray], number: int) -> float:
        """Copy in, launch ``number`` times, copy the outputs back; seconds between CUDA events
        around the launches."""
        drv = self._drv
        host = [*arrays, *self.temp_arrays()]
        bufs = [drv.to_device(a) if a.nbytes else np.intp(0) for a in host]
        start, end = drv.Event(), drv.Event()
        try:
            start.record()
            for _ in range(number):
                for f, launch in zip(self._funcs, self.program.launches, strict=True):
                    f(*bufs, grid=launch.grid, block=launch.block)
            end.record()
            end.synchronize()
        except drv.Error:  # a launch failure or a fault: the next program gets a fresh context
            reset_cuda_context()
            raise
        for spec, arr, buf in zip(self.args, arrays, bufs, strict=False):
            if spec.is_output and arr.nbytes:
                drv.memcpy_dtoh(arr, buf)
        return float(start.time_till(end)) * 1e-3
