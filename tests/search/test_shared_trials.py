"""Runs sharing one log share its trials: ``--trials 12`` asked of two runs at once ends with 12
trials of the task in the log, as one run (or a resumed one) would, never 13."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import autosched as asc
from autosched.records import Record, append_records, is_remeasurement, load_records, steps_key
from autosched.runner.measure import MeasureInput, MeasureResult
from autosched.search.measurer import Measurer
from autosched.search.progress import TuneStats
from autosched.space.generated import SketchSpace

pytestmark = pytest.mark.requires("gcc")

REPO = Path(__file__).resolve().parents[2]


def _tune(seed: int, cwd: Path) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "autosched", "tune", "matmul", "32", "32", "32", "--trials", "12",
               "--log", "shared.jsonl", "--seed", str(seed), "--json", "--quiet",
               "--target", "c -num-threads=1", "--repeat", "1", "--min-repeat-ms", "1"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    pipe = subprocess.PIPE
    return subprocess.Popen(command, cwd=cwd, env=env, stdout=pipe, stderr=pipe, text=True)


def test_two_cli_runs_on_one_log_make_the_trials_asked_in_all(tmp_path: Path) -> None:
    """Different seeds: the runs propose different programs, so only the shared budget stops them."""
    procs = [_tune(seed, tmp_path) for seed in (0, 1)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    summaries = [json.loads(out) for out, _ in outs]
    trials = [r for r in load_records(tmp_path / "shared.jsonl") if not is_remeasurement(r)]
    keys = {steps_key(r.steps) for r in trials}
    # exactly the 12 asked: every trial a distinct program, each measured by one of the runs
    assert len(trials) == len(keys) == 12, [s["new_trials"] for s in summaries]
    assert sum(s["new_trials"] for s in summaries) == 12
    assert [s["trials"] for s in summaries] == [12, 12]  # each run counts the other's trials too
    # running again resumes: nothing is left to measure
    again = _tune(2, tmp_path)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    assert json.loads(out)["new_trials"] == 0
    assert len([r for r in load_records(tmp_path / "shared.jsonl") if not is_remeasurement(r)]) == 12


def _measurer(task: asc.Task, log: Path, budget: int) -> Measurer:
    """A run's measurer that will only reserve (nothing here builds or runs a program)."""
    return Measurer(task, None, None, log, TuneStats(task.flops()), budget=budget)  # type: ignore[arg-type]


def test_a_reservation_counts_the_trials_logged_and_those_under_way(tmp_path: Path) -> None:
    task = asc.Task("matmul", (16, 16, 16), target="c -num-threads=1")
    log = tmp_path / "shared.jsonl"
    log.touch()
    space = SketchSpace(task.workload, task.target)
    programs = [space.steps(space.sample(random.Random(i))) for i in range(40)]
    a, b, c = (_measurer(task, log, 12) for _ in range(3))
    try:
        assert a.reserve(8) == 8
        assert b.shared is not None and b.shared.in_flight() == 8
        assert b.reserve(8) == 4  # 12 less the 8 under way
        got: list[int] = []
        waiting = threading.Thread(target=lambda: got.append(c.reserve(3)))
        waiting.start()
        waiting.join(0.5)
        assert waiting.is_alive() and not got  # the budget is full of measurements under way: c waits
        # run a logs two of its trials, then gives their slots back (as Measurer.__call__ does)
        done = [Record.from_measure(MeasureInput(task, s), MeasureResult((1e-4,))) for s in programs[:2]]
        append_records(log, done)
        assert a.shared is not None
        a.shared.drop(2)
        waiting.join(1)
        # 2 logged, 10 under way (6 of a, 4 of b): 0 left; c goes on waiting
        assert waiting.is_alive() and not got
        a.close()  # run a dies: its 6 measurements under way will never be logged
        waiting.join(30)
        assert got == [3]  # 12 - 2 logged - 4 of b's under way = 6 left, 3 wanted
        assert c.counted == 2
        # a run whose log holds the trials asked reserves nothing, at once
        rest = [Record.from_measure(MeasureInput(task, s), MeasureResult((1e-4,))) for s in programs[2:12]]
        append_records(log, rest)
        b.shared.drop(b.shared.held)
        assert c.reserve(5) == 0 and c.counted == 12
    finally:
        for m in (a, b, c):
            m.close()
