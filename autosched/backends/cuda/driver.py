"""CUDA: NVRTC compiles a :class:`GpuProgram`'s source (no GPU needed: ``pip install
cuda-bindings nvidia-cuda-nvrtc``), pycuda loads it, launches and times it with CUDA events (a GPU
and its driver needed: ``pip install pycuda``).

A kernel is loaded as a CUBIN for a real architecture (``sm_XX``: the target's ``-arch``, else the
device's), so the driver JIT-compiles nothing and an NVRTC newer than the driver still works; PTX
(for a virtual or real architecture) is what compile-only checks read. Both are cached by content
(source, architecture, output kind, NVRTC version) in the kernel cache.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...runner.cache_trust import private_folder
from ...runner.compile import CompileError, default_cache_dir
from ...runner.gpu_program import DeviceMemory, GpuCallable, GpuProgram
from ...runner.kernel import ArgSpec


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
    private_folder(path.parent)  # made 0700 like the kernel cache it sits in
    tmp = path.with_suffix(f".{id(ptx)}.tmp")
    tmp.write_bytes(ptx)
    tmp.replace(path)
    return ptx


_CONTEXT: list[Any] = []  # the context this process launches in (made on first use)
_FAULTS: list[str] = []  # the driver errors that discarded a context, oldest first


@functools.cache
def cuda_driver() -> Any:
    """pycuda's driver module, initialized, once a CUDA device is known to be visible (else
    :class:`CudaUnavailable` saying why); makes no context."""
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


def _context() -> Any:
    """This process's context on device 0 (made on first use, and again after a fault). It is
    current in no thread between uses: :func:`cuda_context` makes it current for a block of work, in
    whichever thread runs it, so nothing is left on a thread's context stack at exit."""
    drv = cuda_driver()
    if not _CONTEXT:
        try:
            ctx = drv.Device(0).make_context()
        except drv.Error as e:
            if _FAULTS:  # the driver keeps a fault's error for the whole process
                raise CudaUnavailable(
                    f"CUDA is unusable in this process after a kernel fault ({_FAULTS[-1]}): the driver "
                    f"refuses a new context ({e}); run again in a new process"
                ) from None
            raise CudaUnavailable(f"no CUDA device is visible: {e}") from None
        drv.Context.pop()
        _CONTEXT.append(ctx)
    return _CONTEXT[0]


@contextlib.contextmanager
def cuda_context() -> Iterator[Any]:
    """``with cuda_context() as ctx:`` runs the block with this process's context current (pycuda's
    ``Context``). A driver error inside it discards the context (a fault leaves it unusable: every
    later call fails with the same error) and the next block asks for a fresh one; drivers that
    keep the error for the whole process refuse it, and then every later block raises
    :class:`CudaUnavailable` saying so (the runner measures in worker processes, and starts a new
    one after a device error)."""
    ctx = _context()
    ctx.push()
    try:
        yield ctx
    except cuda_driver().Error as e:
        _FAULTS.append(" ".join(str(e).split())[:200])
        _discard(ctx)
        raise
    except BaseException:
        ctx.pop()
        raise
    ctx.pop()


def _discard(ctx: Any) -> None:
    """Pop and destroy a context a fault has broken (either may fail on it: nothing else can be
    done with it); the next :func:`cuda_context` makes a new one."""
    with contextlib.suppress(Exception):
        ctx.pop()
    with contextlib.suppress(Exception):
        ctx.detach()
    if _CONTEXT and _CONTEXT[0] is ctx:
        _CONTEXT.clear()


def device_arch() -> str:
    """``sm_XY`` of CUDA device 0."""
    major, minor = cuda_driver().Device(0).compute_capability()
    return f"sm_{major}{minor}"


class CudaMemory(DeviceMemory):
    """Buffers on CUDA device 0 in this process's context (made current by :meth:`session`)."""

    def session(self) -> contextlib.AbstractContextManager[object]:
        """:func:`cuda_context`."""
        return cuda_context()

    def alloc(self, nbytes: int) -> Any:
        """pycuda's ``DeviceAllocation`` of ``nbytes`` bytes."""
        return cuda_driver().mem_alloc(max(1, nbytes))

    def upload(self, buf: Any, array: np.ndarray) -> None:
        """Copy ``array`` in (synchronous)."""
        if array.nbytes:
            cuda_driver().memcpy_htod(buf, array)

    def download(self, array: np.ndarray, buf: Any) -> None:
        """Copy ``buf`` out after the launches before it (synchronous)."""
        if array.nbytes:
            cuda_driver().memcpy_dtoh(array, buf)

    def copy(self, dst: Any, dst_offset: int, src: Any, src_offset: int, nbytes: int) -> None:
        """A device-to-device copy on the default stream, behind the launches before it."""
        if nbytes:
            cuda_driver().memcpy_dtod(int(dst) + dst_offset, int(src) + src_offset, nbytes)

    def finish(self) -> None:
        """Synchronize the current context."""
        cuda_driver().Context.synchronize()


class CudaKernel(GpuCallable):
    """A :class:`GpuProgram` compiled by NVRTC (to a CUBIN for ``arch``, by default the device's)
    and launched by pycuda on device 0. A failed launch is a
    :class:`~autosched.runner.gpu_program.DeviceError` (a ``RUNTIME_ERROR`` in a runner); see
    :func:`cuda_context` for what follows. A kernel loads its module again in a new context."""

    def __init__(self, program: GpuProgram, args: Sequence[ArgSpec], arch: str | None = None) -> None:
        super().__init__(program, args)
        arch = arch or device_arch()
        self._image = nvrtc_compile(program.source, arch, cubin=arch.startswith("sm_"))
        self._loaded: tuple[Any, list[Any]] | None = None  # (context, kernel functions)
        self._temps: list[Any] | None = None  # the temporaries of launch(), made on its first call

    def memory(self) -> CudaMemory:
        """Device 0, in this process's context."""
        return CudaMemory()

    def launch(self, buffers: Sequence[Any]) -> None:
        """Queue the launches on ``buffers`` on the default stream, inside a :meth:`memory`
        session (see :meth:`GpuCallable.launch`)."""
        funcs = self._functions(_context())
        if self._temps is None:
            self._temps = [CudaMemory().alloc(a.nbytes) for a in self.temp_arrays()]
        for f, launch in zip(funcs, self.program.launches, strict=True):
            f(*buffers, *self._temps, grid=launch.grid, block=launch.block)

    def _functions(self, ctx: Any) -> list[Any]:
        """The program's kernels in ``ctx`` (loaded when the context is new)."""
        if self._loaded is None or self._loaded[0] is not ctx:
            module = cuda_driver().module_from_buffer(self._image)
            self._loaded = (ctx, [module.get_function(launch.name) for launch in self.program.launches])
        return self._loaded[1]

    def run(self, arrays: Sequence[np.ndarray], number: int) -> float:
        """Copy in, launch ``number`` times, copy the outputs back; seconds between CUDA events
        around the launches."""
        drv = cuda_driver()
        with cuda_context() as ctx:
            funcs = self._functions(ctx)
            host = [*arrays, *self.temp_arrays()]
            bufs = [drv.to_device(a) if a.nbytes else np.intp(0) for a in host]
            start, end = drv.Event(), drv.Event()
            start.record()
            for _ in range(number):
                for f, launch in zip(funcs, self.program.launches, strict=True):
                    f(*bufs, grid=launch.grid, block=launch.block)
            end.record()
            end.synchronize()
            for spec, arr, buf in zip(self.args, arrays, bufs, strict=False):
                if spec.is_output and arr.nbytes:
                    drv.memcpy_dtoh(arr, buf)
            for buf in bufs:
                if isinstance(buf, drv.DeviceAllocation):
                    buf.free()
            return float(start.time_till(end)) * 1e-3
