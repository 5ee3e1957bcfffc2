"""Backends: one folder per target kind (``c/``, ``cuda/``, ``opencl/``) with everything of that
kind (target options and device query, printer, loader, runner, host code of an export), and one
registry of them (:mod:`.base`).

A :class:`Backend` is registered for a target kind name with :func:`register_backend`;
:func:`backend_for` finds the one of a target. The driver (``asc.emit``, ``asc.build``),
:class:`~autosched.task.Task`, ``asc.tune`` and the exporters ask the backend and never branch on
the kind's name, so a new kind plugs in by registering one, from inside the package or from a
plugin (:mod:`.plugins`).
"""

from .base import Backend, backend_for, backends, gpu_kinds, register_backend
from .c import CBackend
from .cuda import CudaBackend
from .gpu_common import GpuBackend, HostCall, HostExport
from .opencl import OpenCLBackend

__all__ = ["Backend", "CBackend", "CudaBackend", "GpuBackend", "HostCall", "HostExport", "OpenCLBackend",
           "backend_for", "backends", "gpu_kinds", "register_backend"]  # fmt: skip
