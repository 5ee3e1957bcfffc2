"""Transfer learning: records of other workloads, from other tuning logs, as a model's first data.

``asc.tune(task, transfer=["resnet.jsonl"])`` fits the cost model on the records of those logs
before the task's first batch, so even the first batches are guided (the model package's features
do not depend on the workload's shape). Each record becomes a
:class:`~autosched.runner.measure.MeasureInput` of its own task; records of workloads that are not
registered here (or whose definition changed since: another DAG hash) are skipped with one warning
per workload. A missing transfer log or one of another format version is an error, raised before
anything is measured.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

from ..diagnostics import warn
from ..records import Record, is_remeasurement
from ..runner.measure import MeasureErrorNo, MeasureInput
from ..target import TargetError
from ..task import Task
from .replay import read_log

__all__ = ["load_transfer"]


def _task_of(record: Record) -> Task | str:
    """The task of ``record``, or why it cannot be rebuilt here."""
    name, args = record.workload
    try:
        task = Task(name, tuple(args), target=record.target)
    except (ValueError, TypeError, KeyError, TargetError) as err:
        return f"unknown workload {name}{tuple(args)}: {str(err).splitlines()[0] if str(err) else err}"
    if task.workload.key != record.workload_key:
        return f"workload {name}{tuple(args)} is defined differently here than when it was tuned"
    return task


def load_transfer(
    paths: Sequence[str | os.PathLike[str]], task: Task
) -> tuple[list[MeasureInput], list[float]]:
    """The records of ``paths`` (plain or gzip logs) as model inputs and costs (``inf``: failed),
    except those of ``task`` itself, re-measurements and machinery failures (``UNKNOWN_ERROR``)."""
    inputs: list[MeasureInput] = []
    costs: list[float] = []
    own = (task.workload.key, str(task.target))
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no transfer log {str(path)!r}")
        tasks: dict[tuple[str, str], Task | str] = {}
        skipped: dict[str, int] = {}
        for r in read_log(path):
            group = (r.workload_key, r.target)
            if group == own or r.error_no == MeasureErrorNo.UNKNOWN_ERROR or is_remeasurement(r):
                continue
            if group not in tasks:
                tasks[group] = _task_of(r)
            found = tasks[group]
            if isinstance(found, str):
                skipped[found] = skipped.get(found, 0) + 1
                continue
            inputs.append(MeasureInput(found, r.steps, r.program))
            costs.append(r.median if r.ok else math.inf)
        for why, count in skipped.items():
            warn(f"transfer log {path}: skipped {count} records: {why}")
    return inputs, costs
