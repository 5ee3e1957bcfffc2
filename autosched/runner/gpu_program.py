"""What a GPU builder hands a GPU runner: the kernels' source and how to launch them.

A :class:`GpuProgram` is plain data (it pickles and it is written as JSON, a ``.json`` file in the
kernel cache standing where a C build has its library), so builds are cached by content and
measured in the runner's isolated worker like C kernels. :class:`GpuCallable` is the shared part of
the OpenCL and CUDA callables: argument checks, timing by device events, ``bench`` as the worker
calls it; a failure of the device API while running is a :class:`DeviceError`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..dtypes import numpy_dtype
from .cache_trust import private_folder
from .kernel import ArgSpec, CheckedArgs

Dims = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class Launch:
    """One kernel launch: the kernel's name, ``grid`` blocks of ``block`` threads (x, y, z)."""

    name: str
    grid: Dims
    block: Dims

    @property
    def global_size(self) -> Dims:
        """Work-items in all per dimension (OpenCL's global size)."""
        g, b = self.grid, self.block
        return (g[0] * b[0], g[1] * b[1], g[2] * b[2])


@dataclass(frozen=True, slots=True)
class GpuProgram:
    """The source of a GPU program, its launches in order, and the global temporaries (dtype,
    elements) that follow the arguments in every kernel's parameter list."""

    kind: str  # the GPU kind's name (its backend registered the loader)
    source: str
    launches: tuple[Launch, ...]
    temps: tuple[tuple[str, int], ...] = ()
    device_type: str = ""  # an OpenCL target's -device (empty: any)
    platform: str = ""  # an OpenCL target's -platform (empty: any)

    def to_json(self) -> str:
        """The program as one JSON text (:meth:`from_json` reads it back)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> GpuProgram:
        """The program written by :meth:`to_json`."""
        d = json.loads(text)
        launches = tuple(Launch(x["name"], _dims(x["grid"]), _dims(x["block"])) for x in d["launches"])
        temps = tuple((t, int(n)) for t, n in d["temps"])
        return cls(d["kind"], d["source"], launches, temps, d.get("device_type", ""), d.get("platform", ""))

    def save(self, cache_dir: Path) -> Path:
        """Write the program into ``cache_dir`` under its content hash (atomically); its path."""
        text = self.to_json()
        path = cache_dir / "gpu" / f"{hashlib.sha256(text.encode()).hexdigest()[:32]}.json"
        if not path.exists():
            private_folder(path.parent)  # made 0700 like the kernel cache it sits in
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(tmp, path)
        return path


def _dims(values: Sequence[Any]) -> Dims:
    x, y, z = (int(v) for v in values)
    return (x, y, z)


class DeviceError(RuntimeError):
    """The device API failed while a program ran (a launch failure, a fault): the program's fault."""


class DeviceMemory:
    """Buffers on the device a GPU program runs on, and copies to, from and between them: what a
    network keeps on the device from one kernel to the next. Each GPU kind's driver implements it;
    a buffer is whatever that driver's launches take. Work runs inside :meth:`session`."""

    def session(self) -> contextlib.AbstractContextManager[object]:
        """A block in which the calls below may run (CUDA: its context made current)."""
        return contextlib.nullcontext()

    def alloc(self, nbytes: int) -> Any:
        """A buffer of ``nbytes`` bytes (at least one) on the device."""
        raise NotImplementedError

    def upload(self, buf: Any, array: np.ndarray) -> None:
        """Copy the contiguous ``array`` into ``buf``."""
        raise NotImplementedError

    def download(self, array: np.ndarray, buf: Any) -> None:
        """Copy ``buf`` into the contiguous ``array`` once the work queued before has run."""
        raise NotImplementedError

    def copy(self, dst: Any, dst_offset: int, src: Any, src_offset: int, nbytes: int) -> None:
        """Queue a copy of ``nbytes`` bytes between two buffers (offsets in bytes)."""
        raise NotImplementedError

    def finish(self) -> None:
        """Wait until the work queued so far has run."""
        raise NotImplementedError


class GpuCallable(CheckedArgs):
    """A built GPU program as a callable over numpy arrays; subclasses move data and launch."""

    def __init__(self, program: GpuProgram, args: Sequence[ArgSpec]) -> None:
        super().__init__(program.launches[0].name if program.launches else "kernel", args)
        self.program = program
        self.last_number = 0  # runs per repeat in the last bench() (0 before the first)

    def _run(self, arrays: Sequence[np.ndarray], number: int) -> float:
        try:
            return self.run(arrays, number)
        except Exception as e:
            raise DeviceError(describe(e)) from e

    def run(self, arrays: Sequence[np.ndarray], number: int) -> float:
        """Copy ``arrays`` in, launch the program ``number`` times, copy the outputs back; device
        seconds of the launches (from device events)."""
        raise NotImplementedError

    def memory(self) -> DeviceMemory:
        """The device this program runs on, for buffers that stay there between launches."""
        raise NotImplementedError

    def launch(self, buffers: Sequence[Any]) -> None:
        """Queue the program's launches on device ``buffers`` (of :meth:`memory`, the arguments in
        order; the program's global temporaries are its own, made on its first launch)."""
        raise NotImplementedError

    def temp_arrays(self) -> list[np.ndarray]:
        """Host arrays of the global temporaries (their initial contents do not matter)."""
        return [np.zeros(n, dtype=numpy_dtype(t)) for t, n in self.program.temps]

    def __call__(self, *arrays: np.ndarray) -> None:
        """Run the program once on ``arrays`` (inputs, then outputs), writing the outputs in place."""
        self._check(arrays)
        self._run(arrays, 1)

    def time(
        self, *arrays: np.ndarray, number: int = 1, repeat: int = 3, min_repeat_ms: float = 0
    ) -> list[float]:
        """Seconds per run for each of ``repeat`` repeats of ``number`` runs (``number`` raised until a
        repeat lasts ``min_repeat_ms``), timed by device events after one warm-up run."""
        return self.bench(*arrays, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms)

    def bench(
        self,
        *arrays: np.ndarray,
        number: int = 1,
        repeat: int = 3,
        min_repeat_ms: float = 0,
        flush_cache: bool = False,
        cooldown_ms: float = 0,
    ) -> list[float]:
        """:meth:`time` with a ``cooldown_ms`` pause before each repeat, as the measurement worker
        calls it (``flush_cache`` is ignored: device caches are not flushed)."""
        self._check(arrays)
        if number < 1 or repeat < 1:
            raise ValueError(f"number and repeat must be at least 1, got {number} and {repeat}")
        seconds = self._run(arrays, number)
        while 1e3 * seconds < min_repeat_ms and number < 1 << 20:
            grow = 1.2 * min_repeat_ms / (1e3 * seconds) if seconds > 0 else 10.0
            number = max(number + 1, int(number * min(grow, 10.0)))
            seconds = self._run(arrays, number)
        times = []
        for _ in range(repeat):
            time.sleep(max(0.0, cooldown_ms) / 1e3)
            times.append(self._run(arrays, number) / number)
        self.last_number = number
        return times


def describe(error: Any) -> str:
    """A one-line description of an exception from a device API."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:400]}"
