"""Sharing the cores with other thread pools in one application (numpy's OpenBLAS, above all).

After a call, both OpenMP (the pool that runs autosched's parallel kernels) and OpenBLAS (numpy's
``@``) keep their idle worker threads spinning for a while, so that the next call starts fast. An
application that calls an autosched kernel and numpy in turn pays for it: each library's spinning
threads take the cores the other one needs (``benchmarks/bench_threads.py`` measures it).

:func:`share_cores` makes both pools put their idle workers to sleep at once. Both libraries read
these settings when they are loaded, so it only works before they are: call it before the first
``import numpy`` (``import autosched`` imports numpy), or set ``AUTOSCHED_SHARE_CORES=1`` in the
environment, which ``import autosched`` honours before it imports numpy. It never imports numpy.
"""

from __future__ import annotations

import os
from pathlib import Path

from .diagnostics import warn

__all__ = ["loaded_thread_pools", "share_cores"]

#: library name fragments in /proc/self/maps -> the pool they are
_POOLS = {"libgomp": "OpenMP (libgomp)", "libomp": "OpenMP (libomp)", "openblas": "OpenBLAS"}

#: what share_cores sets, by the pool that reads it
_SETTINGS = {
    "OpenMP": {"OMP_WAIT_POLICY": "passive"},  # idle OpenMP workers sleep instead of spinning
    "OpenBLAS": {"OPENBLAS_THREAD_TIMEOUT": "4"},  # idle OpenBLAS workers sleep after 2^4 cycles
}


def loaded_thread_pools() -> set[str]:
    """The thread-pool libraries already loaded in this process (read from ``/proc/self/maps``)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return set()
    return {pool for fragment, pool in _POOLS.items() if fragment in maps}


def share_cores() -> list[str]:
    """Make OpenMP's and OpenBLAS's idle workers sleep instead of spinning; see the module doc.

    Sets ``OMP_WAIT_POLICY=passive`` and ``OPENBLAS_THREAD_TIMEOUT=4`` in ``os.environ`` unless the
    application chose values already. Returns the pools that were loaded too early to take the
    setting (an empty list when everything took effect); issues one warning naming them.
    """
    loaded = loaded_thread_pools()
    late = []
    for family, settings in _SETTINGS.items():
        for name, value in settings.items():
            os.environ.setdefault(name, value)
        late += sorted(pool for pool in loaded if pool.startswith(family))
    if late:
        warn(
            f"share_cores() came after {', '.join(late)} was loaded, which keeps its spinning idle "
            "threads: call it before importing numpy, or set AUTOSCHED_SHARE_CORES=1 (or "
            "OMP_WAIT_POLICY=passive OPENBLAS_THREAD_TIMEOUT=4) in the environment"
        )
    return late
