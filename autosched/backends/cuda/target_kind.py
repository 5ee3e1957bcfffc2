"""The ``cuda`` target kind: CUDA C compiled by NVRTC; its options and the limits it reads from the
device (or assumes of current NVIDIA GPUs)."""

from __future__ import annotations

from typing import Any

from ...target import GPU_HARDWARE, TargetKind
from .device import cuda_limits


class CudaKind(TargetKind):
    """CUDA C compiled by NVRTC."""

    name = "cuda"
    peak_ops = 1e17
    options = ("arch", "max-threads-per-block", "shared-memory-bytes", "warp-size", "compute-units")
    optional = frozenset({"arch", "compute-units"})

    def complete(self, given: dict[str, Any]) -> dict[str, Any]:
        """Read from CUDA device 0 where a driver and a GPU are, else defaults of current NVIDIA
        GPUs: 1024 threads, 48 KiB static shared memory, warps of 32."""
        defaults = {"max_threads_per_block": 1024, "shared_memory_bytes": 48 << 10, "warp_size": 32}
        found = {} if given.keys() >= GPU_HARDWARE else cuda_limits()
        return defaults | found | given
