"""A network's figures from its tuning log: per task its weight, best, untuned time, speed-up and
share of the estimated end-to-end latency, and that latency over the run's trials.

The log holds measurements only: which tasks make the network and how often each runs (its weight)
come from the model (``autosched report LOG --model MODEL.onnx``; the command line reads them with
:func:`autosched.graph.extract_tasks`, as ``tune_network`` does). The estimated end-to-end latency
is the sum over the tasks of weight x best time (the task scheduler's objective), with each task's
best as ``autosched best`` names it (:attr:`~autosched.records.report.Summary.best`).

**Untuned** is the task's default schedule, the program a network runs without a tuning record:
the program whose record says ``"space": "default"`` or whose re-measurement is marked
``"baseline"`` (``tune_network`` measures it as each task's first trial); in a log without one, the
task's first program. Its time is its re-measurement where it has a valid one (the measurement the
best is compared with), else its first valid measurement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .best import BASELINE_KEY, is_baseline, is_remeasurement
from .log import Record
from .report import Summary

#: the ``program["space"]`` of a task's default schedule (:mod:`autosched.search.baseline`)
DEFAULT_SPACE = "default"


@dataclass(frozen=True)
class ModelTask:
    """One task of a network as its model gives it: the workload key, its name(args), its weight."""

    workload_key: str
    workload: str
    weight: int


@dataclass(frozen=True)
class Network:
    """The tasks of the model ``name`` on one target (a target string as the log spells it)."""

    name: str
    target: str
    tasks: tuple[ModelTask, ...]


@dataclass(frozen=True)
class TaskRow:
    """One task of a network in the report: its summary (None: no record in the log), its best and
    untuned seconds (None: no valid one), and weighted best, share of latency and speed-up."""

    task: ModelTask
    summary: Summary | None
    best: float | None
    untuned: float | None

    @property
    def weighted(self) -> float | None:
        """Weight x best seconds: the task's part of the end-to-end latency."""
        return None if self.best is None else self.task.weight * self.best

    @property
    def speedup(self) -> float | None:
        """Untuned seconds / best seconds."""
        return None if self.best is None or self.untuned is None else self.untuned / self.best


def _default_key(summary: Summary) -> str:
    """The program key of the task's default schedule (see the module docstring)."""
    for r in summary.records:
        program = r.program or {}
        if program.get("space") == DEFAULT_SPACE or (is_remeasurement(r) and program.get(BASELINE_KEY)):
            return r.program_key
    return next(iter(summary.programs))


def untuned_record(summary: Summary) -> Record | None:
    """The measurement that times the task untuned (see the module docstring); None if its default
    schedule has no valid one."""
    measured = summary.programs[_default_key(summary)]
    again = [r for r in measured if r.ok and is_remeasurement(r)]
    baseline = [r for r in again if is_baseline(r)]
    return next(iter(baseline or again or [r for r in measured if r.ok]), None)


def task_rows(network: Network, summaries: Sequence[Summary]) -> list[TaskRow]:
    """One row per task of ``network``, in the model's order."""
    by_key = {(s.records[0].workload_key, s.target): s for s in summaries}
    rows = []
    for task in network.tasks:
        s = by_key.get((task.workload_key, network.target))
        best = None if s is None or s.best is None else s.best.median
        untuned = None if s is None else untuned_record(s)
        rows.append(TaskRow(task, s, best, None if untuned is None else untuned.median))
    return rows


def latency(rows: Sequence[TaskRow]) -> float | None:
    """The estimated end-to-end latency in seconds; None while a task has no valid program."""
    parts = [r.weighted for r in rows]
    return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)


def latency_curve(records: Sequence[Record], rows: Sequence[TaskRow]) -> tuple[list[int], list[float]]:
    """The estimated end-to-end latency (seconds; NaN while a task has no valid program) after each
    record of the network's tasks in log order, against the trials of all its tasks so far (a
    re-measurement repeats the count). The last value is :func:`latency`."""
    where: dict[int, tuple[int, int]] = {}  # id(record) -> (row, index among its summary's records)
    for i, row in enumerate(rows):
        if row.summary is not None:
            for j, r in enumerate(row.summary.records):
                where[id(r)] = (i, j)
    best: list[float] = [math.nan] * len(rows)
    seen: set[tuple[int, str]] = set()
    trials, curve = [], []
    for r in records:
        at = where.get(id(r))
        if at is None:
            continue
        i, j = at
        summary = rows[i].summary
        assert summary is not None
        chosen = summary.best_so_far[j]
        best[i] = math.nan if chosen is None else chosen.median
        seen.add((i, r.program_key))
        trials.append(len(seen))
        curve.append(sum(row.task.weight * b for row, b in zip(rows, best, strict=True)))
    return trials, curve
