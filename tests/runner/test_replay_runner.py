"""The replay runner and the log space; model plumbing that needs no compiler (names, metrics,
diversity, transfer records)."""

from __future__ import annotations

import gzip
import json
import random
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from model_doubles import StepKNNModel, install_doubles

from autosched.records import Record, append_records, steps_key
from autosched.runner.measure import MeasureErrorNo, MeasureInput
from autosched.schedule.steps import SplitStep
from autosched.search import (
    Candidate,
    LogSpace,
    RandomTuner,
    ReplayLog,
    ReplayRunner,
    SATuner,
    diverse_pick,
    make_space,
    make_tuner,
)
from autosched.search.learning import sidecar_path
from autosched.search.transfer import load_transfer
from autosched.task import Task

DATA = Path(__file__).parents[1] / "data" / "replay_matmul128.jsonl.gz"


@pytest.fixture(scope="module")
def log() -> ReplayLog:
    return ReplayLog(DATA)


def test_the_runner_serves_recorded_results(log: ReplayLog) -> None:
    device = ReplayRunner(log)
    records = log.programs[:5]
    inputs = [MeasureInput(log.task, r.steps) for r in records]
    builds = device.build(inputs)
    results = device.run(inputs, builds)
    assert [r.costs for r in results] == [r.costs for r in records]
    assert [r.error_no for r in results] == [r.error_no for r in records]
    assert device.served == 5 and not device.misses


def test_a_program_not_in_the_log_is_a_clear_error(log: ReplayLog) -> None:
    device = ReplayRunner(log)
    (res,) = device.measure([Candidate((SplitStep("C", "i", 3, None),))])
    assert res.error_no == MeasureErrorNo.UNKNOWN_ERROR and res.error_msg.startswith("not in the replay log")
    assert device.misses == [steps_key((SplitStep("C", "i", 3, None),))]


def test_plain_and_compressed_logs_read_the_same(log: ReplayLog, tmp_path: Path) -> None:
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(gzip.decompress(DATA.read_bytes()))
    again = ReplayLog(plain)
    assert [r.program_key for r in again.programs] == [r.program_key for r in log.programs]
    assert again.ranked() == log.ranked() and len(log.top(0.01)) == max(1, len(log.ranked()) // 100)


def test_the_log_space_only_proposes_logged_programs(log: ReplayLog) -> None:
    space = LogSpace(log)
    rng = random.Random(0)
    keys = set(log.by_key)
    drawn = [space.sample(rng) for _ in range(50)]
    mutants = [space.mutate(c, rng) for c in drawn]
    children = [space.crossover(a, b, rng) for a, b in zip(drawn, mutants, strict=True)]
    assert all(steps_key(c.steps) in keys for c in drawn + mutants + children)
    # a record read back from a log (no point) mutates by its steps
    bare = Candidate(log.programs[7].steps)
    assert steps_key(space.mutate(bare, rng).steps) in keys


def test_mutation_moves_to_the_nearest_programs_by_step_distance(log: ReplayLog) -> None:
    space = LogSpace(log, neighbours=4)
    near = space.nearest(0)
    d = space.distances(0)
    assert 0 not in near and len(near) == 4
    others = np.delete(d, [0, *near])
    assert max(d[near]) <= others.min()
    a, b = set(log.programs[0].steps), set(log.programs[near[0]].steps)
    assert d[near[0]] == len(a ^ b)


def test_diverse_pick_prefers_a_different_program_to_a_near_copy() -> None:
    def cand(*factors: int) -> Candidate:
        return Candidate(tuple(SplitStep("C", ax, f, None) for ax, f in zip("ijk", factors, strict=False)))

    best, twin, other, poor = cand(2, 4, 8), cand(2, 4, 16), cand(8, 2, 4), cand(1, 1, 1)
    pool, scores = [best, twin, other, poor], [1.0, 0.99, 0.9, 0.0]
    assert diverse_pick(pool, scores, 2) == [best, other]
    assert diverse_pick(pool, scores, 2, weight=0.0) == [best, twin]


def test_model_names_resolve_and_unknown_ones_list_the_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    install_doubles(monkeypatch)
    task = Task("matmul", (16, 24, 8), target="c -num-threads=1")
    space = make_space(task, "sketch")
    tuner = make_tuner("sa", task, space, seed=0, model="knn")
    assert isinstance(tuner, SATuner) and isinstance(tuner.learner.model, StepKNNModel)  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="unknown model 'gbdt'; models: knn, random, xgb"):
        make_tuner("evolutionary", task, space, model="gbdt")


def test_without_xgboost_tuning_falls_back_to_random_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    install_doubles(monkeypatch)
    monkeypatch.setitem(sys.modules, "xgboost", None)  # its import raises ImportError
    task = Task("matmul", (16, 24, 8), target="c -num-threads=1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tuner = make_tuner("evolutionary", task, make_space(task, "sketch"), seed=0)
    assert type(tuner) is RandomTuner and tuner.learner is None
    (w,) = caught
    assert "needs xgboost" in str(w.message) and "random search" in str(w.message)
    assert "pip install xgboost-cpu" in str(w.message)


def _record(task: Task, steps: tuple[SplitStep, ...], cost: float | None) -> Record:
    from autosched.runner.measure import MeasureResult

    res = MeasureResult((cost,)) if cost else MeasureResult((), MeasureErrorNo.COMPILE_ERROR, "x")
    return Record.from_measure(MeasureInput(task, steps), res)


def test_transfer_records_become_inputs_of_their_own_tasks(tmp_path: Path, log: ReplayLog) -> None:
    other = tmp_path / "other.jsonl"
    append_records(other, log.programs[:20])
    task = Task("matmul", (64, 64, 64), target="c -num-threads=1")
    stranger = _record(task, (SplitStep("C", "i", 4, None),), 1e-3)
    data = stranger.to_json()
    data["workload"] = ["test_unregistered_op", [3]]
    data["workload_key"] = "test_unregistered_op(3)#0"
    mine = _record(task, (SplitStep("C", "i", 8, None),), 2e-3)
    with other.open("a") as f:
        f.write(json.dumps(data) + "\n" + json.dumps(data) + "\n")
    append_records(other, [mine, _record(log.task, (SplitStep("C", "j", 4, None),), None)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        inputs, costs = load_transfer([other], task)
    assert len(inputs) == 21 and all(i.task == log.task for i in inputs)  # the task's own record is not
    assert costs[:20] == [r.median for r in log.programs[:20]] and costs[20] == float("inf")
    (w,) = caught
    assert "skipped 2 records: unknown workload test_unregistered_op(3,)" in str(w.message)


def test_bad_transfer_logs_are_errors(tmp_path: Path) -> None:
    task = Task("matmul", (64, 64, 64), target="c -num-threads=1")
    with pytest.raises(FileNotFoundError, match="no transfer log"):
        load_transfer([tmp_path / "missing.jsonl"], task)
    future = tmp_path / "future.jsonl"
    data = _record(task, (SplitStep("C", "i", 4, None),), 1e-3).to_json()
    future.write_text(json.dumps({**data, "v": 99}) + "\n")
    with pytest.raises(ValueError, match="unsupported record format version 99"):
        load_transfer([future], task)


def test_the_sidecar_sits_next_to_the_log() -> None:
    assert sidecar_path("/x/mm.jsonl") == Path("/x/mm.model.jsonl")
    assert sidecar_path("runs/mm.log") == Path("runs/mm.log.model.jsonl")


def test_a_random_tuner_with_a_model_only_reports_its_quality(log: ReplayLog) -> None:
    tuner = RandomTuner(log.task, LogSpace(log), seed=1, model=StepKNNModel())
    tuner.tune(32, ReplayRunner(log).measure, batch_size=8)
    assert len(tuner.model_quality) == 4 and tuner.model_quality[-1].train_size == 32
