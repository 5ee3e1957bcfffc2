"""The Python side of ``call_packed`` callbacks (see :mod:`autosched.te.packed`): one cffi callback
that every kernel with call sites gets as its hook; it wraps the pointers the C passes as numpy
arrays and calls the registered function."""

from __future__ import annotations

import math
import traceback
from pathlib import Path
from typing import Any

import cffi
import numpy as np

from ..dtypes import numpy_dtype
from ..expr import FUNCS, HOOK_SETTER, SITES

_FFI = cffi.FFI()
_FFI.cdef(f"void {HOOK_SETTER}(void (*hook)(int, void **));")


def _dispatch(number: int, argv: Any) -> None:
    """Call the function of call site ``number`` with its buffers (as arrays) and constants."""
    site = SITES[number]
    arrays = []
    for k, (shape, dtype) in enumerate(site.buffers):
        dt = numpy_dtype(dtype)
        raw = _FFI.buffer(argv[k], math.prod(shape) * dt.itemsize)
        arrays.append(np.frombuffer(raw, dtype=dt).reshape(shape))
    fn = FUNCS.get(site.name)
    if fn is None:
        raise LookupError(f"call_packed {site.name!r}: no function of that name is registered any more")
    fn(*arrays, *site.constants)


def _report(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
    """A callback that raised: the traceback goes to stderr (C cannot take the exception); the
    outputs it did not write keep what they held."""
    traceback.print_exception(exc_type, exc, tb)


_HOOK = _FFI.callback("void(int, void **)", _dispatch, onerror=_report)
_SET: set[str] = set()


def install_hook(lib_path: str | Path) -> None:
    """Point the call-site hook of the kernel library ``lib_path`` at this process's callback."""
    key = str(Path(lib_path).resolve())
    if key not in _SET:
        _FFI.dlopen(key).asc_set_packed_hook(_HOOK)  # the same loaded library as the kernel's
        _SET.add(key)
