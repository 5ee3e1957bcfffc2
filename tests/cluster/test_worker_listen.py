"""Where ``autosched worker`` listens: on the address that reaches its scheduler, never on every
interface; a plain-TCP worker on an address others can reach says so in one warning line.

Real schedulers and ``autosched worker`` processes on 127.0.0.1; their listening sockets read with
psutil. No test sends a packet to an address other than loopback.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from autosched.cluster.listen import exposure, listen_address, warn_if_exposed
from autosched.diagnostics import AutoschedWarning

distributed = pytest.importorskip("distributed", reason='pip install "dask[distributed]"')
psutil = pytest.importorskip("psutil", reason="pip install psutil")

from dask_cluster import ROOT, Lab  # noqa: E402

EVERYWHERE = {"0.0.0.0", "::"}


def _listening(pid: int) -> set[str]:
    """The addresses the process ``pid`` listens on (TCP)."""
    conns = psutil.Process(pid).net_connections(kind="inet")
    return {c.laddr.ip for c in conns if c.status == psutil.CONN_LISTEN}


def _other_address() -> str | None:
    """An IPv4 address of this machine that is not loopback, if it has one."""
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family == socket.AF_INET and not ipaddress.ip_address(a.address).is_loopback:
                return str(a.address)
    return None


def _worker(scheduler: str, *flags: str, stderr: Path) -> subprocess.Popen[bytes]:
    """``autosched worker`` for ``scheduler`` with ``flags``, its stderr into the file ``stderr``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AUTOSCHED_CACHE": str(stderr.parent / "cache")}
    with stderr.open("wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "autosched", "worker", "--scheduler", scheduler, *flags],
            env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True,
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    lab = Lab(tmp_path_factory.mktemp("listen"))
    try:
        yield lab
    finally:
        lab.close()


def test_a_worker_of_a_loopback_scheduler_listens_on_loopback_only(lab: Lab, tmp_path: Path) -> None:
    assert lab.address.startswith("tcp://127.0.0.1:")
    before = len(lab.client.scheduler_info(n_workers=-1)["workers"])
    proc = _worker(lab.address, "--device", "local", "--name", "plain", stderr=tmp_path / "err.log")
    try:
        lab.client.wait_for_workers(before + 1, timeout=60)
        listening = _listening(proc.pid)
        assert listening == {"127.0.0.1"}, listening
        assert not listening & EVERYWHERE
        assert lab.address_of("plain").startswith("tcp://127.0.0.1:")
    finally:
        _stop(proc)
    assert "autosched: warning" not in (tmp_path / "err.log").read_text()


def test_listen_names_the_address_and_a_plain_tcp_one_others_reach_warns_once(tmp_path: Path) -> None:
    address = _other_address()
    if address is None:
        pytest.skip("this machine has no non-loopback IPv4 address to listen on")
    with socket.socket() as closed:  # a scheduler address on loopback where nothing answers:
        closed.bind(("127.0.0.1", 0))  # the worker listens, then only retries loopback connects
        port = closed.getsockname()[1]
    err = tmp_path / "err.log"
    proc = _worker(f"tcp://127.0.0.1:{port}", "--listen", address, stderr=err)
    try:
        deadline = time.monotonic() + 60
        while not _listening(proc.pid):
            assert proc.poll() is None, err.read_text()
            assert time.monotonic() < deadline, f"the worker never listened: {err.read_text()}"
            time.sleep(0.2)
        assert _listening(proc.pid) == {address}
    finally:
        _stop(proc)
    said = [line for line in err.read_text().splitlines() if line.startswith("autosched: warning")]
    assert len(said) == 1, err.read_text()
    assert address in said[0] and "anyone who can reach that address can run code" in said[0]
    assert "tls://" in said[0] and "TLS" in said[0]


def test_host_still_works_as_an_alias_of_listen(lab: Lab, tmp_path: Path) -> None:
    before = len(lab.client.scheduler_info(n_workers=-1)["workers"])
    proc = _worker(lab.address, "--host", "127.0.0.1", "--name", "alias", stderr=tmp_path / "err.log")
    try:
        lab.client.wait_for_workers(before + 1, timeout=60)
        assert _listening(proc.pid) == {"127.0.0.1"}
    finally:
        _stop(proc)


def test_the_address_is_the_local_end_of_the_route_to_the_scheduler() -> None:
    assert listen_address("tcp://127.0.0.1:8786") == "127.0.0.1"
    assert ipaddress.ip_address(listen_address("tcp://localhost:8786")).is_loopback
    assert listen_address("tls://127.0.0.1:1") == "127.0.0.1"
    assert listen_address("tcp://10.9.8.7:8786", "127.0.0.2") == "127.0.0.2"  # --listen wins
    try:
        chosen = listen_address("tcp://192.0.2.1:8786")  # TEST-NET-1: connect() picks a route, sends nothing
    except ValueError as e:
        pytest.skip(f"this machine has no route to 192.0.2.1: {e}")
    mine = {a.address for addrs in psutil.net_if_addrs().values() for a in addrs}
    assert chosen in mine and not ipaddress.ip_address(chosen).is_loopback
    assert chosen not in EVERYWHERE


def test_a_bad_scheduler_address_is_a_one_line_error() -> None:
    with pytest.raises(ValueError, match="not a Dask scheduler address") as no:
        listen_address("tcp://bad host:1")
    assert "\n" not in str(no.value)


def test_the_warning_is_for_plain_tcp_on_an_address_others_reach() -> None:
    assert exposure("tcp://127.0.0.1:8786", "127.0.0.1") is None
    assert exposure("tcp://127.0.0.1:8786", "localhost") is None
    assert exposure("tls://192.0.2.1:8786", "192.0.2.2") is None  # TLS: only certificate holders
    for address in ("192.0.2.2", "0.0.0.0"):
        message = exposure("tcp://192.0.2.1:8786", address)
        assert message is not None and "\n" not in message
        assert f"listens on {address} over plain TCP" in message
        assert "anyone who can reach that address can run code" in message and "tls://" in message
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_if_exposed("tcp://192.0.2.1:8786", "192.0.2.2")
        warn_if_exposed("tcp://127.0.0.1:8786", "127.0.0.1")
    assert [issubclass(w.category, AutoschedWarning) for w in caught] == [True]
