"""The ``opencl`` target kind: its options and device query, the pyopencl driver, the backend, and
the host code of an export."""

from .backend import OpenCLBackend
from .device import DeviceNotFound, opencl_device, opencl_limits
from .driver import OpenCLKernel, OpenCLUnavailable
from .target_kind import OpenCLKind

__all__ = ["DeviceNotFound", "OpenCLBackend", "OpenCLKernel", "OpenCLKind", "OpenCLUnavailable",
           "opencl_device", "opencl_limits"]  # fmt: skip
