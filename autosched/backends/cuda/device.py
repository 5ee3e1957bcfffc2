"""The hardware parameters a CUDA target carries, read from CUDA device 0 where one is visible."""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def cuda_limits() -> dict[str, Any]:
    """Target fields read from CUDA device 0 through the driver (pycuda), or nothing when no driver
    or no device is there: threads and shared memory per block, warp size, SMs, its architecture."""
    try:
        import pycuda.driver as drv

        drv.init()
        if drv.Device.count() == 0:
            return {}
        dev = drv.Device(0)
    except Exception:  # no pycuda, no libcuda, no device: the target keeps its defaults
        return {}
    attr = drv.device_attribute
    major, minor = dev.compute_capability()
    return {
        "max_threads_per_block": int(dev.get_attribute(attr.MAX_THREADS_PER_BLOCK)),
        "shared_memory_bytes": int(dev.get_attribute(attr.MAX_SHARED_MEMORY_PER_BLOCK)),
        "warp_size": int(dev.get_attribute(attr.WARP_SIZE)),
        "compute_units": int(dev.get_attribute(attr.MULTIPROCESSOR_COUNT)),
        "gpu_arch": f"sm_{major}{minor}",
    }
