"""The ``cuda`` target kind: its options and device query, NVRTC and the pycuda driver, the
backend, and the host code of an export."""

from .backend import CudaBackend
from .driver import CudaKernel, CudaUnavailable, cuda_driver, device_arch, nvrtc_compile, nvrtc_version
from .target_kind import CudaKind

__all__ = ["CudaBackend", "CudaKernel", "CudaKind", "CudaUnavailable", "cuda_driver", "device_arch",
           "nvrtc_compile", "nvrtc_version"]  # fmt: skip
