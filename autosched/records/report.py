"""Summaries of a tuning log: the best program and error counts per (workload, target), as a text
table, and the tuning curves (best GFLOP/s so far against trials and against wall time) as a PNG.

    records = load_records("matmul.jsonl")
    print(report_table(records))
    write_report(records, "matmul.png")      # needs matplotlib
"""

from __future__ import annotations

import functools
import itertools
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..diagnostics import format_ms, printable
from ..ops import Workload
from .best import pick_best
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
    """The trials of one workload on one target, in log order."""

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

    @property
    def valid_trials(self) -> int:
        """How many trials have a valid time."""
        return sum(r.ok for r in self.records)

    @property
    def errors(self) -> dict[str, int]:
        """Failed trials by error kind."""
        return dict(Counter(r.error_no.name for r in self.records if not r.ok))

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
            "trials": len(self.records),
            "valid_trials": self.valid_trials,
            "errors": self.errors,
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
                str(len(s.records)),
                str(s.valid_trials),
                errors,
                printable(s.target, 120),
            ]
        )
    return _format_table(rows, right={1, 2, 3, 4})


def model_quality_table(path: str | Path) -> str | None:
    """The cost model's quality per measured batch from a ``LOG.model.jsonl`` sidecar (written by
    model-guided tuning): batch, trials, pairwise accuracy and recall@k on the batch before the
    model saw it, seconds of the refit after it ("-": none). None if the file is missing or holds
    no entry."""
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return None
    rows = [["batch", "trials", "pairwise acc", "recall@k", "k", "fit s", "model", "workload"]]
    for line in lines:
        try:
            e = json.loads(line)
            rows.append(
                [str(e["batch"]), str(e["trials"]), _fraction(e.get("pairwise_accuracy")),
                 _fraction(e.get("recall_at_k")), str(e.get("k", "-")), _seconds(float(e["fit_seconds"])),
                 str(e.get("model", "-")), str(e.get("workload_key", "-")).split("#", 1)[0]]
            )
        except (ValueError, KeyError, TypeError):
            continue  # a torn or foreign line
    return _format_table(rows, right={0, 1, 2, 3, 4, 5}) if len(rows) > 1 else None


def _seconds(value: float) -> str:
    return f"{value:.2f}" if value > 0 else "-"


def _fraction(value: Any) -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value:.3f}"


def tuning_curve(summary: Summary) -> tuple[list[int], list[float], list[float]]:
    """Trial numbers, cumulative measurement wall seconds, and the best GFLOP/s so far (NaN before
    the first valid trial), one entry per trial. The summary's workload must have a FLOP count."""
    flops = summary.flops
    if flops is None:
        raise ValueError(f"workload {summary.workload} is not registered: its FLOP count is unknown")
    best, curve = float("inf"), []
    for r in summary.records:
        best = min(best, r.median)
        curve.append(flops / best / 1e9 if best < float("inf") else float("nan"))
    wall = list(itertools.accumulate(r.all_cost for r in summary.records))
    return list(range(1, len(curve) + 1)), wall, curve


def write_report(records: Iterable[Record], png_path: str | Path) -> Path:
    """Plot the tuning curves of every registered workload in ``records`` into one PNG: best
    GFLOP/s so far against the trial number and against wall time. Needs matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(
            "the tuning report needs matplotlib: pip install matplotlib (or autosched[plot])"
        ) from None
    summaries = summarize(records)
    plotted = [s for s in summaries if s.flops is not None]
    several_targets = len({s.target for s in plotted}) > 1
    fig, (by_trial, by_time) = plt.subplots(1, 2, figsize=(12, 4.5))
    try:
        for s in plotted:
            trials, wall, curve = tuning_curve(s)
            label = f"{s.workload} on {s.target}" if several_targets else s.workload
            label = printable(label, 120).replace("$", r"\$")  # no mathtext from a log
            by_trial.plot(trials, curve, drawstyle="steps-post", label=label)
            by_time.plot(wall, curve, drawstyle="steps-post", label=label)
        by_trial.set(xlabel="trial", ylabel="best GFLOP/s so far", title="tuning curve by trials")
        by_time.set(xlabel="measurement wall time (s)", ylabel="best GFLOP/s so far", title="by wall time")
        for ax in (by_trial, by_time):
            ax.grid(True, alpha=0.3)
        if plotted:
            by_trial.legend(fontsize="small")
        else:
            by_trial.text(
                0.5, 0.5, "no registered workload to plot", ha="center", transform=by_trial.transAxes
            )
        fig.tight_layout()
        out = Path(png_path)
        fig.savefig(out, format="png", dpi=100)
    finally:
        plt.close(fig)
    return out
