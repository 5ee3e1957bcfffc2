"""The tuning database: where it lives, tune/load_best/compile through it, machines and targets
kept apart, apply_best scopes, concurrent appends from threads and processes."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from database_helpers import OTHER_MACHINE, TARGET, check, fake_record, foreign_db, quiet

import autosched as asc
from autosched.database import Database, NotTunedWarning, find_best, fingerprint_for, target_slug
from autosched.database.apply import logs_in_scope
from autosched.records import NoRecordError, Record, append_records, load_records
from autosched.runner.measure import MeasureOption

FAST = MeasureOption(repeat=2, min_repeat_ms=1.0, run_timeout=10.0)


@pytest.fixture
def db_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh default database for this test."""
    path = tmp_path / "db"
    monkeypatch.setenv("AUTOSCHED_DB", str(path))
    return path


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, asc.Task, list[Record]]]:
    """A database in which matmul 8x8x8 was tuned (4 trials) by ``asc.tune`` without a log."""
    if not _has_gcc():
        pytest.skip("needs gcc")
    path = tmp_path_factory.mktemp("tuned") / "db"
    task = asc.Task("matmul", (8, 8, 8), target=TARGET)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AUTOSCHED_DB", str(path))
        result = asc.tune(task, trials=4, seed=0, option=FAST, remeasure=0)
    log = Database(path).log_for(task)
    assert result.log == str(log) and result.trials == 4 and result.valid_trials >= 1
    yield path, task, load_records(log)


def _has_gcc() -> bool:
    from conftest import has_tool

    return has_tool("gcc")


# ---------------------------------------------------------------------------------------------
# Where the database is, and its layout


def test_default_path_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("AUTOSCHED_DB", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert Database().path == tmp_path / "home" / ".cache" / "autosched" / "db"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # XDG: relative paths are invalid
    assert Database().path == tmp_path / "home" / ".cache" / "autosched" / "db"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert Database().path == tmp_path / "xdg" / "autosched" / "db"
    monkeypatch.setenv("AUTOSCHED_DB", str(tmp_path / "env"))
    assert Database().path == tmp_path / "env"
    assert Database(tmp_path / "arg").path == tmp_path / "arg"


def test_layout_one_directory_per_machine_one_log_per_target(tmp_path: Path) -> None:
    db = Database(tmp_path)
    task = asc.Task("matmul", (8, 8, 8), target=TARGET)
    log = db.log_for(task)
    assert not log.parent.exists()  # looking does not create
    assert db.log_for(task, create=True) == log == db.log_for(str(task.target))
    assert log.parent.name == fingerprint_for(task.target) and log.name == target_slug(task.target) + ".jsonl"
    machine = json.loads((log.parent / "machine.json").read_text())
    assert machine["fingerprint"] == log.parent.name and machine["kind"] == "host"
    assert machine["vector_bytes"] == task.target.vector_bytes
    # another thread count is another log on the same machine; a cross target names its own machine
    assert db.log_for("c -num-threads=2").parent == log.parent and db.log_for("c -num-threads=2") != log
    cross = "c -cc=aarch64-linux-gnu-gcc -mcpu=cortex-a72"
    assert fingerprint_for(cross).startswith("aarch64-") and fingerprint_for(cross) != log.parent.name
    assert fingerprint_for(cross) != fingerprint_for("c -cc=aarch64-linux-gnu-gcc -mcpu=cortex-a53")
    assert all(c.isalnum() or c in "._+-" for c in target_slug("c -cflags='-O2 -g;rm -rf /'"))


# ---------------------------------------------------------------------------------------------
# tune, load_best and compile through the database


@pytest.mark.requires("gcc")
def test_tune_without_a_log_records_into_the_database(tuned: tuple[Path, asc.Task, list[Record]]) -> None:
    path, task, records = tuned
    assert len(records) == 4 and all(r.target == str(task.target) for r in records)
    assert Database(path).logs() == [Database(path).log_for(task)]


@pytest.mark.requires("gcc")
def test_tune_log_false_records_nothing(db_env: Path) -> None:
    task = asc.Task("relu", (4, 5), target=TARGET)
    assert asc.tune(task, trials=1, log=False).log is None
    assert not db_env.exists()
    assert asc.tune(task, trials=1).log == str(Database().log_for(task))


@pytest.mark.requires("gcc")
def test_load_best_and_compile_from_the_database(
    tuned: tuple[Path, asc.Task, list[Record]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, task, records = tuned
    monkeypatch.setenv("AUTOSCHED_DB", str(path))
    best = min((r for r in records if r.ok), key=lambda r: r.median)
    with quiet():
        check(task, asc.load_best(task))
        check(task, asc.load_best(task=task))
        check(task, asc.compile(task))
    found = find_best(task)
    assert found.record == best and "database" in found.where
    # the log form works as before
    log = Database(path).log_for(task)
    check(task, asc.load_best(log, task))
    check(task, asc.load_best(log=log, task=task))


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("workload, args", [("matmul", (8, 8, 8)), ("relu", (4, 5))])
def test_compile_with_nothing_tuned_warns_once_and_builds_the_default(
    db_env: Path, workload: str, args: tuple[int, ...]
) -> None:
    task = asc.Task(workload, args, target=TARGET)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kernel = asc.compile(task)
    assert [w.category for w in caught] == [NotTunedWarning]
    text = str(caught[0].message)
    assert "nothing tuned" in text and f"autosched tune {workload}" in text
    assert ("matmul_cpu" in text) == (workload == "matmul")
    check(task, kernel)
    with pytest.raises(NoRecordError, match="autosched tune"):
        asc.load_best(task)


# ---------------------------------------------------------------------------------------------
# Records of other machines and targets are never applied

@pytest.mark.requires("gcc")
def test_records_of_another_machine_are_not_applied(
    tuned: tuple[Path, asc.Task, list[Record]], tmp_path: Path
) -> None:
    _, task, records = tuned
    db = Database(foreign_db(tmp_path / "db", task, records))
    assert db.best(task) is None and find_best(task, db=db).record is None
    assert db.elsewhere(task) == {(OTHER_MACHINE, str(task.target)): [4, sum(r.ok for r in records)]}
    with pytest.warns(NotTunedWarning, match=f"never used here.*machine {OTHER_MACHINE}"):
        check(task, asc.compile(task, db=db))
    with pytest.raises(NoRecordError):
        asc.load_best(task, db=db)


@pytest.mark.requires("gcc")
def test_records_of_another_target_are_not_applied(
    tuned: tuple[Path, asc.Task, list[Record]], tmp_path: Path
) -> None:
    _, task, records = tuned
    other = asc.Task("matmul", (8, 8, 8), target=f"{TARGET} -vector-bytes=16")
    moved = [dataclasses.replace(r, target=str(other.target)) for r in records]
    db = Database(tmp_path / "db")
    append_records(db.log_for(other, create=True), moved)  # this machine, another vector width
    log = tmp_path / "other.jsonl"
    append_records(log, moved)
    assert find_best(task, log=log, db=db).record is None
    with asc.apply_best(log):
        assert find_best(task, db=db).record is None
    with pytest.warns(NotTunedWarning, match="never used here.*-vector-bytes=16"):
        asc.compile(task, log=log, db=db)
    assert find_best(other, db=db).record is not None  # they do serve their own target


# ---------------------------------------------------------------------------------------------
# apply_best


@pytest.fixture
def two_logs(tuned: tuple[Path, asc.Task, list[Record]], tmp_path: Path) -> tuple[asc.Task, Path, Path]:
    _, task, records = tuned
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    append_records(a, records)
    append_records(b, [r for r in records if r.ok][:1])
    return task, a, b


def test_apply_best_as_a_context_and_as_a_decorator(two_logs: tuple[asc.Task, Path, Path]) -> None:
    task, a, b = two_logs
    assert find_best(task, db=False).record is None
    with asc.apply_best(a) as scope:
        assert find_best(task, db=False).where == f"log {a}"
        with asc.apply_best(b):  # the innermost scope wins
            assert find_best(task, db=False).where == f"log {b}"
        assert find_best(task, db=False).where == f"log {a}"
        assert find_best(task, log=b, db=False).where == f"log {b}"  # log= wins over scopes
    assert logs_in_scope() == [] and find_best(task, db=False).record is None
    inner = asc.apply_best(b)
    with scope, inner:
        with pytest.raises(RuntimeError, match="out of order"):
            scope.__exit__(None, None, None)
        assert logs_in_scope() == [inner.logs, scope.logs]  # nothing changed; the same object twice:
        with scope:
            assert logs_in_scope() == [scope.logs, inner.logs, scope.logs]
    assert logs_in_scope() == []

    @asc.apply_best(b)
    def where() -> str:
        return find_best(task, db=False).where

    @asc.apply_best(a)
    async def where_async() -> str:
        await asyncio.sleep(0)
        return find_best(task, db=False).where

    assert where() == f"log {b}" and asyncio.run(where_async()) == f"log {a}"
    assert logs_in_scope() == []


@pytest.mark.requires("gcc")  # compiles the best program, unless another test already did
def test_apply_best_takes_a_database_or_its_directory(tuned: tuple[Path, asc.Task, list[Record]]) -> None:
    path, task, _ = tuned
    for scope in (asc.apply_best(path), asc.apply_best(str(path)), asc.apply_best(Database(path))):
        with scope:
            assert find_best(task, db=False).where == f"the database at {path}"


@pytest.mark.requires("gcc")
def test_apply_best_compiles_without_warning(two_logs: tuple[asc.Task, Path, Path]) -> None:
    task, a, _ = two_logs
    with quiet(), asc.apply_best(a):
        check(task, asc.compile(task, db=False))


def test_apply_best_scopes_are_per_thread(two_logs: tuple[asc.Task, Path, Path]) -> None:
    task, a, b = two_logs
    barrier = threading.Barrier(2, timeout=30)
    seen: dict[str, list[str]] = {}

    def worker(name: str, log: Path) -> None:
        @asc.apply_best(log)
        def look() -> list[str]:
            barrier.wait()  # both scopes are open now
            first = find_best(task, db=False).where
            barrier.wait()
            return [first, find_best(task, db=False).where]

        seen[name] = look()

    threads = [threading.Thread(target=worker, args=(n, p)) for n, p in (("a", a), ("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert seen == {"a": [f"log {a}"] * 2, "b": [f"log {b}"] * 2}
    assert logs_in_scope() == []


# ---------------------------------------------------------------------------------------------
# Concurrent appends: threads of this process and other processes


WRITER = """
import sys, threading
from autosched.database import Database
from autosched.records import append_records
sys.path.insert(0, {tests!r})
from database_helpers import fake_record
log = Database({db!r}).log_for({target!r}, create=True)
def run(name):
    for i in range({count}):
        append_records(log, [fake_record(name, i)], fsync=False)
threads = [threading.Thread(target=run, args=(f"p{{sys.argv[1]}}t{{k}}",)) for k in range(2)]
for t in threads: t.start()
for t in threads: t.join()
"""


def test_threads_and_processes_share_one_database(tmp_path: Path) -> None:
    db, count = tmp_path / "db", 40
    script = WRITER.format(tests=str(Path(__file__).parents[1]), db=str(db), target=TARGET, count=count)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(n)]) for n in range(3)]
    log = Database(db).log_for(TARGET, create=True)

    def run(name: str) -> None:
        for i in range(count):
            append_records(log, [fake_record(name, i)], fsync=False)

    threads = [threading.Thread(target=run, args=(f"local{k}",)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    lines = log.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 9 * count + 1
    for line in lines[:-1]:
        json.loads(line)  # every line whole
    with quiet():
        records = load_records(log)
    writers: dict[str, list[int]] = {}
    for r in records:
        assert r.program is not None and all(s.stage == f"S{r.program['writer']}" for s in r.steps)
        writers.setdefault(r.program["writer"], []).append(r.program["i"])
    assert len(writers) == 9 and all(seq == list(range(count)) for seq in writers.values())
