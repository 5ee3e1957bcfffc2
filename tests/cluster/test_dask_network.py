"""Several tasks of a network tuned at once on a real Dask cluster: a scheduler and ``autosched
worker`` processes on 127.0.0.1 (one build worker, two measuring workers, each with its own kernel
cache). The rounds run in threads of this process, with the default model-guided tuner."""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.cluster import DaskCluster
from autosched.cluster.parts import DaskRunner, data_key
from autosched.graph import GraphBuilder, network_tasks
from autosched.records import is_remeasurement, load_records
from autosched.runner.measure import MeasureOption
from autosched.search.learning import sidecar_path
from autosched.search.scheduler import Round
from autosched.search.tune import TuningInterrupted

distributed = pytest.importorskip("distributed", reason='pip install "dask[distributed]"')

from dask_cluster import Lab, two_devices  # noqa: E402

pytestmark = pytest.mark.requires("gcc")

#: measurements long enough (3 x 30 ms) for rounds of two tasks to meet on the two devices
OPTION = MeasureOption(repeat=3, min_repeat_ms=30.0, run_timeout=20.0, build_timeout=60.0)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with two_devices(tmp_path_factory.mktemp("dask-net"), build_threads=2) as the_lab:
        yield the_lab


def trials_in(log: Path) -> list[asc.records.Record]:
    """The log's trials (the final re-measurements of each task's best programs left out)."""
    return [r for r in load_records(log) if not is_remeasurement(r)]


def _mlp() -> tuple[asc.graph.Graph, dict[str, np.ndarray]]:
    """Two dense + bias + ReLU layers (their default schedules have one program key) and a softmax:
    three tasks."""
    rng = np.random.default_rng(5)
    w = {"w1": rng.standard_normal((48, 32)).astype(np.float32) / 6,
         "b1": rng.standard_normal(48).astype(np.float32),
         "w2": rng.standard_normal((24, 48)).astype(np.float32) / 7,
         "b2": rng.standard_normal(24).astype(np.float32)}
    g = GraphBuilder("mlp_at_once")
    x = g.input("x", (6, 32))
    hidden = g.relu(g.dense(x, g.constant(w["w1"], "w1"), g.constant(w["b1"], "b1")))
    g.output(g.softmax(g.relu(g.dense(hidden, g.constant(w["w2"], "w2"), g.constant(w["b2"], "b2")))))
    return g.build(), w


def _numpy(x: np.ndarray, w: dict[str, np.ndarray]) -> np.ndarray:
    hidden = np.maximum(x.astype(np.float64) @ w["w1"].T + w["b1"], 0.0)
    logits = np.maximum(hidden @ w["w2"].T + w["b2"], 0.0)
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _overlaps(stream: list[dict[str, object]]) -> list[tuple[str, str]]:
    """(task tag, task tag) of measurements of two different tasks that ran at the same time on two
    different workers (at least 10 ms of overlap)."""
    spans = []  # (worker, task tag, start, stop)
    for rec in stream:
        key = str(rec["key"])
        if key.startswith("asc-measure-"):
            for s in rec["startstops"]:  # type: ignore[attr-defined]
                if s["action"] == "compute":
                    spans.append((rec["worker"], key.split("-")[2], s["start"], s["stop"]))
    return [(a[1], b[1]) for a in spans for b in spans
            if a[0] != b[0] and a[1] != b[1] and min(a[3], b[3]) - max(a[2], b[2]) > 0.01]


def test_two_tasks_are_measured_at_once_on_two_devices(lab: Lab, tmp_path: Path) -> None:
    graph, w = _mlp()
    tasks = network_tasks(graph, "c -num-threads=1")
    assert len(tasks) == 3
    log = tmp_path / "net.jsonl"
    with distributed.get_task_stream(lab.client) as stream:
        result = asc.tune_network(graph, trials=26, log=log, round_trials=5, target="c -num-threads=1",
                                  option=OPTION, cluster=lab.address)
    assert DaskRunner(DaskCluster(lab.client), OPTION).devices() == 2  # m1 and m2, not the builder
    tags = {data_key(t, 0)[:8]: i for i, t in enumerate(tasks)}
    met = _overlaps(stream.data)
    assert met, "no two tasks were measured at the same time"
    assert all(a in tags and b in tags for a, b in met)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a broken or interleaved line would be a warning
        records = trials_in(log)
    assert len(records) == 26 and all(r.ok for r in records)
    for i, task in enumerate(tasks):  # each task measured exactly what the scheduler gave it
        mine = [r for r in records if r.workload_key == task.workload.key]
        given = sum(r.given for r in result.rounds if r.task == i)
        assert len(mine) == given == result.tasks[i]["trials"] and len({r.program_key for r in mine}) == given
        assert (mine[0].program or {}).get("space") == "default"  # first: the default schedule
    assert sum(r.given for r in result.rounds) == 26 and result.rounds[-1].total_trials == 26
    quality = sidecar_path(log)  # the cost models' sidecar: whole lines too, if any model was fitted
    if quality.exists():
        assert all(isinstance(json.loads(line), dict) for line in quality.read_text().splitlines())

    x = np.random.default_rng(2).standard_normal((6, 32)).astype(np.float32)
    net = asc.build_network(graph, log=log, target="c -num-threads=1")
    assert all(b.tuned for b in net.built)
    np.testing.assert_allclose(net(x), _numpy(x, w), rtol=1e-4, atol=1e-6)

    again = asc.tune_network(graph, trials=29, log=log, round_trials=5, target="c -num-threads=1",
                             option=OPTION, cluster=lab.client)  # resumes from the log
    assert sum(r.given for r in again.rounds) == 3 and len(trials_in(log)) == 29
    assert [t["trials"] for t in again.tasks] == [
        len([r for r in trials_in(log) if r.workload_key == t.workload.key]) for t in tasks
    ]


def test_an_interrupt_halts_every_round_and_the_run_resumes(lab: Lab, tmp_path: Path) -> None:
    graph, _ = _mlp()
    log = tmp_path / "stop.jsonl"

    def interrupt(r: Round) -> None:  # Ctrl-C in the calling thread as the first round ends
        raise KeyboardInterrupt

    with pytest.raises(TuningInterrupted, match="stop.jsonl: run the same command again to resume"):
        asc.tune_network(graph, trials=15, log=log, round_trials=5, target="c -num-threads=1", tuner="random",
                         option=OPTION, cluster=lab.client, callback=interrupt)
    assert not [t for t in threading.enumerate() if t.name.startswith("asc-round")]
    records = trials_in(log)
    assert 5 <= len(records) < 15 and all(r.ok for r in records)

    result = asc.tune_network(graph, trials=15, log=log, round_trials=5, target="c -num-threads=1",
                              tuner="random", option=OPTION, cluster=lab.client)
    records = trials_in(log)
    assert len(records) == 15 and sum(t["trials"] for t in result.tasks) == 15
    for task, summary in zip(network_tasks(graph, "c -num-threads=1"), result.tasks, strict=True):
        mine = [r for r in records if r.workload_key == task.workload.key]
        assert len(mine) == summary["trials"] == len({r.program_key for r in mine})
