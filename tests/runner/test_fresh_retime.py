"""What users compare against: programs re-timed in fresh processes, sides alternating, each beside
the calibration kernel; and the promise that a tuner's reported best is what a fresh process
measures, within the drift the tuner states.

The second is a real-hardware check on a shared machine: it compares the best's time *relative to
the calibration kernel* (the machine's speed of the minute taken out) as the tuner measured it and
as fresh processes do. It allows 5%, or the drift the run stated when that is more, or the
calibration kernel's own spread in the fresh processes when the machine is that noisy now, plus a
margin: it fails only when the reported figure is off by more than what the report said.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.ops.schedules import default_schedule
from autosched.runner import LocalBuilder, MeasureInput
from autosched.runner.calibration import calibration_library
from autosched.runner.fresh import FreshError, Side, Timing, alternate, speedups

pytestmark = pytest.mark.requires("gcc")

HERE = str(Path(__file__).resolve().parent)
TARGET = "c -num-threads=1"
#: what the tuner promises: its best within 5% of a fresh process's, or within the drift it states
PROMISE = 0.05
#: what this check allows beyond it: the fresh processes' own timing noise (medians of a few runs)
MARGIN = 0.05


def numpy_timer(inputs: list[np.ndarray], number: int = 10) -> Callable[[], float]:
    """A side made by a factory in the fresh process: numpy's matmul of the inputs (as another
    runtime's module would be timed)."""
    a, b = inputs

    def run() -> float:
        start = time.perf_counter()
        for _ in range(number):
            np.matmul(a, b)
        return (time.perf_counter() - start) / number

    return run


def broken_timer(inputs: list[np.ndarray]) -> Callable[[], float]:
    raise RuntimeError("this runtime is not installed")


def _kernel_sides(task: asc.Task) -> list[Side]:
    schedule, _ = default_schedule(task.workload, task.target)
    inputs = [MeasureInput(task, tuple(schedule.steps)), MeasureInput(task, ())]
    with LocalBuilder(n_parallel=1) as builder:
        builds = builder.build(inputs)
    names = ("tuned", "naive")
    return [Side(n, b.lib_path or "", b.func_name, b.arg_specs) for n, b in zip(names, builds, strict=True)]


def test_sides_alternate_in_fresh_processes() -> None:
    task = asc.Task("matmul", (64, 64, 64), target=TARGET)
    tuned, naive = _kernel_sides(task)
    numpy_side = Side("numpy", factory="test_fresh_retime:numpy_timer", kwargs={"number": 5}, path=(HERE,))
    rounds = alternate([tuned, naive, numpy_side], task.workload.random_inputs(0),
                       calibration_library(task.target), rounds=2, inner=2)
    assert [list(r) for r in rounds] == [["tuned", "naive", "numpy"], ["naive", "numpy", "tuned"]]
    timings: list[Timing] = [t for r in rounds for t in r.values()]
    assert len({t.pid for t in timings}) == 6 and os.getpid() not in {t.pid for t in timings}
    assert all(len(t.seconds) == 2 and len(t.calibration) == 3 for t in timings)
    assert all(t.median > 0 and t.ratio > 0 for t in timings)
    per_round = speedups(rounds, "tuned", "naive")
    assert [raw for raw, _ in per_round] == [r["naive"].median / r["tuned"].median for r in rounds]
    assert [cal for _, cal in per_round] == [r["naive"].ratio / r["tuned"].ratio for r in rounds]
    assert statistics.median(raw for raw, _ in per_round) > 1.5, per_round  # the naive loop is far slower
    with pytest.raises(ValueError, match="either lib_path"):
        Side("neither")
    broken = Side("broken", factory="test_fresh_retime:broken_timer", path=(HERE,))
    with pytest.raises(FreshError, match="'broken' failed .*this runtime is not installed"):
        alternate([broken], task.workload.random_inputs(0), calibration_library(task.target), rounds=1)


def test_the_reported_best_is_what_a_fresh_process_measures(tmp_path: Path) -> None:
    task = asc.Task("matmul", (128, 128, 128), target=TARGET)
    result = asc.tune(task, trials=24, log=tmp_path / "mm.jsonl", seed=0, progress=False)
    assert result.drift is not None and result.best_calibration_ms is not None
    assert result.best_time_ms is not None
    with LocalBuilder(n_parallel=1) as builder:
        (build,) = builder.build([MeasureInput(task, result.best_steps)])
    best = Side("best", build.lib_path or "", build.func_name, build.arg_specs)
    rounds = alternate([best], task.workload.random_inputs(0), calibration_library(task.target), rounds=3)
    fresh = [r["best"] for r in rounds]
    fresh_ratio = statistics.median(t.ratio for t in fresh)
    tuned_ratio = result.best_time_ms / result.best_calibration_ms
    deviation = abs(fresh_ratio / tuned_ratio - 1)
    stated = result.drift["spread_pct"] / 100
    figures = [f for t in fresh for f in t.calibration]
    noise = (max(figures) - min(figures)) / statistics.median(figures)
    allowed = max(PROMISE, stated, noise) + MARGIN
    assert deviation <= allowed, (
        f"the reported best ({result.best_time_ms:.4g} ms, {tuned_ratio:.3f}x the calibration kernel) is "
        f"{deviation:.1%} off a fresh process's ({fresh_ratio:.3f}x), beyond the drift the run stated "
        f"({stated:.1%}) and the fresh processes' noise ({noise:.1%})"
    )
