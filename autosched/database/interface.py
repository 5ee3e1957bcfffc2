"""The interface every tuning store offers: where ``asc.tune`` writes a task's records, and where
``asc.compile``, ``apply_best``, ``find_best`` and ``load_best`` look for the best one.

:class:`~autosched.database.Database` (a directory of logs per machine and target) is the store
autosched ships; an application plugs its own (a shared service, an object store, a SQL table) by
subclassing :class:`TuningStore` and passing it where a database goes: ``asc.tune(task, log=store)``,
``asc.load_best(task, db=store)``, ``asc.apply_best(store)``. Tuning itself always writes a local
JSON-lines log (the store says where, :meth:`TuningStore.log_for`) so a crash loses nothing and a
run resumes from it; :meth:`TuningStore.tuned` then hands the store that log to keep.
"""

from __future__ import annotations

import abc
from pathlib import Path

from .. import records
from ..target import Target
from ..task import Task


class TuningStore(abc.ABC):
    """Where tuned records are kept and looked up (see the module docstring)."""

    @abc.abstractmethod
    def log_for(self, task_or_target: Task | str | Target, *, create: bool = False) -> Path:
        """The local log a tuning run of this task (or target) appends to and resumes from; with
        ``create``, its folder exists afterwards."""

    @abc.abstractmethod
    def best(self, task: Task) -> records.Record | None:
        """The best valid record of ``task`` valid on its machine; None if there is none."""

    def elsewhere(self, task: Task) -> dict[tuple[str, str], list[int]]:
        """Records of ``task``'s workload that :meth:`best` does not use, by (machine fingerprint,
        target string): [records, valid records]. For messages only; none by default."""
        return {}

    def tuned(self, task: Task, log: Path) -> None:
        """``asc.tune`` finished (or stopped) a run of ``task`` whose records are in ``log`` (the
        path :meth:`log_for` gave): keep them. The default keeps them where they are."""
        return None

    def describe(self) -> str:
        """How messages name this store (``searched ...``)."""
        return f"the tuning store {type(self).__name__}"
