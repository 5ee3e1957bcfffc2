"""The ``opencl`` target kind: OpenCL C compiled by the OpenCL driver (PoCL on CPUs); its options
and the limits it reads from the selected device (or that any OpenCL 1.2 device meets)."""

from __future__ import annotations

from typing import Any

from ...target import GPU_HARDWARE, TargetError, TargetKind
from .device import DeviceNotFound, opencl_limits


class OpenCLKind(TargetKind):
    """OpenCL C compiled by the OpenCL driver (PoCL on CPUs)."""

    name = "opencl"
    peak_ops = 1e17
    options = (
        "max-threads-per-block",
        "shared-memory-bytes",
        "warp-size",
        "compute-units",
        "device",
        "platform",
    )
    optional = frozenset({"compute-units", "device", "platform"})

    def complete(self, given: dict[str, Any]) -> dict[str, Any]:
        """Read from the selected device where pyopencl finds one (a ``-device`` or ``-platform``
        that matches nothing is an error), else defaults any OpenCL 1.2 device meets: work-groups
        of 256, 32 KiB local memory."""
        defaults = {"max_threads_per_block": 256, "shared_memory_bytes": 32 << 10, "warp_size": 1}
        found: dict[str, Any] = {}
        if not given.keys() >= GPU_HARDWARE:
            try:
                found = opencl_limits(given.get("device_type"), given.get("platform"))
            except DeviceNotFound as e:
                if "device_type" in given or "platform" in given:
                    raise TargetError(str(e)) from None
        return defaults | found | given
