"""OpenCL through pyopencl: build a :class:`GpuProgram`, run it over numpy arrays, time it with
profiling events. Any OpenCL platform works, PoCL's CPU device included
(``pip install pyopencl pocl-binary-distribution``).

The device is the one the target selects (``-device``, ``-platform``; ``AUTOSCHED_OPENCL_PLATFORM``
stands in for an unnamed platform): the first matching device of the first matching platform.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...runner.compile import CompileError
from ...runner.gpu_program import DeviceMemory, GpuCallable, GpuProgram
from ...runner.kernel import ArgSpec
from .device import DeviceNotFound, opencl_device


class OpenCLUnavailable(RuntimeError):
    """pyopencl is not installed, or no OpenCL device is visible (the message says what to do)."""


def _cl() -> Any:
    try:
        import pyopencl
    except ImportError:
        raise OpenCLUnavailable(
            "OpenCL targets need pyopencl and a driver: pip install pyopencl pocl-binary-distribution"
        ) from None
    return pyopencl


@functools.cache
def opencl_queue(device_type: str = "", platform: str = "") -> tuple[Any, Any]:
    """(context, profiling command queue) on the device a target selects (see
    :func:`~autosched.backends.opencl.opencl_device`), made once per process and selection."""
    cl = _cl()
    try:
        device = opencl_device(device_type or None, platform or None)
    except DeviceNotFound as e:
        raise OpenCLUnavailable(str(e)) from None
    ctx = cl.Context([device])
    return ctx, cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)


class OpenCLMemory(DeviceMemory):
    """Buffers in one OpenCL context, copied through its in-order queue."""

    def __init__(self, ctx: Any, queue: Any) -> None:
        self._cl, self._ctx, self._queue = _cl(), ctx, queue

    def alloc(self, nbytes: int) -> Any:
        """A read-write buffer of ``nbytes`` bytes."""
        return self._cl.Buffer(self._ctx, self._cl.mem_flags.READ_WRITE, size=max(1, nbytes))

    def upload(self, buf: Any, array: np.ndarray) -> None:
        """Copy ``array`` in (queued behind earlier work, done when this returns)."""
        if array.nbytes:
            self._cl.enqueue_copy(self._queue, buf, array)

    def download(self, array: np.ndarray, buf: Any) -> None:
        """Copy ``buf`` out after the queued work."""
        if array.nbytes:
            self._cl.enqueue_copy(self._queue, array, buf)

    def copy(self, dst: Any, dst_offset: int, src: Any, src_offset: int, nbytes: int) -> None:
        """Queue a device-to-device copy."""
        if nbytes:
            self._cl.enqueue_copy(self._queue, dst, src, byte_count=nbytes, src_offset=src_offset,
                                  dst_offset=dst_offset)

    def finish(self) -> None:
        """``clFinish`` on the queue."""
        self._queue.finish()


class OpenCLKernel(GpuCallable):
    """A :class:`GpuProgram` built by the OpenCL driver; a rejected source raises
    :class:`~autosched.runner.CompileError` with the build log."""

    def __init__(self, program: GpuProgram, args: Sequence[ArgSpec]) -> None:
        super().__init__(program, args)
        cl = _cl()
        self._cl = cl
        self._ctx, self._queue = opencl_queue(program.device_type, program.platform)
        try:
            built = cl.Program(self._ctx, program.source).build()
        except cl.RuntimeError as e:
            raise CompileError(["opencl", "build"], str(e)) from None
        self._kernels = [cl.Kernel(built, launch.name) for launch in program.launches]
        self._temps: list[Any] | None = None  # the temporaries of launch(), made on its first call

    def memory(self) -> OpenCLMemory:
        """The context and queue this program was built for."""
        return OpenCLMemory(self._ctx, self._queue)

    def launch(self, buffers: Sequence[Any]) -> None:
        """Queue the launches on ``buffers`` (see :meth:`GpuCallable.launch`)."""
        if self._temps is None:
            memory = self.memory()
            self._temps = [memory.alloc(a.nbytes) for a in self.temp_arrays()]
        for k, launch in zip(self._kernels, self.program.launches, strict=True):
            k.set_args(*buffers, *self._temps)
            self._cl.enqueue_nd_range_kernel(self._queue, k, launch.global_size, launch.block)

    def run(self, arrays: Sequence[np.ndarray], number: int) -> float:
        """Copy in, launch ``number`` times, copy the outputs back; seconds between the first
        launch's start and the last one's end, from profiling events."""
        cl = self._cl
        flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
        host = [*arrays, *self.temp_arrays()]
        bufs = [cl.Buffer(self._ctx, flags, hostbuf=a) if a.nbytes else None for a in host]
        for k in self._kernels:
            k.set_args(*bufs)
        events = []
        for _ in range(number):
            for k, launch in zip(self._kernels, self.program.launches, strict=True):
                events.append(cl.enqueue_nd_range_kernel(self._queue, k, launch.global_size, launch.block))
        for spec, arr, buf in zip(self.args, arrays, bufs, strict=False):
            if spec.is_output and buf is not None:
                cl.enqueue_copy(self._queue, arr, buf)
        self._queue.finish()
        if not events:
            return 0.0
        return float(events[-1].profile.end - events[0].profile.start) * 1e-9
