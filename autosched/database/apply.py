"""Using tuned programs in an application: ``asc.compile``, ``asc.apply_best``, ``asc.load_best(task)``.

    f = asc.compile(task)                       # the best known kernel for this machine, never tunes
    with asc.apply_best("shipped.jsonl"):       # put logs in scope (a context, or a decorator)
        f = asc.compile(task)

:func:`compile` looks for the best record of the task, in this order, and the first place that
has one wins: the ``log=`` argument; the logs of the innermost :func:`apply_best`, then of the
enclosing ones (the best record among the logs of one ``apply_best``); the tuning database.
Only records of the task's exact target string are used (another vector width, compiler or
thread count is another target), and the database only serves records of this machine. With no
record anywhere it builds the workload's default schedule and warns (:class:`NotTunedWarning`).

The scope is a :mod:`contextvars` variable: each thread and each asyncio task sees its own.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from .. import records
from ..backends.base import Built
from ..diagnostics import AutoschedWarning, warn
from ..ops.schedules import default_schedule
from ..records.check import check_machine
from ..records.io import RecordError
from ..runner.compile import CompileError
from ..schedule import ScheduleError
from ..schedule.steps import Step
from ..task import Task
from .interface import TuningStore
from .machine import describe, fingerprint_for
from .store import Database, workload_targets

__all__ = ["ApplyBest", "Found", "NotTunedWarning", "apply_best", "compile", "find_best", "load_best"]

#: a log: a path, records, or a store (a Database or another TuningStore, or a directory's path)
LogLike = str | os.PathLike[str] | Iterable[records.Record] | TuningStore
_Source = Path | tuple[records.Record, ...] | TuningStore
DbLike = TuningStore | str | os.PathLike[str] | Literal[False] | None

_SCOPE: contextvars.ContextVar[tuple[tuple[_Source, ...], ...]] = contextvars.ContextVar(
    "autosched_apply_best", default=()
)

F = TypeVar("F", bound=Callable[..., Any])


class NotTunedWarning(AutoschedWarning):
    """:func:`compile` found no tuned program for this machine and built the default schedule."""


def _source(log: LogLike) -> _Source:
    if isinstance(log, TuningStore):
        return log
    if isinstance(log, (str, os.PathLike)):
        return Database(log) if os.path.isdir(log) else Path(log)
    if isinstance(log, Task):
        raise TypeError("apply_best takes logs (paths, records or a tuning store), not a Task")
    return tuple(log)


def _name(source: _Source) -> str:
    if isinstance(source, TuningStore):
        return source.describe()
    return f"log {source}" if isinstance(source, Path) else f"{len(source)} given records"


class ApplyBest:
    """Logs put in scope for :func:`compile`: ``with apply_best(...):`` or ``@apply_best(...)``.

    The scope lives in a context variable, so threads and asyncio tasks never see each other's;
    one object may be entered several times, also from several threads. A decorated coroutine
    function gets the scope while it runs.
    """

    def __init__(self, *logs: LogLike) -> None:
        if not logs:
            raise TypeError("apply_best needs at least one log")
        self.logs: tuple[_Source, ...] = tuple(_source(log) for log in logs)

    def __repr__(self) -> str:
        return f"apply_best({', '.join(_name(s) for s in self.logs)})"

    def __enter__(self) -> ApplyBest:
        _SCOPE.set((*_SCOPE.get(), self.logs))
        return self

    def __exit__(self, *exc: object) -> None:
        frames = _SCOPE.get()
        if not frames or frames[-1] is not self.logs:
            raise RuntimeError(f"{self!r} exited out of order (scopes must nest)")
        _SCOPE.set(frames[:-1])

    def __call__(self, func: F) -> F:
        """Decorate ``func`` (or a coroutine function): it runs with these logs in scope."""
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                with self:
                    return await func(*args, **kwargs)

            return run_async  # type: ignore[return-value]

        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return run  # type: ignore[return-value]


def apply_best(*logs: LogLike) -> ApplyBest:
    """Put tuning logs (paths, lists of records, a :class:`Database` or another tuning store) in
    scope for :func:`compile`, as a context manager or a decorator (see :class:`ApplyBest`)."""
    return ApplyBest(*logs)


def logs_in_scope() -> list[tuple[_Source, ...]]:
    """The logs of the enclosing :func:`apply_best` scopes, innermost first."""
    return list(reversed(_SCOPE.get()))


@dataclass(frozen=True)
class Found:
    """What :func:`find_best` looked at: the record chosen (None: none), where it came from, and
    notes on logs that could not be read."""

    record: records.Record | None
    where: str
    searched: tuple[str, ...]
    notes: tuple[str, ...] = ()


def this_machine(
    log: str | os.PathLike[str] | Iterable[records.Record], task: Task, machine: str | None = None
) -> list[records.Record]:
    """The records of ``task`` in ``log`` measured on the machine asked for (or that say nothing of
    theirs, as older logs do); one warning when others are left out.

    ``machine`` is a fingerprint (a board's: ``BoardPool.machine``, or as a log's records carry
    it). By default: this host for a target it runs natively; for a target that names other
    hardware (a cross compiler's boards, a GPU) every machine that measured that exact target
    string, as ``autosched best`` / ``export`` and the tuning database take them (one warning
    when there are several).
    """
    if machine is not None:
        check_machine(machine)
    if isinstance(log, (str, os.PathLike)):
        mine = records.load_records(log, workload_key=task.workload.key, target=str(task.target))
    else:
        mine = [r for r in log if (r.workload_key, r.target) == (task.workload.key, str(task.target))]
    where = log if isinstance(log, (str, os.PathLike)) else "the given records"
    measured = sorted({r.machine for r in mine} - {""})
    if machine is None and describe(task.target)["kind"] != "host":
        if len(measured) > 1:
            warn(
                f"{where}: the records of {task.workload} on {task.target} were measured on "
                f"{len(measured)} machines ({', '.join(measured)}); the fastest of all is used: "
                "pass machine= to choose one"
            )
        return mine
    wanted = machine or fingerprint_for(task.target)
    kept = [r for r in mine if r.machine in ("", wanted)]
    foreign = [fp for fp in measured if fp != wanted]
    if foreign:
        which = f"this one is {wanted}" if machine is None else f"asked for {wanted}"
        warn(
            f"{where}: {len(mine) - len(kept)} records of {task.workload} were measured on another "
            f"machine ({', '.join(foreign)}; {which}) and are not used here"
        )
    return kept


def _best_in(source: _Source, task: Task, notes: list[str]) -> records.Record | None:
    if isinstance(source, TuningStore):
        return source.best(task)
    try:
        return records.best_record(this_machine(source, task), task)
    except records.NoRecordError:
        return None
    except (OSError, RecordError) as err:
        notes.append(str(err))
        return None


def _levels(log: LogLike | None, db: DbLike) -> list[tuple[_Source, ...]]:
    levels: list[tuple[_Source, ...]] = [] if log is None else [(_source(log),)]
    levels += logs_in_scope()
    if db is not False:
        levels.append((Database.resolve(db),))
    return levels


def find_best(task: Task, *, log: LogLike | None = None, db: DbLike = None) -> Found:
    """The record :func:`compile` would use for ``task`` (see the module docstring for the order);
    ``db=False`` leaves the database out."""
    notes: list[str] = []
    searched: list[str] = []
    for level in _levels(log, db):
        found: list[tuple[float, int, records.Record, _Source]] = []
        for source in level:
            searched.append(_name(source))
            record = _best_in(source, task, notes)
            if record is not None:
                found.append((record.median, len(found), record, source))
        if found:
            _, _, record, source = min(found, key=lambda f: (f[0], f[1]))
            return Found(record, _name(source), tuple(searched), tuple(notes))
    return Found(None, "", tuple(searched), tuple(notes))


def _elsewhere(task: Task, log: LogLike | None, db: DbLike) -> list[str]:
    """Records of the task's workload for other machines or targets, in the places searched."""
    key, target = task.workload.key, str(task.target)
    lines = []
    for level in _levels(log, db):
        for source in level:
            if isinstance(source, TuningStore):
                for (fp, tgt), (n, _) in source.elsewhere(task).items():
                    machine = "this machine" if fp == fingerprint_for(task.target) else f"machine {fp}"
                    lines.append(f"{n} in {_name(source)} for {machine}, target {tgt}")
                continue
            pairs = (
                workload_targets(source, key)
                if isinstance(source, Path)
                else [(r.target, r.ok) for r in source if r.workload_key == key]
            )
            counts: dict[str, int] = {}
            for tgt, _ in pairs:
                if tgt != target:
                    counts[tgt] = counts.get(tgt, 0) + 1
            lines += [f"{n} in {_name(source)} for target {tgt}" for tgt, n in counts.items()]
    return lines


def _tune_hint(task: Task) -> str:
    args = " ".join(shlex.quote(str(a)) for a in task.workload.args)
    return (
        f"to tune it: autosched tune {task.workload.name} {args} --target {shlex.quote(str(task.target))}"
        " (or asc.tune(task, trials=...)), which records into the tuning database"
    )


def _schedule_name(how: str) -> str:
    return "naive default schedule" if how == "default schedule" else f"hand-written schedule {how}"


def _not_tuned(task: Task, found: Found, how: str, log: LogLike | None, db: DbLike) -> str:
    text = f"nothing tuned for {task.workload} on {task.target}: using the {_schedule_name(how)}"
    text += f"; searched {', '.join(found.searched) or 'nothing (db=False, no log)'}"
    other = _elsewhere(task, log, db)
    if other:
        shown = "; ".join(other[:5]) + (f"; and {len(other) - 5} more" if len(other) > 5 else "")
        text += f"; records of this workload for other machines or targets are never used here ({shown})"
    if found.notes:
        text += "; could not read: " + "; ".join(found.notes)
    return f"{text}; {_tune_hint(task)}"


def _build(task: Task, steps: tuple[Step, ...] | list[Step]) -> Built:
    return task.build(steps)


def _not_measured_on(task: Task, log: object, machine: str | None, fastest: str) -> str:
    """Why ``log`` has no valid record of ``task`` for ``machine`` (None: this one) although its
    fastest valid record was measured on ``fastest``."""
    asked = "this machine" if machine is None else f"machine {machine}"
    where = log if isinstance(log, (str, os.PathLike)) else "the given records"
    text = f"no valid record for {task} measured on {asked} in {where}"
    return f"{text}; the fastest was measured on {fastest}: pass machine={fastest!r} to use that machine's"


def compile(  # noqa: A001 (asc.compile, like triton.compile / tvm.compile)
    task: Task, *, log: LogLike | None = None, db: DbLike = None
) -> Built:
    """The best known kernel of ``task`` for this machine, built and loaded; never tunes.

    Looks in ``log``, then the :func:`apply_best` scopes, then the database ``db`` (None: the
    default database; ``False``: none). With no record of the task (for this machine and this
    exact target), or one that no longer builds, it builds the workload's default schedule (the
    hand-written one where there is one, else the naive one) and issues one
    :class:`NotTunedWarning` saying what was searched and how to tune.
    """
    found = find_best(task, log=log, db=db)
    if found.record is not None:
        try:
            return _build(task, found.record.steps)
        except (ScheduleError, CompileError) as err:  # e.g. a record of an older version
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            reason = f"the best record in {found.where} does not build here ({first})"
            sched, how = default_schedule(task.workload, task.target)
            warn(f"{reason}: using the {_schedule_name(how)} for {task.workload}", NotTunedWarning)
            return _build(task, sched.steps)
    sched, how = default_schedule(task.workload, task.target)
    warn(_not_tuned(task, found, how, log, db), NotTunedWarning)
    return _build(task, sched.steps)


def load_best(
    log: LogLike | Task | None = None,
    task: Task | None = None,
    *,
    machine: str | None = None,
    cache_dir: Path | None = None,
    db: TuningStore | str | os.PathLike[str] | None = None,
) -> Built:
    """The best program of a task, built and loaded: ``load_best(log, task)`` from a log (as
    :func:`autosched.records.build_best`, of the records :func:`this_machine` keeps: this host's for
    a native target, those of the target's boards for a cross target, or those of ``machine``, a
    fingerprint, e.g. an x86 board's ``BoardPool.machine``), ``load_best(task)`` from the tuning
    database ``db`` (default: the default database), its machine's records only.

    Raises :class:`~autosched.records.NoRecordError` when there is no valid record (one line
    naming the machines that measured the task when none is the one asked for).
    """
    if isinstance(log, Task) and task is None:
        log, task = None, log
    if task is None:
        raise TypeError("load_best needs a task: load_best(task) or load_best(log, task)")
    if log is not None and not isinstance(log, TuningStore):
        if isinstance(log, Task):
            raise TypeError("load_best(log, task): the first argument is a log, got a Task")
        if not isinstance(log, (str, os.PathLike)):
            log = list(log)
        kept = this_machine(log, task, machine)
        if not any(r.ok for r in kept):
            found = records.best_record(log, task, check=None)  # none at all: raises, saying what the log has
            raise records.NoRecordError(_not_measured_on(task, log, machine, found.machine))
        return records.build_best(kept, task, cache_dir=cache_dir)
    if machine is not None:
        raise TypeError("machine= chooses among a log's records: load_best(log, task, machine=FP)")
    database = log if isinstance(log, TuningStore) else Database.resolve(db)
    record = database.best(task)
    if record is None:
        where = database.describe()
        if isinstance(database, Database):
            where = f"the tuning database ({database.log_for(task)})"
        raise records.NoRecordError(f"no valid record for {task} in {where}; {_tune_hint(task)}")
    return task.build(record.steps, cache_dir=cache_dir)
