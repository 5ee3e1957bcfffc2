"""A Dask cluster over TLS (a scheduler on tls://127.0.0.1, an ``autosched worker`` with the
``--tls-*`` flags, certificates made by ``Security.temporary()``), and task data over 10 MB sent
once per task without Dask's large-graph warning."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import autosched as asc
from autosched.cli import main
from autosched.cluster import ClusterUnavailable, DaskCluster
from autosched.cluster.connection import tls_security
from autosched.records import load_records
from autosched.runner.measure import MeasureOption

distributed = pytest.importorskip("distributed", reason='pip install "dask[distributed]"')
pytest.importorskip("cryptography", reason="pip install cryptography (Security.temporary)")

from dask_cluster import Lab  # noqa: E402

pytestmark = pytest.mark.requires("gcc")

FAST = MeasureOption(repeat=2, min_repeat_ms=2.0, run_timeout=20.0)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Lab, dict[str, Path]]]:
    folder = tmp_path_factory.mktemp("tls")
    security = distributed.security.Security.temporary()
    files = {}  # the certificates as files, as a user has them (temporary() holds them in memory)
    for name, pem in (("ca", security.tls_ca_file), ("cert", security.tls_worker_cert),
                      ("key", security.tls_worker_key)):  # fmt: skip
        files[name] = folder / f"{name}.pem"
        files[name].write_text(pem)
        files[name].chmod(0o600)
    lab = Lab(folder / "dask", security)
    try:
        lab.start("--device", "local", "--tls-ca-file", str(files["ca"]), "--tls-cert", str(files["cert"]),
                  "--tls-key", str(files["key"]), name="m1")  # fmt: skip
        yield lab, files
    finally:
        lab.close()


TlsLab = tuple[Lab, dict[str, Path]]


def test_tune_over_tls_from_the_api_and_the_command_line(tls: TlsLab, tmp_path: Path) -> None:
    lab, files = tls
    assert lab.address.startswith("tls://")
    task = asc.Task("matmul", (16, 12, 20), target="c -num-threads=1")
    log = tmp_path / "mm.jsonl"
    security = tls_security(str(files["ca"]), str(files["cert"]), str(files["key"]), "client")
    result = asc.tune(task, trials=3, log=log, tuner="random", seed=1, option=FAST, remeasure=0,
                      cluster=lab.address, security=security)
    assert (result.trials, result.valid_trials) == (3, 3), result.errors
    flags = ["--tls-ca-file", str(files["ca"]), "--tls-cert", str(files["cert"]),
             "--tls-key", str(files["key"])]  # fmt: skip
    status = main(["tune", "matmul", "16", "12", "20", "--target", "c -num-threads=1", "--trials", "5",
                   "--tuner", "random", "--seed", "2", "--log", str(log), "--repeat", "2", "--min-repeat-ms",
                   "2", "--remeasure", "0", "--cluster", lab.address, "--quiet", *flags])  # fmt: skip
    assert status == 0
    records = load_records(log)
    assert len(records) == 5 and all(r.ok for r in records)


def test_tls_mistakes_are_one_line_errors(tls: TlsLab, capsys: pytest.CaptureFixture[str]) -> None:
    lab, files = tls
    plain = lab.address.replace("tls://", "tcp://")
    with pytest.raises(ClusterUnavailable, match="if the scheduler uses TLS") as no:
        DaskCluster(plain, connect_timeout=5.0)
    assert str(no.value).count("\n") == 0
    with pytest.raises(ClusterUnavailable, match="needs TLS settings") as no:
        DaskCluster(lab.address, connect_timeout=5.0)
    assert str(no.value).count("\n") == 0
    bad = main(["tune", "matmul", "8", "8", "8", "--cluster", lab.address, "--tls-ca-file", str(files["ca"]),
                "--tls-cert", "/nonexistent/$(id).pem", "--log", "x.jsonl"])  # fmt: skip
    err = capsys.readouterr().err
    assert bad == 2 and err.startswith("autosched: error: --tls-cert: no such file") and err.count("\n") == 1


@pytest.fixture
def restore_environ() -> Iterator[None]:
    saved = dict(os.environ)  # a nanny sets OMP_NUM_THREADS=1 & co. in the process that starts it
    yield
    os.environ.clear()
    os.environ.update(saved)


def test_task_data_over_10_mb_goes_once_without_a_large_graph_warning(
    restore_environ: None, tmp_path: Path
) -> None:
    task = asc.Task("relu", (1536, 2048), target="c -num-threads=1")  # 12 MiB in, 12 MiB expected out
    log = tmp_path / "relu.jsonl"
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
        env={"AUTOSCHED_CACHE": str(tmp_path / "worker-cache")},
    ) as cluster, distributed.Client(cluster, set_as_default=False) as client, warnings.catch_warnings(
        record=True
    ) as caught:
        warnings.simplefilter("always")
        result = asc.tune(task, trials=3, log=log, tuner="random", seed=0, option=FAST, remeasure=0,
                          cluster=client, batch_size=3)
    assert (result.trials, result.valid_trials) == (3, 3), result.errors
    large = [str(w.message) for w in caught if "large graph" in str(w.message).lower()]
    assert large == []
