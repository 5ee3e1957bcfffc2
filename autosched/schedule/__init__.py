"""Schedules: a DAG plus a tuple of replayable steps, with TVM ``te``-style primitives.

The modules import one way, each only from those listed before it (and :mod:`autosched.expr`):

    steps        frozen Step records (split, reorder, fuse, annotate, bind, compute_at, ...), JSON
    stage        Stage (``s[T]``: loops, relations, annotations, attachment) and its te-style
                 methods, ScheduleError, thread_axis, the ScheduleLike protocol a stage sees
    transform    DAG rewrites the primitives need (cache stages, rfactor)
    storage      handlers of set_store_predicate and storage_align
    intrin       the handler of tensorize (the region is checked when lowering)
    primitives   one handler per step kind: check the step against a stage, apply it
    schedule     Schedule (dispatches each step to its handler, records it, replays), create_schedule

Everything is importable from here: ``from autosched.schedule import Schedule, create_schedule``.
"""

from __future__ import annotations

from .primitives import HANDLERS, effective_readers
from .schedule import Schedule, create_schedule
from .stage import (
    ANNOTATIONS,
    PRAGMAS,
    SCOPES,
    THREAD_TAGS,
    FuseRel,
    Relation,
    ScheduleError,
    ScheduleLike,
    SplitRel,
    Stage,
    thread_axis,
)

__all__ = [
    "ANNOTATIONS",
    "HANDLERS",
    "PRAGMAS",
    "SCOPES",
    "THREAD_TAGS",
    "FuseRel",
    "Relation",
    "Schedule",
    "ScheduleError",
    "ScheduleLike",
    "SplitRel",
    "Stage",
    "create_schedule",
    "effective_readers",
    "thread_axis",
]
