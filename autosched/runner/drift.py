"""How fast the machine was: the calibration kernel's figures over a run, slow minutes, drift.

Every measurement of :class:`~autosched.runner.LocalRunner` is bracketed by two timings of the
calibration kernel (:mod:`autosched.runner.calibration`); their mean is the measurement's
calibration figure (seconds per call of that kernel, kept in its record). :class:`SpeedWatch`
keeps a run's figures: the run's median is the machine's normal speed, and a measurement whose
figure is more than :data:`SLOW` above it was made in a slow minute.

What is done with a slow measurement: it is **measured again** (once), not corrected by the factor.
A correction would assume that a slow minute slows every program by the calibration kernel's
factor; it does so for a program bound by the cores as the calibration kernel is, not for one
bound by memory bandwidth or by its threads' synchronization, whose slowdown under another
tenant's load differs. And a correction would put scaled numbers in the log beside raw ones, so
every reader of a log (the best program, the report, a resumed run, the model) would have to
apply it again. A re-measurement keeps every cost a raw measurement. A spike (a build, another
process's burst) is over by the second measurement, which is kept if its calibration is faster.
A slow stretch (minutes) is not: when the second measurement is slow too, the following ones are
not measured again until the machine's speed is back to normal (measuring everything twice would
double a long slow stretch and still measure it slow). What the stretch cost is in the run's drift
(:class:`Drift`), which the tuning summary and ``autosched report`` state, and the final choice
among the best programs is made by interleaved rounds, where a slow stretch slows all of them alike.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterable
from typing import Any

__all__ = ["SLOW", "Drift", "SpeedWatch", "drift_of", "drift_text"]

#: a measurement whose calibration is more than this share slower than the run's median was made
#: in a slow minute
SLOW = 0.10
#: the calibration figures a run needs before it judges one slow (its median is not known before)
MIN_SAMPLES = 5


@dataclasses.dataclass(frozen=True)
class Drift:
    """The spread of the calibration kernel's time over a run (or a log): the machine's drift.

    ``median_s`` is the median seconds per call; ``low_pct`` and ``high_pct`` the fastest and the
    slowest figure as a percentage of the median (96.0, 118.0); ``samples`` how many figures.
    """

    samples: int
    median_s: float
    low_pct: float
    high_pct: float

    @property
    def spread_pct(self) -> float:
        """The slowest figure less the fastest, as a percentage of the median."""
        return self.high_pct - self.low_pct

    def to_json(self) -> dict[str, Any]:
        """The figures as a JSON object (with ``spread_pct``)."""
        return {**dataclasses.asdict(self), "spread_pct": self.spread_pct}

    def text(self) -> str:
        """One line: ``calibration kernel 0.196 ms median, -3.1% / +12.4% (15.5% spread, 40 samples)``."""
        return (f"calibration kernel {self.median_s * 1e3:.3g} ms median, {self.low_pct - 100:+.1f}% / "
                f"{self.high_pct - 100:+.1f}% ({self.spread_pct:.1f}% spread, {self.samples} samples)")


#: a drift above this share (percent) is worth a warning: a later timing of the best may differ
#: from the reported one by as much
NOTABLE_PCT = 5.0


def drift_text(drift: Drift | dict[str, Any] | None) -> str:
    """The drift line of a tuning summary (from a :class:`Drift` or its JSON object)."""
    if drift is None:
        return "not measured (no calibration kernel beside these measurements)"
    if isinstance(drift, dict):
        drift = Drift(int(drift["samples"]), drift["median_s"], drift["low_pct"], drift["high_pct"])
    note = ""
    if drift.spread_pct > NOTABLE_PCT:
        note = f"; the machine's speed varied by more than {NOTABLE_PCT:g}%: later timings may differ as much"
    return drift.text() + note


def drift_of(figures: Iterable[float]) -> Drift | None:
    """The :class:`Drift` of calibration ``figures`` (seconds; those not finite and > 0 are left
    out); None without any."""
    kept = [f for f in figures if math.isfinite(f) and f > 0]
    if not kept:
        return None
    median = statistics.median(kept)
    return Drift(len(kept), median, 100 * min(kept) / median, 100 * max(kept) / median)


class SpeedWatch:
    """A run's calibration figures and the decisions made on them (see the module docstring)."""

    def __init__(self) -> None:
        self.figures: list[float] = []  # one per measurement (the mean of its two brackets)
        self.remeasured = 0  # measurements made again because their minute was slow
        self.stretch = False  # the last re-measurement was slow too: a slow stretch is under way

    def is_slow(self, figure: float) -> bool:
        """Whether a measurement with calibration ``figure`` was made in a slow minute (always
        False before :data:`MIN_SAMPLES` figures)."""
        if len(self.figures) < MIN_SAMPLES:
            return False
        return figure > (1 + SLOW) * statistics.median(self.figures)

    def should_remeasure(self, figure: float) -> bool:
        """Whether to measure again a measurement with calibration ``figure``: it is slow and no
        slow stretch is under way (a figure back to normal ends one)."""
        slow = self.is_slow(figure)
        if not slow:
            self.stretch = False
        return slow and not self.stretch

    def remeasured_as(self, figure: float) -> None:
        """Note a re-measurement whose calibration was ``figure`` (a slow one starts a stretch)."""
        self.remeasured += 1
        self.stretch = self.is_slow(figure)

    def add(self, figure: float) -> None:
        """Keep the calibration ``figure`` of a measurement that is kept."""
        if math.isfinite(figure) and figure > 0:
            self.figures.append(figure)

    @property
    def drift(self) -> Drift | None:
        """The run's drift so far."""
        return drift_of(self.figures)
