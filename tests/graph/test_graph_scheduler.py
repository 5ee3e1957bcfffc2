"""The task scheduler: its arithmetic and its choices on tuning curves served by the replay runner
(the real end-to-end tuning of a 3-task model is in test_graph_network.py), and the one pair of
build and measure workers that a network tuning run keeps for all its rounds (a real child process)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autosched.search import LogSpace, ReplayLog, ReplayRunner, make_tuner
from autosched.search.scheduler import TaskScheduler, TaskState

DATA = Path(__file__).parents[1] / "data" / "replay_matmul128.jsonl.gz"


def test_the_gradient_follows_ansors_formula() -> None:
    curve = [(10, 4e-3), (20, 3e-3), (30, 2.5e-3)]
    a = TaskState(flops=10**9, weight=2, kind="conv", trials=30, history=curve)
    b = TaskState(flops=10**9, weight=1, kind="conv", trials=10, history=[(10, 1e-3)])
    sched = TaskScheduler([a, b], alpha=0.2, beta=2.0, window=3)
    backward = (2.5e-3 - 4e-3) / 20
    # the best similar speed is b's 1e12 FLOP/s: a could reach 2 * 1e9 / 1e12 = 2e-3 s
    forward = min(-2.5e-3 / 30, 2e-3 - 2.5e-3)
    assert sched.gradient(0) == pytest.approx(2 * (0.2 * backward + 0.8 * forward))
    assert sched.gradient(1) == pytest.approx(1 * 0.8 * min(-1e-3 / 10, 2e-3 - 1e-3))
    assert sched.latency() == pytest.approx(2 * 2.5e-3 + 1e-3)
    no_program = TaskState(flops=1, weight=1, kind="x", trials=4)
    assert TaskScheduler([no_program]).gradient(0) == -math.inf
    with pytest.raises(ValueError, match="scheduler 'greedy'; schedulers: gradient, round-robin"):
        TaskScheduler([a], "greedy")


@pytest.fixture(scope="module")
def replay() -> ReplayLog:
    return ReplayLog(DATA)


def _run(replay: ReplayLog, strategy: str, budget: int, weights: tuple[int, ...]) -> TaskScheduler:
    """Schedule tasks that each tune the replayed matmul (its own tuner), with these weights."""
    flops = replay.task.flops()
    states = [TaskState(flops, w, "matmul") for w in weights]
    tuners = [make_tuner("random", replay.task, LogSpace(replay), seed=i) for i in range(len(weights))]
    device = ReplayRunner(replay)

    def tune_round(i: int, n: int) -> tuple[int, float]:
        tuners[i].tune(tuners[i].trials + n, device.measure, batch_size=n)
        return tuners[i].trials, tuners[i].best_cost

    sched = TaskScheduler(states, strategy, round_trials=4, epsilon=0.0, seed=0)
    sched.run(budget, tune_round)
    assert not device.misses
    return sched


def test_every_task_gets_a_warm_up_round_first(replay: ReplayLog) -> None:
    for strategy in ("gradient", "round-robin"):
        sched = _run(replay, strategy, 24, (1, 1, 1))
        assert [r.task for r in sched.rounds[:3]] == [0, 1, 2]
        assert sched.total_trials() == 24


@pytest.mark.parametrize("slots", [1, 2])
def test_a_budget_smaller_than_a_round_per_task_still_gives_each_task_a_trial(slots: int) -> None:
    states = [TaskState(100, 1, "a") for _ in range(4)]
    given: list[tuple[int, int]] = []

    def tune_round(i: int, n: int) -> tuple[int, float]:
        given.append((i, n))
        return states[i].trials + n, 1e-3

    TaskScheduler(states, round_trials=4, epsilon=0.0).run(5, tune_round, slots=slots)
    assert sorted(i for i, _ in given) == [0, 1, 2, 3] and sum(n for _, n in given) == 5
    assert [t.trials for t in states] == [1, 1, 1, 2]


def test_round_robin_shares_evenly_and_gradient_favours_the_heavy_task(replay: ReplayLog) -> None:
    weights = (1, 8, 1)
    even = _run(replay, "round-robin", 60, weights)
    assert [t.trials for t in even.tasks] == [20, 20, 20]
    grad = _run(replay, "gradient", 60, weights)
    trials = [t.trials for t in grad.tasks]
    assert sum(trials) == 60 and trials[1] > trials[0] and trials[1] > trials[2]
    assert [r.latency for r in grad.rounds[3:]] == sorted((r.latency for r in grad.rounds[3:]), reverse=True)


def test_a_task_that_takes_no_more_trials_is_retired() -> None:
    states = [TaskState(100, 1, "a"), TaskState(100, 1, "a")]
    calls: list[int] = []

    def tune_round(i: int, n: int) -> tuple[int, float]:
        calls.append(i)
        done = states[i].trials + (n if i == 1 else 0)  # task 0's space is empty
        return done, 1e-3

    sched = TaskScheduler(states, round_trials=5, epsilon=0.0)
    sched.run(20, tune_round)
    assert calls == [0, 1, 1, 1, 1] and sched.total_trials() == 20


#: tunes a 3-task MLP in a child process, listing that process's children (the build and measure
#: workers) at every round and after the run; argv: tests dir, log, round at which to send SIGINT
_POOLS_SCRIPT = """
import json, os, signal, sys
sys.path.insert(0, sys.argv[1])
import graph_models as gm
import autosched as asc
from autosched.runner.measure import MeasureOption

def children():
    pids = set()
    for thread in os.listdir(f"/proc/{os.getpid()}/task"):
        with open(f"/proc/{os.getpid()}/task/{thread}/children") as f:
            pids |= {int(p) for p in f.read().split()}
    return sorted(pids)

rounds, stop = [], int(sys.argv[3])
def each(r):
    rounds.append(children())
    if len(rounds) == stop:
        os.kill(os.getpid(), signal.SIGINT)

graph = asc.from_onnx(gm.mlp(batch=2, dims=(8, 16, 4)))
option = MeasureOption(repeat=1, min_repeat_ms=1)
try:
    asc.tune_network(graph, trials=6, log=sys.argv[2], round_trials=2, tuner="random", option=option,
                     callback=each)
    how = "done"
except KeyboardInterrupt:
    how = "interrupted"
print(json.dumps({"how": how, "rounds": rounds, "after": children()}))
"""


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.requires("gcc")
def test_tune_network_keeps_one_pair_of_workers_and_stops_them_on_interrupt(tmp_path: Path) -> None:
    pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
    tests = Path(__file__).parents[1]
    env = {**os.environ, "PYTHONPATH": str(tests.parent)}
    args = [sys.executable, "-c", _POOLS_SCRIPT, str(tests), str(tmp_path / "mlp.jsonl"), "2"]
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    workers = report["rounds"][0]
    assert len(workers) == 2  # the build worker and the measure worker
    assert report["how"] == "interrupted"  # by SIGINT after the second of three rounds
    assert report["rounds"] == [workers, workers]  # the same two processes in both rounds
    assert report["after"] == []
    assert not any(_running(pid) for pid in workers)


def test_calibration_makes_the_estimate_the_measured_latency_and_weighs_tasks_by_it() -> None:
    a = TaskState(flops=10**9, weight=2, kind="conv", trials=8, history=[(8, 1e-3)])
    b = TaskState(flops=10**9, weight=1, kind="conv", trials=8, history=[(8, 1e-3)])
    sched = TaskScheduler([a, b], epsilon=0.0)
    assert sched.latency() == sched.kernels_latency() == pytest.approx(3e-3)
    before = sched.gradient(1) / sched.gradient(0)
    sched.calibrate([2.4e-3, 3e-3], total=6e-3)  # b's kernel runs 3x slower in the network than alone
    assert (a.scale, b.scale) == (pytest.approx(1.2), pytest.approx(3.0))
    assert sched.overhead == pytest.approx(0.6e-3) and sched.latency() == pytest.approx(6e-3)
    assert sched.kernels_latency() == pytest.approx(3e-3)
    assert sched.gradient(1) / sched.gradient(0) == pytest.approx(before * 3.0 / 1.2)
    sched.record(0, 16, 0.5e-3)  # a improves: the estimate follows it at its in-network scale
    assert sched.latency() == pytest.approx(2 * 1.2 * 0.5e-3 + 3e-3 + 0.6e-3)
    with pytest.raises(ValueError, match="2 tasks"):
        sched.calibrate([1e-3], total=1e-3)


def test_every_task_gets_its_warm_up_trials_before_the_gradient_chooses() -> None:
    states = [TaskState(100, w, "a") for w in (1, 50, 1)]
    given: list[tuple[int, int]] = []

    def tune_round(i: int, n: int) -> tuple[int, float]:
        given.append((i, n))
        return states[i].trials + n, 1e-3 / (states[i].trials + n)

    TaskScheduler(states, round_trials=4, epsilon=0.0, warmup=8).run(40, tune_round)
    assert given[:6] == [(0, 4), (1, 4), (2, 4), (0, 4), (1, 4), (2, 4)]  # fewest trials first
    assert [t.trials for t in states][0] == 8 and states[2].trials == 8 and states[1].trials == 24
