"""Re-time programs the way a user would meet them: each in a fresh process, sides alternating.

A tuner's figure is measured in its own long-lived worker, minutes before anyone looks at it; a
comparison of two runtimes in one process lets their thread pools disturb each other. So
:func:`alternate` starts one fresh interpreter per side and round (A B, then B A, ...), each
loading its program and the calibration kernel (:mod:`autosched.runner.calibration`), timing the
program ``inner`` times between timings of the calibration kernel, and printing its figures. A
:class:`Timing` gives the program's median seconds and its ratio to the calibration kernel, which
cancels the machine's speed at that minute: two timings minutes apart compare by their ratios.

A side is an autosched kernel library (``lib_path``, ``func_name``, ``specs``) or any program a
Python factory makes a timer for in the fresh process (``factory="module:function"``, called with
the input arrays and ``kwargs``, returning a callable that gives seconds per call): another
runtime's module (``benchmarks/bench_metaschedule.py`` times TVM's this way).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .aligned import aligned_array
from .calibration import Calibrator
from .kernel import ArgSpec
from .load import load_kernel
from .measure import MeasureOption
from .measure_worker import fresh_output

__all__ = ["FreshError", "Side", "Timing", "alternate", "speedups", "time_fresh"]

#: seconds of pause before each timing in a fresh process
SETTLE_S = 0.2

#: the interpreter's command: import autosched from where the parent did, then time one side
_BOOT = ("import sys; sys.path[0] = sys.argv[1]; "
         "from autosched.runner.fresh import _child; _child(sys.argv[2])")
_ROOT = str(Path(__file__).resolve().parents[2])


class FreshError(RuntimeError):
    """A fresh process could not time its side (the message has the last line it wrote)."""


@dataclasses.dataclass(frozen=True)
class Side:
    """One program to time in fresh processes (see the module docstring)."""

    name: str
    lib_path: str = ""
    func_name: str = ""
    specs: tuple[ArgSpec, ...] = ()
    factory: str = ""  # "module:function" (with ``path`` on sys.path) making a timer of the inputs
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    path: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if bool(self.lib_path) == bool(self.factory):
            raise ValueError(f"side {self.name!r}: give either lib_path (a kernel) or factory (a timer)")


@dataclasses.dataclass(frozen=True)
class Timing:
    """One side timed in one fresh process: the program's seconds per call in each inner round and
    the calibration kernel's seconds per call before the first and after each round."""

    side: str
    pid: int
    seconds: tuple[float, ...]
    calibration: tuple[float, ...]

    @property
    def median(self) -> float:
        """The program's median seconds per call."""
        return statistics.median(self.seconds)

    @property
    def ratio(self) -> float:
        """The program's median time over the calibration kernel's median time: the program's
        speed with the machine's speed of the moment taken out."""
        return self.median / statistics.median(self.calibration)

    @property
    def calibration_spread(self) -> float:
        """The calibration kernel's slowest less fastest figure over its median in this process."""
        cal = self.calibration
        return (max(cal) - min(cal)) / statistics.median(cal)


def time_fresh(
    side: Side, inputs: str | os.PathLike[str], calibration_lib: str, *, inner: int = 3,
    option: MeasureOption | None = None, settle: float = SETTLE_S, timeout: float = 300.0,
) -> Timing:
    """Time ``side`` in a fresh process on the arrays saved in ``inputs`` (an ``.npz`` of
    ``arr_0``, ``arr_1``, ...: the program's inputs in order): ``inner`` rounds, each the program
    (``option``'s ``number`` and ``min_repeat_ms``, one repeat) and then the calibration kernel
    (library ``calibration_lib``), after one calibration and one untimed run of each, with a pause
    of ``settle`` seconds before each timing (a runtime's thread pool spins on for a while after
    its last call and would slow the next one)."""
    option = option or MeasureOption()
    if any(not isinstance(d, int) for s in side.specs for d in s.shape):
        raise ValueError(f"side {side.name!r}: a kernel over symbolic shapes cannot be re-timed here")
    spec = {
        "side": side.name, "lib_path": side.lib_path, "func_name": side.func_name,
        "specs": [[s.name, list(s.shape), s.dtype, s.is_output] for s in side.specs],
        "factory": side.factory, "kwargs": dict(side.kwargs), "path": list(side.path),
        "inputs": str(inputs), "calibration": calibration_lib, "inner": inner,
        "number": option.number, "min_repeat_ms": option.min_repeat_ms, "settle": settle,
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="autosched-fresh-", delete=False) as f:
        json.dump(spec, f)
    try:
        done = subprocess.run([sys.executable, "-c", _BOOT, _ROOT, f.name], capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    finally:
        os.unlink(f.name)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise FreshError(f"the fresh process timing {side.name!r} failed (exit {done.returncode}): {said}")
    out = json.loads(lines[-1])
    return Timing(side.name, int(out["pid"]), tuple(out["seconds"]), tuple(out["calibration"]))


def alternate(
    sides: Sequence[Side], inputs: Sequence[np.ndarray], calibration_lib: str, *, rounds: int = 3,
    inner: int = 3, option: MeasureOption | None = None, settle: float = SETTLE_S, timeout: float = 300.0,
) -> list[dict[str, Timing]]:
    """Time every side in ``rounds`` rounds, each side in a fresh process of its own
    (:func:`time_fresh`), the order rotating from round to round (A B C, B C A, ...) so that no
    side always goes first: per round, each side's :class:`Timing`. ``inputs`` are the programs'
    input arrays."""
    names = [s.name for s in sides]
    if len(set(names)) != len(names):
        raise ValueError(f"side names must differ, got {names}")
    with tempfile.TemporaryDirectory(prefix="autosched-fresh-") as tmp:
        path = Path(tmp) / "inputs.npz"
        np.savez(path, *inputs)
        out = []
        for r in range(rounds):
            order = [sides[(r + i) % len(sides)] for i in range(len(sides))]
            out.append({s.name: time_fresh(s, path, calibration_lib, inner=inner, option=option,
                                           settle=settle, timeout=timeout) for s in order})
    return out


def speedups(rounds: Sequence[Mapping[str, Timing]], side: str, against: str) -> list[tuple[float, float]]:
    """Per round of :func:`alternate`: how many times faster ``side`` ran than ``against``, as timed
    (``against``'s median over ``side``'s) and with each process's machine speed taken out (their
    ratios to the calibration kernel, likewise)."""
    return [(r[against].median / r[side].median, r[against].ratio / r[side].ratio) for r in rounds]


def _timer(spec: dict[str, Any], inputs: list[np.ndarray]) -> Callable[[], float]:
    """The child's timer of its side: seconds per call, one repeat."""
    if spec["factory"]:
        sys.path[:0] = spec["path"]
        module, _, name = spec["factory"].partition(":")
        made: Callable[[], float] = getattr(importlib.import_module(module), name)(inputs, **spec["kwargs"])
        return made
    specs = [ArgSpec(n, tuple(shape), dtype, bool(out)) for n, shape, dtype, out in spec["specs"]]
    kernel = load_kernel(spec["lib_path"], spec["func_name"], specs)
    work = iter([aligned_array(a) for a in inputs])
    arrays = [fresh_output(s) if s.is_output else next(work) for s in specs]
    number, min_ms = int(spec["number"]), float(spec["min_repeat_ms"])
    return lambda: kernel.bench(*arrays, number=number, repeat=1, min_repeat_ms=min_ms)[0]


def _child(spec_path: str) -> None:
    """The fresh process: time the side of the spec file, print one JSON line of figures."""
    spec = json.loads(Path(spec_path).read_text())
    with np.load(spec["inputs"]) as saved:
        inputs = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    timer = _timer(spec, inputs)
    calibrator = Calibrator(spec["calibration"])
    pause = float(spec["settle"])

    def settled(run: Callable[[], float]) -> float:
        time.sleep(pause)
        return float(run())

    settled(calibrator)  # the first window sets its length
    settled(timer)  # an untimed run: the program's code and data are cold in a fresh process
    seconds, figures = [], [settled(calibrator)]
    for _ in range(int(spec["inner"])):
        seconds.append(settled(timer))
        figures.append(settled(calibrator))
    print(json.dumps({"pid": os.getpid(), "seconds": seconds, "calibration": figures}), flush=True)
