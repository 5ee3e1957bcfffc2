"""Counters of a tuning run and the progress bar drawn from them."""

from __future__ import annotations

import collections
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from ..runner.measure import MeasureErrorNo, MeasureResult

if TYPE_CHECKING:
    from .space import Candidate
    from .tuner import Tuner


class TuneStats:
    """Valid and failed measurements (earlier runs included) and where this run's time went."""

    def __init__(self, flops: int) -> None:
        self.flops = flops
        self.valid = 0
        self.errors: collections.Counter[str] = collections.Counter()
        self.build_time = 0.0
        self.run_time = 0.0

    def add(self, error_no: MeasureErrorNo) -> None:
        """Count one measurement."""
        if error_no == MeasureErrorNo.NO_ERROR:
            self.valid += 1
        else:
            self.errors[error_no.name] += 1


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class ProgressBar:
    """A tuner callback: trials done/total, best GFLOP/s so far, errors, elapsed time and ETA.

    On a terminal the line is redrawn in place; otherwise one line per batch is printed.
    """

    WIDTH = 24

    def __init__(self, total: int, stats: TuneStats, stream: TextIO | None = None) -> None:
        self.total = total
        self.stats = stats
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.start = time.monotonic()
        self.first_trial: int | None = None
        self.last = ""

    def __call__(
        self, tuner: Tuner, candidates: Sequence[Candidate], results: Sequence[MeasureResult]
    ) -> None:
        done = tuner.trials
        if self.first_trial is None:
            self.first_trial = done - len(results)
        elapsed = time.monotonic() - self.start
        rate = (done - self.first_trial) / elapsed if elapsed > 0 else 0.0
        eta = _clock((self.total - done) / rate) if rate > 0 else "?"
        filled = self.WIDTH * min(done, self.total) // max(1, self.total)
        best = (
            f"{self.stats.flops / tuner.best_cost / 1e9:8.2f} GFLOP/s"
            if tuner.best_candidate is not None and self.stats.flops
            else "       - GFLOP/s"
        )
        errors = sum(self.stats.errors.values())
        self.last = (
            f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {done:>{len(str(self.total))}}/{self.total}"
            f"  best {best}  errors {errors}  elapsed {_clock(elapsed)}  ETA {eta}"
        )
        self.stream.write(("\r" + self.last) if self.tty else self.last + "\n")
        self.stream.flush()

    def finish(self, reason: str) -> None:
        """End the bar with why tuning stopped."""
        if self.tty and self.last:
            self.stream.write("\n")
        if reason:
            self.stream.write(f"stopped: {reason}\n")
        self.stream.flush()
