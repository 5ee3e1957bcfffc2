"""A Dask cluster for tests: a scheduler in this process and ``autosched worker`` subprocesses.

Every worker has its own kernel cache, so a library reaches the tuning process only as bytes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import distributed

ROOT = Path(__file__).resolve().parents[1]


class Lab:
    """A scheduler (``LocalCluster`` without workers) and the worker processes started for it;
    with ``security``, on ``tls://``."""

    def __init__(self, folder: Path, security: distributed.security.Security | None = None) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        tls = {"security": security, "protocol": "tls://"} if security is not None else {}
        self.cluster = distributed.LocalCluster(
            n_workers=0, processes=True, host="127.0.0.1", dashboard_address=None, **tls
        )
        self.address = self.cluster.scheduler_address
        self.client = distributed.Client(self.address, set_as_default=False, security=security)
        self.workers: list[subprocess.Popen[bytes]] = []

    def start(self, *flags: str, name: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start ``autosched worker`` with ``flags`` and ``env``, its own kernel cache; wait until it
        joined."""
        cache, log = self.folder / f"cache-{name}", self.folder / f"worker-{name}.log"
        env = {**os.environ, **(env or {}), "PYTHONPATH": str(ROOT), "AUTOSCHED_CACHE": str(cache)}
        before = len(self.client.scheduler_info(n_workers=-1)["workers"])
        with log.open("wb") as err:  # the worker's messages, for a worker that does not join
            proc = subprocess.Popen(
                [sys.executable, "-m", "autosched", "worker", "--scheduler", self.address,
                 "--host", "127.0.0.1", "--name", name, *flags],
                env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
            )
        self.workers.append(proc)
        try:
            self.client.wait_for_workers(before + 1, timeout=60)
        except TimeoutError:
            raise RuntimeError(f"worker {name} did not join: {log.read_text()[-1000:]}") from None
        return proc

    def address_of(self, name: str) -> str:
        """The address of the worker named ``name``."""
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        return next(a for a, w in info.items() if w["name"] == name)

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL a worker process and wait until the scheduler has removed it."""
        count = len(self.client.scheduler_info(n_workers=-1)["workers"])
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 30
        while len(self.client.scheduler_info(n_workers=-1)["workers"]) >= count:
            assert time.monotonic() < deadline, "the scheduler did not notice a killed worker"
            time.sleep(0.1)

    def close(self) -> None:
        """Stop every worker (SIGTERM, then SIGKILL), the client and the scheduler."""
        for proc in self.workers:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.workers:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.client.close()
        self.cluster.close()


@contextmanager
def two_devices(folder: Path, build_threads: int = 1) -> Iterator[Lab]:
    """A lab with a build worker of ``build_threads`` threads and two measuring workers, ``m1`` and
    ``m2`` (``--device local``), stopped at the end."""
    lab = Lab(folder)
    try:
        lab.start("--nthreads", str(build_threads), name="builder")
        lab.start("--device", "local", name="m1")
        lab.start("--device", "local", name="m2")
        yield lab
    finally:
        lab.close()


def tasks_by_worker(stream: list[dict[str, Any]], prefix: str) -> dict[str, list[tuple[float, float]]]:
    """Per worker, the (start, stop) of the computations of tasks whose key starts with ``prefix``."""
    out: dict[str, list[tuple[float, float]]] = {}
    for rec in stream:
        if str(rec["key"]).startswith(prefix):
            spans = [(s["start"], s["stop"]) for s in rec["startstops"] if s["action"] == "compute"]
            out.setdefault(rec["worker"], []).extend(spans)
    return out
