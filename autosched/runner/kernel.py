"""A compiled kernel as a Python callable over numpy arrays.

The C ABI a kernel library provides, for a kernel ``NAME`` over ``n`` arrays::

    int    NAME(void *a0, ..., void *a{n-1});                   /* run once; 0, or -1: out of memory */
    double NAME__time(void *a0, ..., void *a{n-1}, int number); /* run `number` times, return seconds */

Arrays are passed as pointers to C-contiguous data in the order of the :class:`ArgSpec` list
(inputs, then outputs). Every argument is checked before any C code runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import dtype as _dtype
from ..dtypes import numpy_dtype

_MAX_NUMBER = 2**31 - 1


@dataclass(frozen=True, slots=True)
class ArgSpec:
    """One kernel argument: its name, shape, dtype name, and whether the kernel writes it."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    is_output: bool = False

    def __post_init__(self) -> None:
        shape = tuple(int(d) for d in self.shape)
        if any(d < 0 for d in shape):
            raise ValueError(f"argument {self.name!r}: negative extent in shape {shape}")
        object.__setattr__(self, "shape", shape)
        _dtype(self.dtype)

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}{list(self.shape)}" + (" (output)" if self.is_output else "")


class Kernel:
    """A loaded kernel: ``kernel(*arrays)`` runs it, ``kernel.time(*arrays)`` times it in C.

    Built by :func:`autosched.runner.load_kernel`. The kernel holds its library handle, so the
    library stays loaded as long as the kernel lives.
    """

    def __init__(self, ffi: Any, lib: Any, name: str, args: Sequence[ArgSpec]) -> None:
        self.name = name
        self.args = tuple(args)
        self._ffi = ffi
        self._lib = lib
        self._func = getattr(lib, name)
        self._timer = getattr(lib, name + "__time")
        self._dtypes = [numpy_dtype(a.dtype) for a in self.args]

    def __repr__(self) -> str:
        return f"<Kernel {self.name}({', '.join(map(str, self.args))})>"

    def _label(self, i: int) -> str:
        spec = self.args[i]
        return f"kernel {self.name!r}: argument {i} {spec.name!r}" + (" (output)" if spec.is_output else "")

    def _check(self, arrays: Sequence[Any]) -> None:
        if len(arrays) != len(self.args):
            names = ", ".join(a.name for a in self.args)
            raise TypeError(
                f"kernel {self.name!r} takes {len(self.args)} arrays ({names}), got {len(arrays)}"
            )
        for i, (spec, want, arr) in enumerate(zip(self.args, self._dtypes, arrays, strict=True)):
            if not isinstance(arr, np.ndarray):
                raise TypeError(f"{self._label(i)}: expected a numpy.ndarray, got {type(arr).__name__}")
            if arr.dtype != want:
                raise TypeError(f"{self._label(i)}: expected dtype {spec.dtype}, got {arr.dtype}")
            if arr.shape != spec.shape:
                raise ValueError(f"{self._label(i)}: expected shape {spec.shape}, got {arr.shape}")
            if not arr.flags.c_contiguous:
                raise ValueError(f"{self._label(i)}: array is not C-contiguous (use numpy.ascontiguousarray)")
            if spec.is_output and not arr.flags.writeable:
                raise ValueError(f"{self._label(i)}: output array is read-only")
        for i, spec in enumerate(self.args):
            if not spec.is_output:
                continue
            for j, other in enumerate(arrays):
                if j != i and np.may_share_memory(arrays[i], other):
                    raise ValueError(
                        f"{self._label(i)}: output shares memory with argument {j} "
                        f"{self.args[j].name!r}; pass separate arrays"
                    )

    def _pointers(self, arrays: Sequence[np.ndarray]) -> list[Any]:
        return [self._ffi.from_buffer(a) for a in arrays]

    def __call__(self, *arrays: np.ndarray) -> None:
        """Run the kernel once on ``arrays`` (inputs, then outputs), writing the outputs in place."""
        self._check(arrays)
        if self._func(*self._pointers(arrays)) != 0:
            raise MemoryError(f"kernel {self.name!r} could not allocate its temporary buffers")

    def time(
        self, *arrays: np.ndarray, number: int = 1, repeat: int = 3, min_repeat_ms: float = 0
    ) -> list[float]:
        """Seconds per call, one value per repeat, measured inside C with a monotonic clock.

        Each repeat runs the kernel ``number`` times. With ``min_repeat_ms`` > 0, ``number`` is
        first grown (in a calibration run that also warms up) until one repeat lasts at least that
        long.
        """
        if not (isinstance(number, int) and 1 <= number <= _MAX_NUMBER):
            raise ValueError(f"number must be an int in [1, {_MAX_NUMBER}], got {number!r}")
        if not (isinstance(repeat, int) and repeat >= 1):
            raise ValueError(f"repeat must be a positive int, got {repeat!r}")
        if not min_repeat_ms >= 0:
            raise ValueError(f"min_repeat_ms must be >= 0, got {min_repeat_ms!r}")
        self._check(arrays)
        pointers = self._pointers(arrays)
        if min_repeat_ms > 0:
            number = self._calibrate(pointers, number, min_repeat_ms / 1e3)
        return [self._run_timer(pointers, number) / number for _ in range(repeat)]

    def _run_timer(self, pointers: list[Any], number: int) -> float:
        elapsed = float(self._timer(*pointers, number))
        if not elapsed >= 0:
            raise RuntimeError(f"kernel {self.name!r}: timer returned {elapsed}")
        return elapsed

    def _calibrate(self, pointers: list[Any], number: int, min_seconds: float) -> int:
        while number < _MAX_NUMBER:
            elapsed = self._run_timer(pointers, number)
            if elapsed >= min_seconds:
                break
            grow = 10.0 if elapsed == 0 else min(10.0, 1.2 * min_seconds / elapsed)
            number = min(_MAX_NUMBER, max(number + 1, math.ceil(number * grow)))
        return number
