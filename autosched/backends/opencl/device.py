"""The OpenCL device a target selects, and the hardware parameters a target carries read from it.

``"opencl -device=cpu|gpu|accelerator -platform=NAME"`` selects the first device of that type on
the first platform whose name contains NAME (case-insensitive); a platform name is user text,
checked by the target's option table and only ever compared with the names the OpenCL driver
reports. Nothing here runs a command. Without pyopencl the queries find nothing and targets keep
their defaults, as when cross-compiling.
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Any


class DeviceNotFound(LookupError):
    """No device matches what a target asks for (one line: what was asked, what there is)."""


def _pyopencl() -> Any | None:
    try:
        import pyopencl
    except ImportError:
        return None
    return pyopencl


def opencl_device(device_type: str | None = None, platform: str | None = None) -> Any:
    """The pyopencl device a target selects (``AUTOSCHED_OPENCL_PLATFORM`` stands in for an
    unnamed platform); :class:`DeviceNotFound` names what was asked and what is installed."""
    cl = _pyopencl()
    if cl is None:
        raise DeviceNotFound(
            "OpenCL targets need pyopencl and a driver: pip install pyopencl pocl-binary-distribution"
        )
    want = platform if platform is not None else os.environ.get("AUTOSCHED_OPENCL_PLATFORM", "")
    try:
        platforms = cl.get_platforms()
    except cl.Error as e:
        hint = "pip install pocl-binary-distribution"
        raise DeviceNotFound(f"no OpenCL platform is installed ({e}); {hint}") from None
    seen = []
    for p in platforms:
        for d in p.get_devices():
            kinds = [k.strip() for k in cl.device_type.to_string(d.type).lower().split("|")]
            kinds = [k for k in kinds if k != "all"]
            seen.append(f"{p.name.strip()} ({', '.join(kinds)})")
            if want.lower() in p.name.lower() and (device_type is None or device_type in kinds):
                return d
    asked = " ".join(
        ([f"-device={device_type}"] if device_type else []) + ([f"-platform={want!r}"] if want else [])
    )
    there = "; ".join(seen) or "none (pip install pocl-binary-distribution)"
    raise DeviceNotFound(f"no OpenCL device matches {asked or 'the target'}; devices here: {there}")


def opencl_limits(device_type: str | None = None, platform: str | None = None) -> dict[str, int]:
    """Target fields read from the selected OpenCL device: work-group size, local memory, compute
    units (and NVIDIA's warp size where the driver reports it); asked once per selection."""
    want = platform if platform is not None else os.environ.get("AUTOSCHED_OPENCL_PLATFORM", "")
    return _opencl_limits(device_type, want)


@functools.cache
def _opencl_limits(device_type: str | None, platform: str) -> dict[str, int]:
    d = opencl_device(device_type, platform)
    limits = {
        "max_threads_per_block": int(d.max_work_group_size),
        "shared_memory_bytes": int(d.local_mem_size),
        "compute_units": int(d.max_compute_units),
    }
    with contextlib.suppress(Exception):  # only NVIDIA's driver reports a warp size
        limits["warp_size"] = int(d.warp_size_nv)
    return limits
