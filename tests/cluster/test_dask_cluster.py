"""Tuning on a real Dask cluster: a scheduler and ``autosched worker`` processes on 127.0.0.1.

One build worker and two measuring workers (``--device local``), each with its own kernel cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.cluster import ClusterUnavailable, DaskExecutor
from autosched.database.machine import fingerprint_for
from autosched.records import is_remeasurement, load_records
from autosched.runner.measure import MeasureOption
from autosched.search.final import ROUNDS
from autosched.search.tune import TuneResult

distributed = pytest.importorskip("distributed", reason='pip install "dask[distributed]"')

from dask_cluster import ROOT, Lab, tasks_by_worker, two_devices  # noqa: E402

pytestmark = pytest.mark.requires("gcc")

FAST = MeasureOption(repeat=2, min_repeat_ms=2.0, run_timeout=20.0, build_timeout=60.0)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with two_devices(tmp_path_factory.mktemp("dask")) as the_lab:
        yield the_lab


def best_matches_numpy(task: asc.Task, log: Path) -> None:
    """The log's best program, built here, computes what the workload's reference does."""
    kernel = asc.load_best(log, task)
    data = task.workload.random_inputs(7)
    outs = [np.full(t.shape, np.nan, t.dtype) for t in task.workload.outputs]
    kernel(*data, *outs)
    for got, want in zip(outs, task.workload.reference(*data), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_cli_tunes_on_the_cluster_and_builds_never_share_a_measuring_worker(lab: Lab, tmp_path: Path) -> None:
    log = tmp_path / "mm.jsonl"
    with distributed.get_task_stream(lab.client) as stream:
        done = subprocess.run(
            [sys.executable, "-m", "autosched", "tune", "matmul", "24", "20", "16",
             "--target", "c -num-threads=1",
             "--trials", "6", "--tuner", "random", "--seed", "1", "--log", str(log), "--repeat", "2",
             "--min-repeat-ms", "2", "--remeasure", "1", "--cluster", lab.address, "--json", "--quiet"],
            capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(ROOT), **os.environ},
        )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["trials"] == 6 and summary["valid_trials"] == 6, summary
    task = asc.Task("matmul", (24, 20, 16), target="c -num-threads=1")
    records = [r for r in load_records(log) if not is_remeasurement(r)]
    assert len(records) == 6 and len({r.program_key for r in records}) == 6 and all(r.ok for r in records)
    best_matches_numpy(task, log)

    builds = tasks_by_worker(stream.data, "asc-build")
    measures = tasks_by_worker(stream.data, "asc-measure")
    measuring = {lab.address_of("m1"), lab.address_of("m2")}
    again = [r for r in load_records(log) if is_remeasurement(r)]  # the best, and the default if not it
    assert len(again) in (1, 2) and sum(len(s) for s in builds.values()) >= 6
    passes = 1 if len(again) == 1 else ROUNDS  # several programs: their repeats in interleaved passes
    assert sum(len(s) for s in measures.values()) == 6 + len(again) * passes
    assert set(measures) <= measuring and not set(builds) & measuring  # builds only on the build worker
    for spans in measures.values():  # one measurement at a time per device (the scheduler shifts
        spans.sort()  # each report by its latest estimate of the worker's clock offset: a few ms)
        assert all(a[1] <= b[0] + 0.05 for a, b in zip(spans, spans[1:], strict=False)), spans


def test_a_user_workload_tunes_on_the_cluster(lab: Lab, tmp_path: Path) -> None:
    @asc.workload("test_dask_stencil", override=True)
    def stencil(n: int) -> list[asc.Tensor]:  # defined here: the workers never see it, only C source
        x = asc.placeholder((n,), name="x")
        y = asc.compute((n - 2,), lambda i: x[i] - 2.0 * x[i + 1] + x[i + 2], name="lap")
        return [x, y]

    task = asc.Task("test_dask_stencil", (500,), target="c -num-threads=1")
    log = tmp_path / "st.jsonl"
    result = asc.tune(task, trials=5, log=log, tuner="random", seed=0, option=FAST, remeasure=0,
                      cluster=lab.client)
    assert (result.trials, result.valid_trials) == (5, 5), result.errors
    assert {r.machine for r in load_records(log)} == {fingerprint_for(task.target)}  # asked of the workers
    best_matches_numpy(task, log)


def test_a_killed_worker_costs_no_trial_and_no_measuring_worker_stops_the_run(
    lab: Lab, tmp_path: Path
) -> None:
    task = asc.Task("matmul", (16, 24, 20), target="c -num-threads=1")
    log = tmp_path / "kill.jsonl"
    m1, m2 = (next(p for p in lab.workers if name in p.args) for name in ("m1", "m2"))
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["result"] = asc.tune(task, trials=8, log=log, tuner="random", seed=3, option=FAST,
                                         remeasure=0, cluster=lab.address, batch_size=4)
        except Exception as e:  # the assertion below shows it
            outcome["error"] = f"{type(e).__name__}: {e}"

    tuning = threading.Thread(target=run)
    tuning.start()
    deadline = time.monotonic() + 60
    while not (log.exists() and log.read_text().count("\n") >= 2):  # in the middle of the run
        assert time.monotonic() < deadline and tuning.is_alive(), outcome
        time.sleep(0.05)
    lab.kill(m1)
    tuning.join(120)
    result = outcome.get("result", outcome)
    assert isinstance(result, TuneResult)
    assert (result.trials, result.valid_trials, result.new_trials) == (8, 8, 8), result.errors
    records = load_records(log)
    assert len(records) == 8 and len({r.program_key for r in records}) == 8 and all(r.ok for r in records)

    lab.kill(m2)  # no measuring worker left: a clear stop, nothing logged
    stop = "no worker .* can measure c programs .* run the same command again to resume"
    with pytest.raises(ClusterUnavailable, match=stop):
        asc.tune(task, trials=11, log=log, tuner="random", seed=4, option=FAST, remeasure=0,
                 cluster=DaskExecutor(lab.address, worker_timeout=2.0))
    assert len(load_records(log)) == 8

    lab.start("--device", "local", name="m3")  # resumes from the log
    again = asc.tune(task, trials=11, log=log, tuner="random", seed=4, option=FAST, remeasure=0,
                     cluster=lab.client)
    assert (again.trials, again.resumed_trials, again.new_trials, again.valid_trials) == (11, 8, 3, 11)
    records = load_records(log)
    assert len(records) == 11 and len({r.program_key for r in records}) == 11
    best_matches_numpy(task, log)


def test_a_network_tunes_on_the_cluster(lab: Lab, tmp_path: Path) -> None:
    pytest.importorskip("onnx", reason="pip install onnx")
    import graph_models as gm

    graph = asc.from_onnx(gm.mlp(batch=2, dims=(8, 16, 4)))
    log = tmp_path / "mlp.jsonl"
    result = asc.tune_network(graph, trials=3, log=log, round_trials=1, tuner="random", option=FAST,
                              cluster=lab.address)
    assert [t["trials"] for t in result.tasks] == [1, 1, 1]
    assert all(t["best_ms"] is not None for t in result.tasks), result.tasks
    records = [r for r in load_records(log) if not is_remeasurement(r)]  # trials, not re-measurements
    assert len(records) == 3 and all(r.ok for r in records) and len({r.workload_key for r in records}) == 3
    x = np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)
    net = asc.build_network(graph, log=log)
    assert all(b.tuned for b in net.built)
    np.testing.assert_allclose(net(x), asc.build_network(graph)(x), rtol=1e-4, atol=1e-6)
