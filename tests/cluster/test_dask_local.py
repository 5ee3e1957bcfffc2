"""A plain ``distributed.LocalCluster`` (workers that declare nothing), the builder's cache, errors."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import autosched as asc
from autosched.boards import Board, BoardInfo
from autosched.cli import main
from autosched.cluster import ClusterUnavailable, DaskCluster, DaskExecutor
from autosched.cluster.board_work import board_resources
from autosched.cluster.connection import board_placements, build_placement, measure_placement, tls_security
from autosched.cluster.dask_worker import WorkerPlan, plan
from autosched.cluster.parts import DaskBuilder, DaskRunner
from autosched.cluster.work import build_on_worker
from autosched.records import load_records
from autosched.runner.compile import default_cache_dir
from autosched.runner.measure import MeasureErrorNo, MeasureInput, MeasureOption

distributed = pytest.importorskip("distributed", reason='pip install "dask[distributed]"')

FAST = MeasureOption(repeat=2, min_repeat_ms=2.0, run_timeout=20.0)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[distributed.Client]:
    workers_cache = tmp_path_factory.mktemp("worker-cache")  # not this process's kernel cache
    saved = dict(os.environ)  # a nanny sets OMP_NUM_THREADS=1 & co. in the process that starts it
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=True, host="127.0.0.1", dashboard_address=None,
        env={"AUTOSCHED_CACHE": str(workers_cache)},
    ) as cluster, distributed.Client(cluster, set_as_default=False) as client:
        yield client
    os.environ.clear()  # later tests in this process (kernel timings, nproc) see the real limits
    os.environ.update(saved)


@pytest.mark.requires("gcc")
def test_a_plain_cluster_tunes_and_the_local_cache_is_asked_first(
    plain: distributed.Client, tmp_path: Path
) -> None:
    task = asc.Task("matmul", (20, 12, 28), target="c -num-threads=1")
    log = tmp_path / "mm.jsonl"
    result = asc.tune(task, trials=4, log=log, tuner="random", seed=2, option=FAST, remeasure=0,
                      cluster=plain)
    assert (result.trials, result.valid_trials) == (4, 4), result.errors
    records = load_records(log)
    assert len(records) == 4 and all(r.ok and len(r.costs) == 2 for r in records)
    assert DaskRunner(DaskCluster(plain), FAST).devices() == 1  # a plain worker measures, one at a time

    builder = DaskBuilder(DaskCluster(plain), timeout=60.0)
    inputs = [MeasureInput(task, r.steps) for r in records]
    builds = builder.build(inputs)  # every library came back as bytes into this process's cache
    assert builder.remote_builds == 0
    assert all(Path(b.lib_path or "").parent == default_cache_dir() for b in builds)

    bad = plain.submit(build_on_worker, "int broken( {", "c", 30.0, pure=False).result(timeout=60)
    assert bad.error_no == MeasureErrorNo.COMPILE_ERROR and bad.blob is None and "broken" in bad.error_msg


def test_where_work_goes() -> None:
    plain = {"tcp://a:1": {}, "tcp://b:1": {}}
    assert measure_placement(plain, "c")[0] == {} and build_placement(plain)[0] == {}
    mixed = {"tcp://a:1": {"measure-c": 1.0}, "tcp://b:1": {}}
    where, able = measure_placement(mixed, "c")
    assert where == {"resources": {"measure-c": 1}} and able(mixed) and not able({"tcp://b:1": {}})
    assert build_placement(mixed)[0] == {"workers": ["tcp://b:1"]}
    declared = {"tcp://a:1": {"measure-c": 1.0}, "tcp://b:1": {"build": 1.0}}
    assert build_placement(declared)[0] == {"resources": {"build": 1}}
    builders_only = {"tcp://b:1": {"build": 1.0}}  # measurements wait for a measuring worker
    where, able = measure_placement(builders_only, "c")
    assert where == {"resources": {"measure-c": 1}} and not able(builders_only)


def test_bad_cluster_addresses_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="not a Dask scheduler address"):
        DaskExecutor("tcp://host:1; touch PWNED")
    with pytest.raises(ClusterUnavailable, match="cannot reach the Dask scheduler tcp://127.0.0.1:9"):
        DaskCluster("tcp://127.0.0.1:9", connect_timeout=1.0)
    with pytest.raises(TypeError, match="scheduler address or a distributed.Client"):
        DaskCluster(8786)
    assert main(["tune", "matmul", "8", "8", "8", "--cluster", "$(id)", "--log", "x.jsonl"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("autosched: error: not a Dask scheduler address") and err.count("\n") == 1


def test_worker_plans() -> None:
    assert plan("local") == WorkerPlan({"measure-c": 1}, 1, {})
    gpu = plan(gpu=1)
    assert gpu.resources == {"measure-cuda": 1, "measure-opencl": 1} and gpu.nthreads == 1
    assert gpu.env == {"CUDA_VISIBLE_DEVICES": "1"}
    assert plan(nthreads=3) == WorkerPlan({"build": 1}, 3, {})
    with pytest.raises(ValueError, match="only 'local'"):
        plan("board7")
    with pytest.raises(ValueError, match="not both"):
        plan("local", gpu=0)


def test_board_workers_resources_and_where_board_measurements_go(tmp_path: Path) -> None:
    info = BoardInfo("x86_64", "a CPU", 4)
    arm = Board("rpi4", "c -cc=aarch64-linux-gnu-gcc -mcpu=cortex-a72")
    assert board_resources(arm, info) == {"measure-c-aarch64": 1, "board-rpi4": 1}  # its target's arch
    assert board_resources(Board("srv"), info) == {"measure-c-x86_64": 1, "board-srv": 1}  # the board's own
    workers = {"tcp://b:1": {"build": 1.0}, "tcp://c:1": {"measure-c": 1.0},
               "tcp://r:1": {"measure-c-aarch64": 1.0, "board-rpi4": 1.0}}  # fmt: skip
    wheres, able = board_placements("c-aarch64", ())
    assert wheres == [{"resources": {"measure-c-aarch64": 1}}] and able(workers)
    assert not able({a: r for a, r in workers.items() if a != "tcp://r:1"})  # a local CPU cannot
    wheres, able = board_placements("c-aarch64", ("rpi4", "rpi5"))
    assert wheres == [{"resources": {"board-rpi4": 1}}, {"resources": {"board-rpi5": 1}}]
    assert not able(workers) and able({**workers, "tcp://s:1": {"board-rpi5": 1.0}})
    assert build_placement(workers)[0] == {"resources": {"build": 1}}  # never a board worker
    measuring = {a: r for a, r in workers.items() if a != "tcp://b:1"}
    assert build_placement(measuring)[0] == {"workers": ["tcp://c:1"]}  # a local CPU may build, a board not
    where, able = build_placement({"tcp://r:1": workers["tcp://r:1"]})
    assert where == {"resources": {"build": 1}} and not able(measuring) and able(workers)


def test_tls_settings_from_files_are_checked(tmp_path: Path) -> None:
    assert tls_security(None, None, None, "client") is None  # Dask's configuration applies
    with pytest.raises(ValueError, match="TLS needs --tls-ca-file and --tls-cert"):
        tls_security(None, str(tmp_path / "c.pem"), None, "client")
    with pytest.raises(ValueError, match="--tls-ca-file: no such file") as no:
        tls_security(str(tmp_path / "ca\n$(id).pem"), str(tmp_path / "c.pem"), None, "worker")
    assert "\n" not in str(no.value)
    with pytest.raises(ValueError, match="security= goes with a cluster address"):
        asc.tune(asc.Task("matmul", (8, 8, 8)), trials=1, log=False, security=object())
