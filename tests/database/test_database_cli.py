"""The tuning database's gc and the ``autosched db`` commands."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from database_helpers import OTHER_MACHINE, TARGET, fake_record, foreign_db, quiet, task_records

import autosched as asc
from autosched.cli import main
from autosched.database import Database, fingerprint_for
from autosched.records import append_records, load_records
from autosched.runner.measure import MeasureErrorNo

# ---------------------------------------------------------------------------------------------
# gc


def _gc_db(root: Path) -> tuple[Database, Path]:
    db = Database(root)
    log = db.log_for(TARGET, create=True)
    failed = dataclasses.replace(fake_record("x", 0), error_no=MeasureErrorNo.COMPILE_ERROR)
    append_records(log, [fake_record("w", i) for i in range(5)] + [failed])
    append_records(log, [dataclasses.replace(fake_record("v", i), workload_key="v(1)#0") for i in range(3)])
    folder = log.parent
    (folder / "empty.jsonl").write_text("")
    (folder / "garbage.jsonl").write_text("this is not a log\n")
    append_records(folder / "failed.jsonl", [failed])
    stale = folder / ".x.jsonl.1.ab.tmp"
    stale.write_text("half")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    return db, log


def test_gc_distills_and_removes_junk(tmp_path: Path) -> None:
    db, log = _gc_db(tmp_path / "db")
    files = sorted(p.name for p in log.parent.iterdir())
    report = db.gc(dry_run=True)
    assert sorted(p.name for p in log.parent.iterdir()) == files and len(load_records(log)) == 9
    actions = {a.path.name: a.action for a in report.actions}
    assert actions == {log.name: "distilled", "empty.jsonl": "removed", "garbage.jsonl": "removed",
                       "failed.jsonl": "removed", ".x.jsonl.1.ab.tmp": "removed"}  # fmt: skip
    real = db.gc()
    assert [(a.path.name, a.action, a.freed) for a in real.actions] == [
        (a.path.name, a.action, a.freed) for a in report.actions
    ]
    assert sorted(p.name for p in log.parent.iterdir()) == sorted([log.name, "machine.json"])
    kept = load_records(log)
    assert [(r.workload_key, r.program["i"]) for r in kept if r.program] == [("wl(1)#0", 0), ("v(1)#0", 0)]
    assert real.freed > 0 and db.gc().freed == 0


def test_gc_leaves_records_of_another_format_version_alone(tmp_path: Path) -> None:
    db = Database(tmp_path / "db")
    log = db.log_for(TARGET, create=True)
    append_records(log, [fake_record("w", i) for i in range(3)])
    newer = json.dumps({**fake_record("w", 9).to_json(), "v": 99}) + "\n"
    with open(log, "a") as f:
        f.write(newer)
    only_newer = log.parent / "newer.jsonl"
    only_newer.write_text(newer)
    before = log.read_bytes()
    with quiet():
        report = db.gc()
    assert {(a.path.name, a.action) for a in report.actions} == {(log.name, "kept"), ("newer.jsonl", "kept")}
    assert log.read_bytes() == before and only_newer.read_text() == newer


# ---------------------------------------------------------------------------------------------
# The autosched db commands


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autosched", "db", *argv], capture_output=True, text=True, timeout=120
    )


def test_db_cli_list_best_export(tmp_path: Path) -> None:
    task = asc.Task("matmul", (8, 8, 8), target=TARGET)
    db = tmp_path / "db"
    foreign_db(db, task, [dataclasses.replace(r, costs=(1e-6,)) for r in task_records(task)])
    log = Database(db).log_for(task, create=True)
    append_records(log, task_records(task))
    evil = dataclasses.replace(fake_record("e", 0), workload=("evil\x1b[2J", (1,)), workload_key="evil\x1b#0")
    append_records(log, [evil])

    out = _cli("list", "--db", str(db))
    assert out.returncode == 0, out.stderr
    here = fingerprint_for(task.target)
    assert f"machine {here} (this machine)" in out.stdout
    assert f"machine {OTHER_MACHINE}: Other CPU" in out.stdout
    assert "matmul(8,8,8,'float32',False): 4 records" in out.stdout and str(task.target) in out.stdout
    assert "\x1b" not in out.stdout and "evil\\x1b: 1 record," in out.stdout
    listed = json.loads(_cli("list", "--db", str(db), "--json").stdout)
    assert {m["fingerprint"] for m in listed["machines"]} == {here, OTHER_MACHINE}

    best = json.loads(_cli("best", "--db", str(db), "--workload", "matmul", "--json").stdout)
    assert sorted(b["machine"] for b in best) == sorted([here, OTHER_MACHINE])
    assert all(b["trials"] == 4 and b["target"] == str(task.target) for b in best)
    assert {b["machine"]: b["best_time_ms"] for b in best} == pytest.approx({here: 1e-2, OTHER_MACHINE: 1e-3})

    out = _cli("export", "--db", str(db), "--workload", "matmul", "8", "--out", str(tmp_path / "k"))
    assert out.returncode == 0, out.stderr
    assert f"(0.01 ms when tuned on {here})" in out.stdout  # this machine's records come first
    assert {"kernel.c", "kernel.h", "main.c", "Makefile"} <= {p.name for p in (tmp_path / "k").iterdir()}


def test_db_cli_gc(tmp_path: Path) -> None:
    db, log = _gc_db(tmp_path / "db")
    before = log.read_bytes()
    out = _cli("gc", "--db", str(db.path), "--dry-run")
    assert out.returncode == 0, out.stderr
    assert "would distill" in out.stdout and "would remove" in out.stdout and log.read_bytes() == before
    out = _cli("gc", "--db", str(db.path))
    assert out.returncode == 0 and "gc freed" in out.stdout and "4 files removed" in out.stdout
    assert len(load_records(log)) == 2


@pytest.mark.parametrize(
    "argv, message",
    [
        (["list", "--db", "{tmp}/missing"], "no tuning database"),
        (["best", "--db", "{tmp}"], "no records of any workload"),
        (["export", "--db", "{tmp}", "--workload", "nope", "--out", "{tmp}/k"], "no records of nope"),
        (["gc", "--db", "{tmp}/file"], "not a directory"),
        (["best", "--db", "{tmp}", "--machine", "../x"], "no machine '../x'"),
    ],
)
def test_db_cli_bad_input_is_one_line(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("x")
    code = main(["db", *(a.format(tmp=tmp_path) for a in argv)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("autosched: error: ") and message in err[0]
