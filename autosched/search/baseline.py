"""The untuned default schedule as a task's first trial (``tune(..., measure_default=True)``).

Where a built-in operator has a hand-written schedule (:func:`autosched.ops.schedules.default_schedule`),
it is what the task runs before any tuning, e.g. in :func:`autosched.build_network`. Measured as
the first trial of a run and logged like any other, it makes the log's best program never slower
than the default, even when a small trial budget finds nothing better in the search space. Its
record's ``program`` is ``{"space": "default", "schedule": NAME}``: the search spaces do not decode
it, so the tuners count it but never mutate it (a sketch model learns from it, a template model
cannot: it has no knob values). A template space whose template has the hand-written schedule as a
point (:mod:`autosched.space.templates.handwritten`) measures that point instead.
"""

from __future__ import annotations

from collections.abc import Callable

from .. import records
from ..ops.schedules import default_schedule
from ..runner.measure import MeasureInput, MeasureResult
from ..task import Task
from .tuning_space import Candidate, TuningSpace

#: measures candidates and logs them; None for a candidate another run is measuring
Measure = Callable[[list[Candidate]], list[MeasureResult | None]]


#: the ``program["space"]`` of the default schedule's records
DEFAULT_SPACE = "default"


def default_candidate(task: Task) -> Candidate:
    """The task's untuned default schedule as a candidate program."""
    schedule, name = default_schedule(task.workload, task.target)
    return Candidate(tuple(schedule.steps), {"space": DEFAULT_SPACE, "schedule": name})


def is_default(candidate: Candidate) -> bool:
    """Whether ``candidate`` is a task's default schedule (no point of any search space)."""
    return (candidate.program or {}).get("space") == DEFAULT_SPACE


def space_default(space: TuningSpace | None) -> Candidate | None:
    """The point of ``space`` that is the task's hand-written schedule (a template space's
    hand-written config), if it has one."""
    start = getattr(space, "default_candidate", None)
    return start() if start is not None else None


def measure_default(
    task: Task, measure: Measure, compiler: str, machine: str, space: TuningSpace | None = None
) -> list[records.Record]:
    """Measure (and log, through ``measure``) the default schedule of ``task``: its record, or none
    when another run sharing the log measures it. Where the tuning ``space`` has the hand-written
    schedule as one of its points (a template space), that point is measured instead: the same
    program, which the search then mutates and its model learns from like any other."""
    cand = space_default(space) or default_candidate(task)
    (result,) = measure([cand])
    if result is None:
        return []
    return [records.Record.from_measure(MeasureInput(task, cand.steps, cand.program), result, compiler,
                                        cand.program, machine)]
