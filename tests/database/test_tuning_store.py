"""An application's own tuning store behind :class:`~autosched.database.TuningStore`: ``asc.tune``
writes through it, and ``load_best``, ``find_best`` and ``apply_best`` + ``asc.compile`` read from
it, without the default database being touched."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import autosched as asc
from autosched.database import Database, TuningStore, find_best
from autosched.records import Record, best_record, load_records
from autosched.target import Target
from autosched.task import Task

pytestmark = pytest.mark.requires("gcc")


class IndexStore(TuningStore):
    """A store that keeps each task's best record in an index of its own (a stand-in for a service
    or a SQL table); tuning runs write their local logs into ``scratch``."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.index: dict[tuple[str, str], Record] = {}
        self.handed: list[Path] = []

    def log_for(self, task_or_target: Task | str | Target, *, create: bool = False) -> Path:
        assert isinstance(task_or_target, Task)
        if create:
            self.scratch.mkdir(parents=True, exist_ok=True)
        return self.scratch / f"{task_or_target.workload.name}.jsonl"

    def best(self, task: Task) -> Record | None:
        return self.index.get((task.workload.key, str(task.target)))

    def tuned(self, task: Task, log: Path) -> None:
        self.handed.append(log)
        self.index[(task.workload.key, str(task.target))] = best_record(log, task)

    def describe(self) -> str:
        return "the index store"


def test_a_store_of_its_own_is_tuned_into_and_read_from(tmp_path: Path) -> None:
    store = IndexStore(tmp_path / "scratch")
    task = asc.Task("matmul", (32, 24, 16), target="c -num-threads=1")
    option = asc.MeasureOption(repeat=1, min_repeat_ms=1.0)
    result = asc.tune(task, trials=4, log=store, seed=0, option=option, progress=False)

    log = tmp_path / "scratch" / "matmul.jsonl"
    assert store.handed == [log] and result.log == str(log)
    assert len([r for r in load_records(log) if r.ok]) >= 4
    assert not Database().log_for(task).exists()  # the default database was not written
    best = store.best(task)
    assert best is not None and best.ok and best == best_record(log, task)  # what the run logged

    found = find_best(task, db=store)
    assert found.record == best and found.where == "the index store"

    a = np.random.default_rng(0).standard_normal((32, 16)).astype("float32")
    b = np.random.default_rng(1).standard_normal((16, 24)).astype("float32")
    for kernel in (asc.load_best(task, db=store), _compiled(task, store)):
        out = np.zeros((32, 24), "float32")
        kernel(a, b, out)
        np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


def _compiled(task: Task, store: TuningStore) -> Any:
    """``asc.compile`` with the store in scope (no NotTunedWarning: it found the store's best)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", asc.NotTunedWarning)
        with asc.apply_best(store):
            return asc.compile(task, db=False)


def test_an_empty_store_names_itself_when_nothing_is_tuned(tmp_path: Path) -> None:
    task = asc.Task("matmul", (8, 8, 8), target="c -num-threads=1")
    with pytest.raises(asc.records.NoRecordError, match="in the index store"):
        asc.load_best(task, db=IndexStore(tmp_path))
    assert isinstance(Database(tmp_path / "db"), TuningStore)
