"""SSH boards behind Dask workers: a real sshd on 127.0.0.1 standing in for an aarch64 board (its
login runs aarch64 binaries through qemu-aarch64), an ``autosched worker --board`` subprocess in
front of it, a build worker and a local-CPU worker, a real scheduler; tuning a cross target with
``--cluster`` measures only on the board and builds only on the build worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sshd_board import SshLab

import autosched as asc
from autosched.boards import SSH_CONFIG_ENV, Board
from autosched.boards.session import BoardSession
from autosched.cli import main
from autosched.cluster import ClusterUnavailable, DaskExecutor
from autosched.cluster.work import build_executable_on_worker
from autosched.records import is_remeasurement, load_records
from autosched.runner.compile import compiler_version
from autosched.runner.measure import MeasureErrorNo, MeasureOption
from autosched.search.final import ROUNDS

distributed = pytest.importorskip("distributed", reason='pip install "dask[distributed]"')

from dask_cluster import ROOT, Lab, tasks_by_worker  # noqa: E402

pytestmark = pytest.mark.requires("gcc", "sshd", "aarch64-linux-gnu-gcc", "qemu-aarch64")

TARGET = "c -cc=aarch64-linux-gnu-gcc -num-threads=1"
FAST = MeasureOption(repeat=2, min_repeat_ms=1.0, run_timeout=60.0)  # qemu on a noisy 2-core CI machine


class BoardLab:
    """The sshd stand-in board, its boards file, and the Dask cluster with its three workers."""

    def __init__(self, folder: Path) -> None:
        self.ssh = SshLab(folder / "ssh")
        self.ssh.add("board1")
        self.board = Board("board1", TARGET, self.ssh.workdir("dask"), ("qemu-aarch64",))
        self.boards_file = folder / "boards.toml"
        self.boards_file.write_text(
            f'[[board]]\nname = "board1"\ntarget = "{TARGET}"\nworkdir = "{self.board.workdir}"\n'
            'launcher = ["qemu-aarch64"]\n'
        )
        self.dask = Lab(folder / "dask")
        env = {SSH_CONFIG_ENV: str(self.ssh.ssh_config)}
        self.dask.start("--nthreads", "1", name="builder")
        self.dask.start("--device", "local", name="cpu")
        self.dask.start("--board", "board1", "--boards", str(self.boards_file), name="b1", env=env)

    def close(self) -> None:
        self.dask.close()
        self.ssh.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoardLab]:
    the_lab = BoardLab(tmp_path_factory.mktemp("dboard"))
    try:
        yield the_lab
    finally:
        the_lab.close()


def board_fingerprint(lab: BoardLab) -> str:
    """The board's machine fingerprint, read here over a session of our own."""
    session = BoardSession(lab.board, str(lab.ssh.ssh_config))
    try:
        return session.start().fingerprint(lab.board.launcher)
    finally:
        session.close()


def test_a_cross_target_tunes_on_the_board_worker_which_never_builds(lab: BoardLab, tmp_path: Path) -> None:
    log = tmp_path / "mm.jsonl"
    client = lab.dask.client
    resources = {w["name"]: w["resources"] for w in client.scheduler_info(n_workers=-1)["workers"].values()}
    assert resources["b1"] == {"measure-c-aarch64": 1, "board-board1": 1}, resources
    with distributed.get_task_stream(client) as stream:  # the tuning process has no compiler, no ssh
        done = subprocess.run(
            [sys.executable, "-m", "autosched", "tune", "matmul", "24", "20", "16", "--target", TARGET,
             "--trials", "5", "--tuner", "random", "--seed", "1", "--log", str(log), "--repeat", "2",
             "--min-repeat-ms", "1", "--remeasure", "1", "--cluster", lab.dask.address, "--json", "--quiet"],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT), "PATH": str(tmp_path / "no-tools")},
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["trials"] == 5 and summary["valid_trials"] == 5, summary
    records = load_records(log)  # each one checked against numpy's matmul in the tuning process
    assert len([r for r in records if not is_remeasurement(r)]) == 5 and all(r.ok for r in records)
    assert {r.machine for r in records} == {board_fingerprint(lab)}  # measured on the board
    assert {r.compiler for r in records} == {compiler_version("aarch64-linux-gnu-gcc").splitlines()[0]}

    board, cpu, builder = (lab.dask.address_of(n) for n in ("b1", "cpu", "builder"))
    builds = tasks_by_worker(stream.data, "asc-build")
    measures = tasks_by_worker(stream.data, "asc-measure")
    assert set(builds) == {builder} and sum(map(len, builds.values())) >= 5  # cross-compiled there
    again = len([r for r in records if is_remeasurement(r)])  # the fastest, and the default if slower
    passes = 1 if again == 1 else ROUNDS  # several programs: their 10 repeats in interleaved passes
    assert again in (1, 2) and set(measures) == {board} and len(measures[board]) == 5 + again * passes


def test_named_boards_measure_on_their_workers_and_an_absent_one_stops_clearly(
    lab: BoardLab, tmp_path: Path
) -> None:
    task = asc.Task("relu", (16, 24), target=TARGET)
    log = tmp_path / "relu.jsonl"
    status = main(["tune", "relu", "16", "24", "--target", TARGET, "--cluster", lab.dask.address,
                   "--board", "board1", "--trials", "3", "--tuner", "random", "--seed", "0",
                   "--log", str(log), "--repeat", "2", "--min-repeat-ms", "1", "--remeasure", "0",
                   "--quiet"])  # fmt: skip
    assert status == 0
    records = load_records(log)
    assert len(records) == 3 and all(r.ok for r in records)
    executor = DaskExecutor(lab.dask.address, worker_timeout=1.0, boards=["nowhere"])
    try:
        with pytest.raises(ClusterUnavailable, match="measure on the board.*--board nowhere"):
            asc.tune(task, trials=4, log=log, tuner="random", seed=0, option=FAST, remeasure=0,
                     cluster=executor)
    finally:
        executor.close()
    assert len(load_records(log)) == 3


def test_a_build_worker_without_the_cross_compiler_gives_a_compile_error(lab: BoardLab) -> None:
    future = lab.dask.client.submit(
        build_executable_on_worker, "int main(void) { return 0; }", "c -cc=aarch64-nowhere-linux-gnu-gcc",
        30.0, pure=False, resources={"build": 1},
    )  # fmt: skip
    art = future.result(timeout=60)
    assert art.error_no == MeasureErrorNo.COMPILE_ERROR and art.blob is None
    assert "build worker" in art.error_msg and "aarch64-nowhere-linux-gnu-gcc" in art.error_msg, art.error_msg
    assert art.error_msg.count("\n") == 0


def test_a_board_dropping_off_mid_run_costs_no_trial(lab: BoardLab, tmp_path: Path) -> None:
    server = lab.ssh.servers["board1"]
    task = asc.Task("matmul", (12, 16, 8), target=TARGET)
    log = tmp_path / "drop.jsonl"
    dropped = threading.Event()

    said = lab.dask.folder / "worker-b1.log"

    def back_once_the_worker_saw_it() -> None:
        deadline = time.monotonic() + 60.0
        while "trying again" not in said.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        server.start()

    def drop_after_first_batch(tuner: object, cands: object, results: object) -> None:
        if not dropped.is_set():
            dropped.set()
            server.kill()  # sshd and the worker's shared connection die
            threading.Thread(target=back_once_the_worker_saw_it, daemon=True).start()

    result = asc.tune(task, trials=8, log=log, tuner="random", seed=5, option=FAST, remeasure=0,
                      batch_size=4, cluster=lab.dask.address, callbacks=[drop_after_first_batch])
    assert dropped.is_set() and server.proc is not None and "trying again" in said.read_text()
    assert (result.trials, result.valid_trials) == (8, 8), result.errors  # nothing charged to a program
    assert len(load_records(log)) == 8


def test_the_board_session_ends_with_its_worker(lab: BoardLab) -> None:
    workdir = Path(lab.board.workdir)
    assert len(list(workdir.glob("run-*"))) == 1  # the worker's run directory on the board
    worker = next(p for p in lab.dask.workers if "b1" in p.args)
    worker.terminate()  # SIGTERM: the worker leaves the cluster and closes its session
    said = lab.dask.folder / "worker-b1.log"
    try:  # Dask's close waits up to 30 s for busy threads, the session's close up to 15 + 10 s
        status = worker.wait(90)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the board worker ran on 90 s after SIGTERM; its log ends:\n{said.read_text()[-3000:]}")
    assert status == 130 and "board board1: session closed in" in said.read_text()
    assert list(workdir.glob("run-*")) == []
