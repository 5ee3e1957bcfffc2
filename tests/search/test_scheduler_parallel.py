"""The task scheduler with several rounds at once (``slots`` > 1): what it hands out, to whom, and
how it stops. The rounds are served by :class:`FakeDevices`, a fake that only sleeps and counts (the
real end-to-end run on a Dask cluster is in test_dask_network.py). Also: program claims on a log
shared by tasks tuned at once (real OFD locks)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import autosched as asc
from autosched.graph import GraphBuilder
from autosched.search.scheduler import TaskScheduler, TaskState
from autosched.search.shared_log import SharedLog


class FakeDevices:
    """A fake measuring back end: a round of task i takes ``seconds`` and adds its trials, up to
    ``sizes[i]`` programs in all; it notes which tasks were in flight together."""

    def __init__(self, sched: TaskScheduler, sizes: list[int], seconds: float = 0.02) -> None:
        self.sched, self.sizes, self.seconds = sched, sizes, seconds
        self.lock = threading.Lock()
        self.flying: set[int] = set()
        self.most = 0
        self.started: list[int] = []
        self.halted = threading.Event()

    def __call__(self, i: int, n: int) -> tuple[int, float]:
        with self.lock:
            assert i not in self.flying, f"task {i} is in flight twice"
            self.flying.add(i)
            self.most = max(self.most, len(self.flying))
            self.started.append(i)
        try:
            time.sleep(self.seconds)
            trials = min(self.sched.tasks[i].trials + n, self.sizes[i])
            return trials, 1e-3 * (1 + i) / (1 + trials)
        finally:
            with self.lock:
                self.flying.discard(i)


def _scheduler(tasks: int, strategy: str = "gradient") -> TaskScheduler:
    states = [TaskState(10**6, 1 + i, "dense") for i in range(tasks)]
    return TaskScheduler(states, strategy, round_trials=4, seed=1)


@pytest.mark.parametrize("strategy", ["gradient", "round-robin"])
def test_rounds_of_different_tasks_run_at_once_and_spend_the_budget_exactly(strategy: str) -> None:
    sched = _scheduler(3, strategy)
    device = FakeDevices(sched, [100, 100, 100])
    sched.run(30, device, slots=2)
    assert device.most == 2  # two rounds at once, never one task twice (FakeDevices asserts it)
    assert device.started[:3] == [0, 1, 2]  # warm-up rounds first
    assert sched.total_trials() == 30 and sum(r.given for r in sched.rounds) == 30
    for i, task in enumerate(sched.tasks):  # each task got exactly what it was given
        assert task.trials == sum(r.given for r in sched.rounds if r.task == i)
    assert [r.total_trials for r in sched.rounds] == sorted(r.total_trials for r in sched.rounds)
    assert sched.rounds[-1].total_trials == 30


def test_trials_a_task_cannot_take_go_to_the_others() -> None:
    sched = _scheduler(3, "round-robin")
    device = FakeDevices(sched, [3, 100, 100])  # task 0's space holds 3 programs
    sched.run(25, device, slots=3)
    assert [t.trials for t in sched.tasks][0] == 3 and sched.total_trials() == 25
    given = sum(r.given for r in sched.rounds if r.task == 0)
    assert given >= 3 and device.started.count(0) == 2  # the round that added nothing retired it


def test_a_failed_round_halts_the_others_and_starts_no_new_one() -> None:
    sched = _scheduler(3)
    device = FakeDevices(sched, [100, 100, 100], seconds=0.05)
    halts: list[float] = []

    def failing(i: int, n: int) -> tuple[int, float]:
        if i == 1 and sched.tasks[1].trials > 0:
            raise RuntimeError("device lost")
        return device(i, n)

    with pytest.raises(RuntimeError, match="device lost"):
        sched.run(100, failing, slots=2, halt=lambda: halts.append(time.monotonic()))
    assert len(halts) == 1
    started = len(device.started)
    time.sleep(0.1)
    assert len(device.started) == started and not device.flying  # the round in flight was waited for
    assert not [t for t in threading.enumerate() if t.name.startswith("asc-round")]


def test_parallel_must_be_a_positive_int() -> None:
    g = GraphBuilder("tiny")
    g.output(g.relu(g.input("x", (2, 3))))
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match=f"parallel must be a positive int, got {bad!r}"):
            asc.tune_network(g.build(), trials=2, log=None, parallel=bad)  # type: ignore[arg-type]


def test_tasks_tuned_at_once_claim_a_shared_program_key_each(tmp_path: Path) -> None:
    log = tmp_path / "net.jsonl"
    log.touch()
    first, second = SharedLog(log, "fused_dense(4,48,32)", "c"), SharedLog(log, "fused_dense(4,24,48)", "c")
    again = SharedLog(log, "fused_dense(4,48,32)", "c")  # another run of the first task
    try:
        assert first.claim("4b146be4b37770e8fb89") and second.claim("4b146be4b37770e8fb89")
        assert not again.claim("4b146be4b37770e8fb89")  # one task's program is measured once
        first.release("4b146be4b37770e8fb89")
        assert again.claim("4b146be4b37770e8fb89")
    finally:
        for shared in (first, second, again):
            shared.close()
