"""Costs faster than any machine runs are bad records: a tuning-log line that claims 1e-300 s, or
a rate of operations no device of the target's kind reaches, is skipped like any other bad line
and never wins ``autosched best``; real measurements, even of the smallest kernel, always pass."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from autosched.records import Record, RecordWarning, load_records
from autosched.records.check import MIN_SECONDS
from autosched.runner.measure import MeasureInput, MeasureResult
from autosched.search.baseline import default_candidate
from autosched.space.generated import SketchSpace
from autosched.target import peak_ops
from autosched.task import Task

REPO = Path(__file__).resolve().parents[2]
TARGET = "c -num-threads=1"
GPU_TARGET = "cuda -arch=sm_80"  # a target string a log may name; nothing here runs on it


@pytest.fixture(scope="module")
def task() -> Task:
    return Task("matmul", (128, 128, 128), target=TARGET)  # 2 * 128**3 = 4,194,304 operations


def record(task: Task, *costs: float, seed: int | None = None) -> Record:
    """A valid measurement of the task's default program (of a sampled one with ``seed``)."""
    if seed is None:
        steps = default_candidate(task).steps
    else:
        space = SketchSpace(task.workload, task.target)
        steps = space.steps(space.sample(random.Random(seed)))
    return Record.from_measure(MeasureInput(task, steps), MeasureResult(costs, all_cost=0.2, timestamp=1.8e9))


def write(path: Path, records: list[Record]) -> Path:
    path.write_text("".join(r.to_line() for r in records))
    return path


def autosched(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m autosched ARGV`` in a subprocess, with this checkout importable."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "autosched", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def test_best_skips_an_impossible_cost_like_any_bad_record(task: Task, tmp_path: Path) -> None:
    fast, slow = record(task, 1e-5, 1.1e-5), record(task, 2e-5, seed=1)
    lines = [fast.to_line(), record(task, 1e-300, seed=2).to_line(), slow.to_line()]
    negative = json.loads(slow.to_line()) | {"costs": [-1.0]}  # a bad record of a known kind
    log = tmp_path / "log.jsonl"
    log.write_text("".join(lines) + json.dumps(negative) + "\n")

    shown = autosched("best", str(log), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert " 0.0105 ms " in shown.stdout, shown.stdout  # the median of the fast record, not 1e-300 s
    warned = shown.stderr.splitlines()
    assert len(warned) == 2, warned
    assert warned[0].startswith(f"autosched: warning: {log}:2: skipped a bad line: cost 1e-300 s of a valid "
                                "measurement is impossibly short: 4194304 operations in it are 4.19e+306 per "
                                "second, more than any c device runs (1e+16)")  # fmt: skip
    assert warned[1].startswith(f"autosched: warning: {log}:4: skipped a bad line: cost -1.0 ")  # same form
    assert "Traceback" not in shown.stderr

    as_json = autosched("best", str(log), "--json", cwd=tmp_path)
    summary = json.loads(as_json.stdout)
    assert summary["best_time_ms"] == pytest.approx(1.05e-2)
    assert summary["best_gflops"] == pytest.approx(task.flops() / 1.05e-5 / 1e9)
    assert summary["trials"] == 2  # two programs: the skipped record is none


def test_the_bound_follows_the_operations_and_the_target_kind(task: Task, tmp_path: Path) -> None:
    ops = task.flops()
    cpu_shortest = ops / peak_ops("c")  # 4.2e-10 s: above MIN_SECONDS, so the operations decide
    assert cpu_shortest > MIN_SECONDS and peak_ops("cuda") > peak_ops("c")
    cpu_ok, cpu_bad = record(task, cpu_shortest), record(task, 1e-5, cpu_shortest / 2)  # every repeat counts
    gpu = [dataclasses.replace(record(task, c), target=GPU_TARGET)
           for c in (cpu_shortest / 2, MIN_SECONDS / 2)]
    log = write(tmp_path / "log.jsonl", [cpu_ok, cpu_bad, *gpu])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kept = load_records(log)
    # a GPU may run 4.2e6 operations in 2.1e-10 s (2e16 per second), a CPU may not; no kernel call
    # anywhere takes 5e-11 s
    cpu = str(task.target)
    assert [(r.target, r.costs) for r in kept] == [(cpu, cpu_ok.costs), (GPU_TARGET, gpu[0].costs)]
    messages = [str(w.message) for w in caught if issubclass(w.category, RecordWarning)]
    assert len(messages) == 2, messages
    assert "log.jsonl:2: skipped a bad line:" in messages[0] and "more than any c device runs" in messages[0]
    assert messages[1].endswith(
        "log.jsonl:4: skipped a bad line: cost 5e-11 s of a valid measurement is impossibly short: no kernel "
        "call takes under 1e-10 s"
    )


def test_a_workload_not_registered_here_is_held_to_the_shortest_call(task: Task, tmp_path: Path) -> None:
    unknown = {"workload": ["not_here", [1]], "workload_key": "not_here(1)#0"}
    plausible = json.loads(record(task, 2e-10).to_line()) | unknown  # its operations are unknown here
    impossible = json.loads(record(task, 1e-300).to_line()) | unknown
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(plausible) + "\n" + json.dumps(impossible) + "\n")
    with pytest.warns(RecordWarning, match=r"log.jsonl:2: skipped a bad line: .*no kernel call takes under"):
        assert [r.costs for r in load_records(log)] == [(2e-10,)]


def test_failed_measurements_keep_their_costs_unchecked(task: Task, tmp_path: Path) -> None:
    """A failure's costs mean nothing (a wrong answer is timed too): only valid ones are held to a speed."""
    wrong = json.loads(record(task, 1e-300).to_line()) | {"error": "WRONG_ANSWER", "error_msg": "x"}
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps(wrong) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecordWarning)
        assert [r.error_no.name for r in load_records(log)] == ["WRONG_ANSWER"]


@pytest.mark.requires("gcc")
def test_real_measurements_of_the_smallest_kernel_pass(tmp_path: Path) -> None:
    """One element, one addition: the shortest real call there is, measured and logged by a real run."""
    tuned = autosched("tune", "add", "1", "1", "--trials", "3", "--log", "tiny.jsonl", "--target", TARGET,
                      "--remeasure", "0", "--quiet", "--json", "--repeat", "2", "--min-repeat-ms", "5",
                      cwd=tmp_path)  # fmt: skip
    assert tuned.returncode == 0, tuned.stderr
    assert json.loads(tuned.stdout)["valid_trials"] == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecordWarning)
        kept = load_records(tmp_path / "tiny.jsonl")
    assert len(kept) == 3 and all(r.ok and min(r.costs) >= MIN_SECONDS for r in kept)
