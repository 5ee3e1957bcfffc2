"""Summaries of a tuning log: the best program and error counts per (workload, target), as a text
table, and the tuning curves (best GFLOP/s so far against trials and against wall time) as a PNG.

    records = load_records("matmul.jsonl")
    print(report_table(records))
    print(drift_table(records))              # how fast the machine was (None: not calibrated)
    write_report(records, "matmul.png")      # needs matplotlib

A **trial** is a distinct program of a task (by its steps): measuring a program again (a final
re-measurement, a re-timed or resumed run) is one more measurement of the same trial. The best is
what ``autosched best`` names (:func:`~autosched.records.pick_best`), and a tuning curve's last
point is that best (:func:`~autosched.records.best.best_so_far`). An HTML page of the same figures:
:mod:`autosched.records.report_html`.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..diagnostics import format_ms, printable
from ..ops import Workload
from ..runner.drift import Drift, drift_of
from .best import best_so_far, pick_best
from .charts import palette
from .log import Record


@functools.cache
def workload_flops(name: str, args: tuple[Any, ...]) -> int | None:
    """FLOPs of one run of the workload ``name(args)``; None if it is not registered here."""
    try:
        return Workload(name, args).flops()
    except (ValueError, TypeError):
        return None


@dataclass(frozen=True)
class Summary:
    """The measurements (log lines) of one workload on one target, in log order; its trials are
    its distinct programs (:attr:`programs`)."""

    workload: str  # name(args), as the log's workload key spells it
    target: str
    records: tuple[Record, ...]

    @property
    def flops(self) -> int | None:
        """FLOPs of one run; None when the workload is not registered here."""
        name, args = self.records[0].workload
        return workload_flops(name, tuple(args))

    @functools.cached_property
    def best(self) -> Record | None:
        """The valid record with the lowest median time (the first of equals) whose program replays
        (see :func:`~autosched.records.pick_best`); None if there is none."""
        return pick_best(self.records)

    @functools.cached_property
    def best_so_far(self) -> list[Record | None]:
        """The best record after each record (:func:`~autosched.records.best.best_so_far`): the last
        is :attr:`best`."""
        return best_so_far(self.records)

    @functools.cached_property
    def programs(self) -> dict[str, tuple[Record, ...]]:
        """The measurements of each distinct program (by program key), in order of first measurement:
        one entry per trial."""
        programs: dict[str, list[Record]] = {}
        for r in self.records:
            programs.setdefault(r.program_key, []).append(r)
        return {key: tuple(rs) for key, rs in programs.items()}

    @property
    def trials(self) -> int:
        """How many trials: distinct programs measured (re-measurements are no trials)."""
        return len(self.programs)

    @property
    def valid_trials(self) -> int:
        """How many trials have a valid time (a program with at least one valid measurement)."""
        return sum(any(r.ok for r in rs) for rs in self.programs.values())

    @property
    def errors(self) -> dict[str, int]:
        """Failed trials (programs without a valid measurement) by the error of their last measurement."""
        failed = (rs for rs in self.programs.values() if not any(r.ok for r in rs))
        return dict(Counter(rs[-1].error_no.name for rs in failed))

    @functools.cached_property
    def drift(self) -> Drift | None:
        """How much the machine drifted while these were measured: the spread of the calibration
        kernel's figures of the records that carry one (:mod:`autosched.runner.drift`); None if
        none does (older logs, boards, GPUs)."""
        return drift_of(r.calibration for r in self.records if r.calibration > 0)

    def gflops(self, seconds: float) -> float | None:
        """GFLOP/s of a run taking ``seconds``; None when the FLOP count is unknown."""
        flops = self.flops
        return None if flops is None else flops / seconds / 1e9

    def to_json(self) -> dict[str, Any]:
        """The summary as a JSON object (``best_*`` fields are null without a valid trial)."""
        best = self.best
        return {
            "workload": self.workload,
            "target": self.target,
            "best_time_ms": None if best is None else best.median * 1e3,
            "best_gflops": None if best is None else self.gflops(best.median),
            "steps": None if best is None else len(best.steps),
            "program_key": None if best is None else best.program_key,
            "trials": self.trials,
            "valid_trials": self.valid_trials,
            "measurements": len(self.records),
            "errors": self.errors,
            "drift": None if self.drift is None else self.drift.to_json(),
        }


def summarize(records: Iterable[Record]) -> list[Summary]:
    """One :class:`Summary` per (workload, target), in order of first appearance in the log."""
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in records:
        groups.setdefault((r.workload_key, r.target), []).append(r)
    return [Summary(key.split("#", 1)[0], target, tuple(rs)) for (key, target), rs in groups.items()]


def _format_table(rows: Sequence[Sequence[str]], right: set[int]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def report_table(records: Iterable[Record]) -> str:
    """A text table, one row per (workload, target): best time, GFLOP/s, trials, valid trials, errors.
    Text from the log is made printable (:func:`~autosched.diagnostics.printable`)."""
    rows = [["workload", "best ms", "GFLOP/s", "trials", "valid", "errors", "target"]]
    for s in summarize(records):
        best = s.best
        gflops = None if best is None else s.gflops(best.median)
        errors = ", ".join(f"{kind}={n}" for kind, n in sorted(s.errors.items())) or "-"
        rows.append(
            [
                printable(s.workload, 80),
                "-" if best is None else format_ms(best.median * 1e3),
                "n/a" if gflops is None else f"{gflops:.2f}",
                str(s.trials),
                str(s.valid_trials),
                errors,
                printable(s.target, 120),
            ]
        )
    return _format_table(rows, right={1, 2, 3, 4})


def drift_table(records: Iterable[Record]) -> str | None:
    """How much the machine drifted while each (workload, target) was measured, one row each: the
    calibration kernel's median time and its fastest and slowest figure as a share of the median
    (:attr:`Summary.drift`). None when no record carries a calibration figure."""
    rows = [["workload", "calibrated", "median ms", "fastest", "slowest", "spread"]]
    for s in summarize(records):
        d = s.drift
        if d is not None:
            rows.append([printable(s.workload, 80), str(d.samples), f"{d.median_s * 1e3:.4g}",
                         f"{d.low_pct - 100:+.1f}%", f"{d.high_pct - 100:+.1f}%", f"{d.spread_pct:.1f}%"])
    return _format_table(rows, right={1, 2, 3, 4, 5}) if len(rows) > 1 else None


@dataclass(frozen=True)
class QualityEntry:
    """One refit of the cost model during tuning (a line of a ``LOG.model.jsonl`` sidecar): how well
    the model ranked the batch before it saw it (None: not scored), and the refit's seconds."""

    batch: int
    trials: int
    pairwise_accuracy: float | None
    recall_at_k: float | None
    k: int | None
    fit_seconds: float
    model: str
    workload: str  # name(args), as the log's workload key spells it
    workload_key: str


def _fraction_or_none(value: Any) -> float | None:
    """A figure in [0, 1] from the sidecar (untrusted); None for anything else."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value <= 1.0
    return float(value) if ok else None


def model_quality(path: str | Path) -> list[QualityEntry]:
    """The entries of the model-quality sidecar ``path`` (written by model-guided tuning, see
    :func:`autosched.search.learning.sidecar_path`), in file order; torn or foreign lines are
    skipped. Empty if the file is missing."""
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return []
    entries = []
    for line in lines:
        try:
            e = json.loads(line)
            fit = float(e["fit_seconds"])
            k = e.get("k")
            key = str(e.get("workload_key", "-"))
            entries.append(QualityEntry(
                int(e["batch"]), int(e["trials"]), _fraction_or_none(e.get("pairwise_accuracy")),
                _fraction_or_none(e.get("recall_at_k")), k if type(k) is int else None,
                fit if math.isfinite(fit) else 0.0, str(e.get("model", "-")), key.split("#", 1)[0], key,
            ))
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
            continue  # a torn or foreign line
    return entries


def model_quality_table(path: str | Path) -> str | None:
    """The cost model's quality per measured batch from a ``LOG.model.jsonl`` sidecar (written by
    model-guided tuning): batch, trials, pairwise accuracy and recall@k on the batch before the
    model saw it, seconds of the refit after it ("-": none). None if the file is missing or holds
    no entry."""
    rows = [["batch", "trials", "pairwise acc", "recall@k", "k", "fit s", "model", "workload"]]
    for e in model_quality(path):
        rows.append(
            [str(e.batch), str(e.trials), _fraction(e.pairwise_accuracy), _fraction(e.recall_at_k),
             "-" if e.k is None else str(e.k), _seconds(e.fit_seconds), printable(e.model, 40),
             printable(e.workload, 80)]
        )
    return _format_table(rows, right={0, 1, 2, 3, 4, 5}) if len(rows) > 1 else None


def _seconds(value: float) -> str:
    return f"{value:.2f}" if value > 0 else "-"


def _fraction(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def tuning_curve(summary: Summary) -> tuple[list[int], list[float], list[float]]:
    """One entry per measurement, in log order: the trials so far (distinct programs measured up to
    it: a re-measurement repeats the count), the cumulative measurement wall seconds, and the best
    GFLOP/s so far as ``autosched best`` would name it then (NaN before the first valid program;
    :attr:`Summary.best_so_far`). The last entry is the best of :attr:`Summary.best`. The summary's
    workload must have a FLOP count."""
    flops = summary.flops
    if flops is None:
        raise ValueError(f"workload {summary.workload} is not registered: its FLOP count is unknown")
    seen: set[str] = set()
    trials = []
    for r in summary.records:
        seen.add(r.program_key)
        trials.append(len(seen))
    curve = [math.nan if b is None else flops / b.median / 1e9 for b in summary.best_so_far]
    wall = list(itertools.accumulate(r.all_cost for r in summary.records))
    return trials, wall, curve


@dataclass(frozen=True)
class Series:
    """The curves of one (workload, target) as :func:`write_report` plots them: its label and
    colour, and :func:`tuning_curve`'s trials, wall seconds and best GFLOP/s so far."""

    label: str
    colour: str
    trials: list[int]
    wall: list[float]
    gflops: list[float]


def plotted_series(records: Iterable[Record]) -> list[Series]:
    """The series :func:`write_report` plots: one per registered workload and target, in order of
    first appearance, each its own colour (:func:`~autosched.records.charts.palette`)."""
    plotted = [s for s in summarize(records) if s.flops is not None]
    several_targets = len({s.target for s in plotted}) > 1
    series = []
    for i, (s, colour) in enumerate(zip(plotted, palette(len(plotted)), strict=True)):
        label = f"{s.workload} on {s.target}" if several_targets else s.workload
        series.append(Series(f"#{i} {printable(label, 100)}", colour, *tuning_curve(s)))
    return series


def write_report(records: Iterable[Record], png_path: str | Path) -> Path:
    """Plot the tuning curves of every registered workload in ``records`` into one PNG: best
    GFLOP/s so far against the trial number and against wall time (:func:`plotted_series`), the
    legend beside the plots. Needs matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        raise ImportError(
            "the tuning report needs matplotlib: pip install matplotlib (or autosched[plot])"
        ) from None
    series = plotted_series(records)
    fig, (by_trial, by_time) = plt.subplots(1, 2, figsize=(12, 4.5))
    try:
        for line in series:
            label = line.label.replace("$", r"\$")  # no mathtext from a log
            by_trial.plot(line.trials, line.gflops, drawstyle="steps-post", label=label, color=line.colour)
            by_time.plot(line.wall, line.gflops, drawstyle="steps-post", color=line.colour)
        by_trial.set(xlabel="trial (distinct programs)", ylabel="best GFLOP/s so far",
                     title="tuning curve by trials")
        by_time.set(xlabel="measurement wall time (s)", ylabel="best GFLOP/s so far", title="by wall time")
        by_trial.xaxis.set_major_locator(MaxNLocator(integer=True))
        for ax in (by_trial, by_time):
            ax.grid(True, alpha=0.3)
        if series:  # outside the plots, one column per 20 entries
            fig.legend(loc="upper left", bbox_to_anchor=(1.0, 0.95), fontsize="small", frameon=False,
                       ncols=(len(series) + 19) // 20)
        else:
            by_trial.text(
                0.5, 0.5, "no registered workload to plot", ha="center", transform=by_trial.transAxes
            )
        fig.tight_layout()
        out = Path(png_path)
        fig.savefig(out, format="png", dpi=100, bbox_inches="tight")
    finally:
        plt.close(fig)
    return out
