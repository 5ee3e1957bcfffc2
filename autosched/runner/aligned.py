"""Arrays whose data starts at a 64-byte boundary (a cache line; a whole AVX-512 vector).

numpy places a large array 16 bytes past a page boundary, so half of a kernel's 32-byte vector
loads of it straddle two cache lines. The arrays a kernel is measured on (:mod:`.worker`) and
the ones a network runs on (:mod:`autosched.graph.network`, whose workspace is planned in
64-byte steps too) are aligned, so a program is timed as it runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

ALIGN = 64


def aligned_empty(shape: Sequence[int], dtype: str | np.dtype) -> np.ndarray:
    """An uninitialized C-contiguous array whose data starts at an :data:`ALIGN`-byte boundary."""
    dt = np.dtype(dtype)
    size = math.prod(shape) * dt.itemsize
    raw = np.empty(size + ALIGN, dtype=np.uint8)
    skip = -raw.ctypes.data % ALIGN
    return raw[skip : skip + size].view(dt).reshape(tuple(shape))


def aligned_array(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` in an :func:`aligned_empty` array."""
    out = aligned_empty(a.shape, a.dtype)
    out[...] = a
    return out
