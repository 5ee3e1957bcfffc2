"""One :class:`TuneContext` composes runs: built once, it tunes two tasks with one builder and one
measuring worker (real gcc, real worker processes), and closing it stops them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import autosched as asc
from autosched.records import load_records
from autosched.runner.measure import MeasureOption
from autosched.search import TuneContext, tune_with

pytestmark = pytest.mark.requires("gcc")

FAST = MeasureOption(repeat=2, min_repeat_ms=1.0, run_timeout=10.0)


def worker_processes() -> set[int]:
    """Pids of this process's children that run a runner worker (building or measuring)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile
            continue
        parent = int(stat.rpartition(")")[2].split()[1])
        if parent == os.getpid() and any(b"worker" in word and b"runner" in word for word in cmdline):
            found.add(int(entry.name))
    return found


def test_one_context_tunes_two_tasks_with_one_worker_and_closes_it(tmp_path: Path) -> None:
    log = tmp_path / "two.jsonl"
    first = asc.Task("matmul", (24, 16, 20), target="c -num-threads=1")
    second = asc.Task("matmul", (16, 24, 12), target="c -num-threads=1")
    before = worker_processes()
    with TuneContext(first, trials=4, log=log, tuner="random", seed=0, option=FAST, remeasure=0) as context:
        a = tune_with(context)
        workers = worker_processes() - before
        b = tune_with(context, second)
        assert workers and worker_processes() - before == workers  # the same workers served both
        parts = context.parts(first)
        assert all(x is y for x, y in zip(context.parts(second), parts, strict=True))
    assert worker_processes() - before == set()  # closing the context stopped them

    assert (a.workload, b.workload) == (first.workload.key, second.workload.key)
    assert a.new_trials == b.new_trials == 4 and a.best_gflops and b.best_gflops
    logged = load_records(log)
    assert sorted({r.workload_key for r in logged}) == sorted([first.workload.key, second.workload.key])
    assert all(sum(r.workload_key == t.workload.key for r in logged) >= 4 for t in (first, second))


def test_a_tuner_object_serves_only_its_own_task(tmp_path: Path) -> None:
    first = asc.Task("matmul", (8, 8, 8), target="c -num-threads=1")
    tuner = asc.search.make_tuner("random", first, asc.search.make_space(first, "sketch"), 0, None)
    other = asc.Task("matmul", (8, 8, 4), target="c -num-threads=1")
    context = TuneContext(first, trials=2, log=tmp_path / "t.jsonl", tuner=tuner, option=FAST)
    with context, pytest.raises(ValueError, match="name a tuner to tune others"):
        tune_with(context, other)


def test_bad_arguments_are_refused_when_the_context_is_built(tmp_path: Path) -> None:
    task = asc.Task("matmul", (8, 8, 8), target="c -num-threads=1")
    with pytest.raises(ValueError, match="trials must be at least 1"):
        TuneContext(task, trials=0, log=tmp_path / "x.jsonl")
    with pytest.raises(FileNotFoundError, match="no directory"):
        TuneContext(task, log=tmp_path / "missing" / "x.jsonl")
