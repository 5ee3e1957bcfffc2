"""A compiled kernel as a Python callable over numpy arrays.

The C ABI a kernel library provides, for a kernel ``NAME`` over ``n`` arrays::

    int    NAME(void *a0, ..., void *a{n-1});                   /* run once; 0, or -1: out of memory */
    double NAME__time(void *a0, ..., void *a{n-1}, int number); /* run `number` times, return seconds */
    int    NAME__bench(void *a0, ..., void *a{n-1}, int number, int repeat, double min_repeat_ms,
                       unsigned char *flush_buf, size_t flush_bytes, double cooldown_ms,
                       double *times);           /* the timing harness: see emit_c.timing_entries */

``NAME__bench`` is optional (hand-written libraries may lack it); :meth:`Kernel.bench` needs it.

Arrays are passed as pointers to C-contiguous data in the order of the :class:`ArgSpec` list
(inputs, then outputs). A kernel over symbolic shapes (``asc.size_var``) takes one more ``int``
per shape variable after the arrays (and before ``number`` in the timing entries), in order of
first appearance in the arguments' shapes; :class:`Kernel` reads their values from the arrays'
shapes. A kernel with scalar arguments (``asc.var`` listed among the arguments: see
:class:`ScalarArg`) takes their values after the sizes, in argument order, as C ``float``,
``double``, ``int32_t`` or ``int64_t``; the caller passes each at its place in the argument list.
Every argument is checked before any C code runs: all arrays must agree on every variable.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import accepts, numpy_dtype
from ..dtypes import dtype as _dtype
from ..expr import Extent, Var, evaluate, extent_vars
from ..hardware import host_hardware

_MAX_NUMBER = 2**31 - 1
_MIN_FLUSH, _MAX_FLUSH = 8 << 20, 512 << 20


def flush_bytes() -> int:
    """Bytes :meth:`Kernel.bench` writes before each repeat to flush the caches.

    Twice the host's caches (L3 plus every core's L2), at least 8 MiB and at most 512 MiB: the cap
    keeps a flush under ~0.1 s on machines (often VMs) that report a huge L3.
    """
    hw = host_hardware()
    return min(_MAX_FLUSH, max(_MIN_FLUSH, 2 * (hw.l3 + hw.cores * hw.l2)))


@functools.cache
def _flush_buffer() -> np.ndarray:
    """The cache-flush buffer, allocated on first use and kept, shared by every kernel of the process
    (the first flush faults it in: about 1 s for 512 MiB in a VM)."""
    return np.zeros(flush_bytes(), dtype=np.uint8)


@dataclass(frozen=True, slots=True)
class ArgSpec:
    """One kernel argument: its name, shape, dtype name, and whether the kernel writes it."""

    name: str
    shape: tuple[Extent, ...]  # ints, or expressions of shape variables
    dtype: str
    is_output: bool = False

    def __post_init__(self) -> None:
        shape = tuple(d if isinstance(d, Var) or extent_vars(d) else evaluate(d, {}) for d in self.shape)
        if any(isinstance(d, int) and d < 0 for d in shape):
            raise ValueError(f"argument {self.name!r}: negative extent in shape {shape}")
        object.__setattr__(self, "shape", shape)
        _dtype(self.dtype)

    def __str__(self) -> str:
        shape = ", ".join(str(d) for d in self.shape)
        return f"{self.name}: {self.dtype}[{shape}]" + (" (output)" if self.is_output else "")


@dataclass(frozen=True, slots=True)
class ScalarArg:
    """A scalar the caller passes at ``position`` of the call: a ``dtype`` value the kernel takes
    as a C parameter after its sizes or, with ``is_size``, a shape variable listed among the
    arguments (TVM's ``build(s, [A, n])``): checked against the arrays, not passed again."""

    name: str
    dtype: str
    position: int
    is_size: bool = False


class CheckedArgs:
    """The argument check every kernel callable shares (C, OpenCL, CUDA): arrays, dtypes, shapes,
    layout and aliasing, before any device code runs."""

    def __init__(
        self, name: str, args: Sequence[ArgSpec], sizes: Sequence[str] = (), scalars: Sequence[ScalarArg] = ()
    ) -> None:
        self.name = name
        self.args = tuple(args)
        self.sizes = tuple(sizes)  # names of the shape variables, in C parameter order
        self.scalars = tuple(scalars)  # at their places in the call; C takes them after the sizes
        self._where = size_sources(self.args, self.sizes)
        self._dtypes = [numpy_dtype(a.dtype) for a in self.args]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}({', '.join(map(str, self.args))})>"

    def _label(self, i: int) -> str:
        spec = self.args[i]
        return f"kernel {self.name!r}: argument {i} {spec.name!r}" + (" (output)" if spec.is_output else "")

    def _check(self, arrays: Sequence[Any]) -> list[int]:
        """Check the arrays; return the values of the shape variables (C parameter order)."""
        if len(arrays) != len(self.args):
            names = ", ".join(a.name for a in self.args)
            raise TypeError(
                f"kernel {self.name!r} takes {len(self.args)} arrays ({names}), got {len(arrays)}"
            )
        for i, (spec, want, arr) in enumerate(zip(self.args, self._dtypes, arrays, strict=True)):
            if not isinstance(arr, np.ndarray):
                raise TypeError(f"{self._label(i)}: expected a numpy.ndarray, got {type(arr).__name__}")
            if arr.dtype != want and not accepts(spec.dtype, arr.dtype):
                raise TypeError(f"{self._label(i)}: expected dtype {spec.dtype}, got {arr.dtype}")
        env = self._bind(arrays)
        for i, (spec, arr) in enumerate(zip(self.args, arrays, strict=True)):
            want_shape = tuple(evaluate(d, env) for d in spec.shape) if self.sizes else spec.shape
            if arr.shape != want_shape:
                raise ValueError(f"{self._label(i)}: expected shape {want_shape}, got {arr.shape}")
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
        return [env[n] for n in self.sizes]

    def _prepare(self, values: Sequence[Any]) -> tuple[list[np.ndarray], list[int | float]]:
        """Check a call's values (arrays and scalars at their places); return the arrays and the
        C parameters after them (the sizes, then the scalar values)."""
        if not self.scalars:
            return list(values), list(self._check(values))
        if len(values) != len(self.args) + len(self.scalars):
            names = [a.name for a in self.args]
            for sc in self.scalars:
                names.insert(sc.position, sc.name)
            raise TypeError(
                f"kernel {self.name!r} takes {len(names)} arguments ({', '.join(names)}), got {len(values)}"
            )
        places = {sc.position: sc for sc in self.scalars}
        arrays = [v for i, v in enumerate(values) if i not in places]
        tail: list[int | float] = list(self._check(arrays))
        env = dict(zip(self.sizes, tail, strict=True))
        for sc in self.scalars:
            value = _scalar_value(self.name, sc, values[sc.position])
            if not sc.is_size:
                tail.append(value)
            elif value != env[sc.name]:
                raise ValueError(
                    f"kernel {self.name!r}: argument {sc.position} {sc.name!r} is {value} but the "
                    f"arrays give {env[sc.name]}"
                )
        return arrays, tail

    def _bind(self, arrays: Sequence[np.ndarray]) -> dict[str, int]:
        """Values of the shape variables from the arrays (each array's rank is checked first);
        a ValueError names a variable that two arrays give different values."""
        for i, (spec, arr) in enumerate(zip(self.args, arrays, strict=True)):
            if arr.ndim != len(spec.shape):
                dims = ", ".join(str(d) for d in spec.shape) + ("," if len(spec.shape) == 1 else "")
                raise ValueError(f"{self._label(i)}: expected shape ({dims}), got {arr.shape}")
        env: dict[str, int] = {}
        first: dict[str, tuple[int, int]] = {}
        for name, places in self._where.items():
            for i, d in places:
                value = int(arrays[i].shape[d])
                if name not in env:
                    env[name], first[name] = value, (i, d)
                elif env[name] != value:
                    j, e = first[name]
                    raise ValueError(
                        f"kernel {self.name!r}: shape variable {name!r} is {env[name]} in argument "
                        f"{j} {self.args[j].name!r} (dimension {e}) but {value} in argument {i} "
                        f"{self.args[i].name!r} (dimension {d})"
                    )
            if env[name] > _MAX_NUMBER:
                raise ValueError(f"kernel {self.name!r}: shape variable {name!r} = {env[name]} overflows int")
        return env


class Kernel(CheckedArgs):
    """A loaded kernel: ``kernel(*arrays)`` runs it; ``kernel.time`` and ``kernel.bench`` time it in C.

    Built by :func:`autosched.runner.load_kernel`. The kernel holds its library handle, so the
    library stays loaded as long as the kernel lives.
    """

    def __init__(
        self,
        ffi: Any,
        lib: Any,
        name: str,
        args: Sequence[ArgSpec],
        sizes: Sequence[str] = (),
        scalars: Sequence[ScalarArg] = (),
    ) -> None:
        super().__init__(name, args, sizes, scalars)
        self._ffi = ffi
        self._lib = lib
        self._func = getattr(lib, name)
        self._timer = getattr(lib, name + "__time")
        self._bench = getattr(lib, name + "__bench", None)
        self.last_number = 0  # calls per repeat in the last time() or bench() (0 before the first)

    def _pointers(self, arrays: Sequence[np.ndarray]) -> list[Any]:
        return [self._ffi.from_buffer(a) for a in arrays]

    def __call__(self, *values: Any) -> None:
        """Run the kernel once on ``values`` (arrays: inputs, then outputs; scalars at their places),
        writing the outputs in place."""
        arrays, tail = self._prepare(values)
        if self._func(*self._pointers(arrays), *tail) != 0:
            raise MemoryError(f"kernel {self.name!r} could not allocate its temporary buffers")

    def bind(self, *values: Any) -> Callable[[], None]:
        """``kernel(*values)`` as a callable of no arguments, for calls in a loop on the same arrays
        (their contents may change between calls, not the arrays): the values are checked once,
        here, and each call goes straight to C. The callable keeps the arrays alive."""
        arrays, tail = self._prepare(values)
        args, func, name = (*self._pointers(arrays), *tail), self._func, self.name

        def run() -> None:
            if func(*args) != 0:
                raise MemoryError(f"kernel {name!r} could not allocate its temporary buffers")

        return run

    def time(
        self, *values: Any, number: int = 1, repeat: int = 3, min_repeat_ms: float = 0
    ) -> list[float]:
        """Seconds per call, one value per repeat, measured inside C with a monotonic clock.

        Each repeat runs the kernel ``number`` times. With ``min_repeat_ms`` > 0, ``number`` is
        first grown (in a calibration run that also warms up) until one repeat lasts at least that
        long; the number used is kept in :attr:`last_number`.
        """
        _check_counts(number, repeat, min_repeat_ms)
        arrays, tail = self._prepare(values)
        pointers = [*self._pointers(arrays), *tail]
        if min_repeat_ms > 0:
            number = self._calibrate(pointers, number, min_repeat_ms / 1e3)
        self.last_number = number
        return [self._run_timer(pointers, number) / number for _ in range(repeat)]

    def bench(
        self,
        *values: Any,
        number: int = 1,
        repeat: int = 3,
        min_repeat_ms: float = 0,
        flush_cache: bool = False,
        cooldown_ms: float = 0,
    ) -> list[float]:
        """Seconds per call, one value per repeat, from the library's C timing harness.

        One call into C does everything: a warm-up run that also grows ``number`` until a repeat
        lasts ``min_repeat_ms``, then ``repeat`` repeats, each after a ``cooldown_ms`` pause and,
        with ``flush_cache``, after writing :func:`flush_bytes` bytes to evict the caches. The
        number of calls per repeat is kept in :attr:`last_number`.
        """
        _check_counts(number, repeat, min_repeat_ms)
        if not cooldown_ms >= 0:
            raise ValueError(f"cooldown_ms must be >= 0, got {cooldown_ms!r}")
        if self._bench is None:
            raise RuntimeError(f"kernel {self.name!r}: its library has no {self.name}__bench entry")
        arrays, tail = self._prepare(values)
        ffi = self._ffi
        times = ffi.new("double[]", repeat)
        flush = _flush_buffer() if flush_cache else None
        flush_ptr = ffi.from_buffer(flush) if flush is not None else ffi.NULL
        flush_len = flush.size if flush is not None else 0
        args = (number, repeat, float(min_repeat_ms), flush_ptr, flush_len, float(cooldown_ms), times)
        got = int(self._bench(*self._pointers(arrays), *tail, *args))
        if got < 0:
            raise MemoryError(f"kernel {self.name!r} could not allocate its temporary buffers")
        self.last_number = got
        return list(times)

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


def size_sources(args: Sequence[ArgSpec], sizes: Sequence[str]) -> dict[str, list[tuple[int, int]]]:
    """For each shape variable, the (argument, dimension) pairs whose extent is that variable
    alone; a variable no dimension gives alone cannot be read from the arrays (ValueError)."""
    where: dict[str, list[tuple[int, int]]] = {n: [] for n in sizes}
    for i, spec in enumerate(args):
        for d, ext in enumerate(spec.shape):
            if isinstance(ext, Var) and ext.name in where:
                where[ext.name].append((i, d))
    lost = [n for n, places in where.items() if not places]
    if lost:
        raise ValueError(
            f"shape variables {lost} are no dimension of any argument by themselves; a kernel reads "
            "each variable's value from a dimension that is exactly that variable"
        )
    return where


def _scalar_value(kernel: str, sc: ScalarArg, value: Any) -> int | float:
    """A scalar argument's value as Python passes it to C; a wrong type or an overflow is one line."""
    d = _dtype(sc.dtype)
    what = f"kernel {kernel!r}: argument {sc.position} {sc.name!r} is a {sc.dtype} scalar"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{what}, got {type(value).__name__} {value!r}")
    if d.is_float:
        return float(value)
    if not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what}, got a {type(value).__name__} {value!r}; pass an int")
    if not -(1 << (d.bits - 1)) <= int(value) < 1 << (d.bits - 1):
        raise ValueError(f"{what}, got {value}, which overflows it")
    return int(value)


def _check_counts(number: int, repeat: int, min_repeat_ms: float) -> None:
    if not (isinstance(number, int) and 1 <= number <= _MAX_NUMBER):
        raise ValueError(f"number must be an int in [1, {_MAX_NUMBER}], got {number!r}")
    if not (isinstance(repeat, int) and repeat >= 1):
        raise ValueError(f"repeat must be a positive int, got {repeat!r}")
    if not min_repeat_ms >= 0:
        raise ValueError(f"min_repeat_ms must be >= 0, got {min_repeat_ms!r}")
