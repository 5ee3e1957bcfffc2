"""Backends: what each target kind emits, builds and measures with, in one registry.

A :class:`Backend` is registered for a target kind name (``c``, ``opencl``, ``cuda``) with
:func:`register_backend`; :func:`backend_for` finds the one of a target. The driver (``asc.emit``,
``asc.build``), :class:`~autosched.task.Task` and ``asc.tune`` ask the backend and never branch on
the kind's name, so a new kind (a remote board, another GPU API) plugs in by registering one.
"""

from .base import Backend, backend_for, register_backend
from .c import CBackend
from .gpu import CudaBackend, OpenCLBackend

__all__ = ["Backend", "CBackend", "CudaBackend", "OpenCLBackend", "backend_for", "register_backend"]
