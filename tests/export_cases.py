"""Helpers of the export tests: a record of a program, ``make`` in an exported directory, the
check of its benchmark's output."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from autosched.records import Record
from autosched.runner.measure import MeasureInput, MeasureResult
from autosched.schedule.steps import Step
from autosched.task import Task

#: make's variables of a quick benchmark run
FAST = "CPPFLAGS=-DMIN_REPEAT_MS=1"


def record_of(task: Task, steps: Sequence[Step], costs: Sequence[float] = (2e-5, 1e-5, 3e-5)) -> Record:
    """A valid record of ``steps`` on ``task``."""
    result = MeasureResult(tuple(costs), all_cost=0.4, timestamp=1.8e9)
    return Record.from_measure(MeasureInput(task, tuple(steps)), result, compiler="gcc")


def make(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``make -C directory args...``, output captured."""
    return subprocess.run(
        ["make", "-s", "-C", str(directory), *args], capture_output=True, text=True, timeout=120
    )


def assert_checked_and_timed(out: subprocess.CompletedProcess[str], flops: float) -> None:
    """The benchmark passed its check and printed a time and the GFLOP/s of ``flops`` in it (not
    "> 0": a loaded machine can make a small kernel's rate print as 0.000)."""
    assert out.returncode == 0, out.stdout + out.stderr
    assert "check: OK" in out.stdout
    m = re.search(r"time: ([0-9.]+) ms\s+([0-9.]+) GFLOP/s", out.stdout)
    assert m is not None, out.stdout
    ms, gflops = float(m.group(1)), float(m.group(2))
    assert ms > 0, out.stdout
    # ms is printed with 6 decimals, GFLOP/s with 3: the rate of any time that rounds to ``ms``,
    # rounded to 3 decimals, must give the printed rate
    fastest, slowest = (flops / ((ms + d) * 1e-3) / 1e9 for d in (-0.5e-6, 0.5e-6))
    assert slowest - 5.01e-4 <= gflops <= fastest + 5.01e-4, out.stdout
