"""The tuning database never acts through a symbolic link: gc, listing, lookups and writes leave
files outside the database alone (real folders, real links, ``autosched db`` as a subprocess)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from database_helpers import TARGET, fake_record, task_records

import autosched as asc
from autosched.database import Database, fingerprint_for
from autosched.diagnostics import AutoschedWarning
from autosched.records import append_records, load_records
from autosched.runner.measure import MeasureErrorNo

ROOT = Path(__file__).resolve().parents[2]
LINKED_MACHINE = "x86_64-aaaaaaaaaaaa"


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "autosched", "db", *argv], capture_output=True, text=True,
                          timeout=120, env=env)  # fmt: skip


def _old(path: Path, link_to: Path | None = None) -> None:
    """``path`` (made a link to ``link_to`` if given) dated two hours back: a stale temporary file."""
    if link_to is not None:
        path.symlink_to(link_to)
    os.utime(path, (time.time() - 7200, time.time() - 7200), follow_symlinks=False)


def _bait(folder: Path) -> dict[Path, bytes]:
    """Files in ``folder`` that gc removes or rewrites when they are in the database: a stale
    temporary file, an empty log, a log that is not one, one with only a failed trial, a log to
    distill, and a machine.json. Their contents, by path."""
    folder.mkdir(parents=True)
    (folder / ".x.jsonl.1.ab.tmp").write_text("half")
    _old(folder / ".x.jsonl.1.ab.tmp")
    (folder / "empty.jsonl").write_text("")
    (folder / "garbage.jsonl").write_text("this is not a log\n")
    failed = dataclasses.replace(fake_record("x", 0), error_no=MeasureErrorNo.COMPILE_ERROR)
    append_records(folder / "failed.jsonl", [failed])
    append_records(folder / "c_many.jsonl", [fake_record("w", i) for i in range(5)])
    (folder / "machine.json").write_text('{"fingerprint": "x86_64-aaaaaaaaaaaa"}\n')
    return {p: p.read_bytes() for p in folder.iterdir()}


def _database(tmp_path: Path) -> tuple[Database, Path, dict[Path, bytes]]:
    """A database with a real machine folder (a log to distill, a linked log, a linked temporary
    file) and a machine folder that is a link to a folder outside; what lies outside, by path."""
    db = Database(tmp_path / "db")
    log = db.log_for(TARGET, create=True)
    append_records(log, [fake_record("w", i) for i in range(5)])
    outside = _bait(tmp_path / "outside")
    (db.path / LINKED_MACHINE).symlink_to(tmp_path / "outside", target_is_directory=True)
    victim = tmp_path / "victim"
    victim.mkdir()
    append_records(victim / "log.jsonl", [fake_record("v", i) for i in range(5)])
    (victim / "empty.jsonl").write_text("")
    (victim / ".y.jsonl.2.cd.tmp").write_text("half")
    _old(victim / ".y.jsonl.2.cd.tmp")
    (log.parent / "linked.jsonl").symlink_to(victim / "log.jsonl")
    (log.parent / "linked-empty.jsonl").symlink_to(victim / "empty.jsonl")
    _old(log.parent / ".y.jsonl.2.cd.tmp", victim / ".y.jsonl.2.cd.tmp")
    return db, log, {**outside, **{p: p.read_bytes() for p in victim.iterdir()}}


def test_gc_leaves_files_behind_links_alone(tmp_path: Path) -> None:
    db, log, outside = _database(tmp_path)
    out = _cli("gc", "--db", str(db.path))
    assert out.returncode == 0, out.stderr
    for path, data in outside.items():
        assert path.exists(), f"gc deleted {path}, outside the database"
        assert path.read_bytes() == data, f"gc rewrote {path}, outside the database"
    assert (log.parent / "linked.jsonl").is_symlink() and (db.path / LINKED_MACHINE).is_symlink()
    assert len(load_records(log)) == 1, "gc still distills the real logs"
    said = [line for line in out.stderr.splitlines() if line.startswith("autosched: warning:")]
    assert len(said) == 1, out.stderr
    assert "symbolic link" in said[0] and str(db.path) in said[0]
    assert "linked" not in out.stdout and "outside" not in out.stdout


def test_listing_and_lookups_skip_links(tmp_path: Path) -> None:
    db, log, _ = _database(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert list(db.machines()) == [log.parent.name]
        assert db.logs() == [log]
        assert db.logs(LINKED_MACHINE) == []
    assert len(caught) == 1 and issubclass(caught[0].category, AutoschedWarning)
    out = _cli("list", "--db", str(db.path))
    assert out.returncode == 0, out.stderr
    assert LINKED_MACHINE not in out.stdout and out.stderr.count("autosched: warning:") == 1


@pytest.mark.requires("gcc")
def test_records_behind_a_linked_machine_folder_are_neither_used_nor_written(tmp_path: Path) -> None:
    task = asc.Task("matmul", (8, 8, 8), target=TARGET)
    db = Database(tmp_path / "db")
    db.path.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    append_records(elsewhere / db.log_for(task).name, task_records(task))
    (db.path / fingerprint_for(task.target)).symlink_to(elsewhere, target_is_directory=True)
    before = {p: p.read_bytes() for p in elsewhere.iterdir()}
    with pytest.warns(AutoschedWarning, match="symbolic link"):
        assert db.best(task) is None
    with pytest.raises(ValueError, match="symbolic link.*writes nothing through it") as no:
        db.log_for(task, create=True)
    assert "\n" not in str(no.value)
    assert {p: p.read_bytes() for p in elsewhere.iterdir()} == before


def test_a_linked_log_is_not_written(tmp_path: Path) -> None:
    db = Database(tmp_path / "db")
    log = db.log_for(TARGET, create=True)
    target = tmp_path / "target.jsonl"
    target.write_text("")
    log.symlink_to(target)
    with pytest.raises(ValueError, match="symbolic link"):
        db.log_for(TARGET, create=True)
    assert target.read_text() == ""


def test_inside_means_no_link_on_the_way(tmp_path: Path) -> None:
    db, log, _ = _database(tmp_path)
    assert db.inside(log) and db.inside(log.parent)
    assert not db.inside(log.parent / "linked.jsonl")
    assert not db.inside(db.path / LINKED_MACHINE / "c_many.jsonl")
    assert not db.inside(db.path / ".." / "outside" / "c_many.jsonl")
    assert not db.inside(tmp_path / "outside" / "c_many.jsonl")
    linked_root = Database(tmp_path / "db-link")  # the database's own path may be a link
    (tmp_path / "db-link").symlink_to(db.path, target_is_directory=True)
    assert linked_root.inside(linked_root.path / log.parent.name / log.name)
