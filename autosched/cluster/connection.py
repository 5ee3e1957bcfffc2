"""A connection to a Dask scheduler and where its tasks may run (worker resources).

Measuring workers declare the resource ``measure-KIND`` (``measure-c`` for a local CPU,
``measure-cuda`` / ``measure-opencl`` for a GPU), one unit each: a measurement needs one, so a
device measures one program at a time. A worker in front of an SSH board (``autosched worker
--board ALIAS``) declares ``measure-c-ARCH`` (ARCH: the architecture whose binaries the board runs,
e.g. ``measure-c-aarch64``) and ``board-ALIAS``; it takes static executables, not libraries, so
it is a resource of its own: a cross target's run (``c -cc=aarch64-linux-gnu-gcc``) asks for
``measure-c-aarch64`` and never reaches a local x86 worker, and a run that names boards asks for
``board-ALIAS``. Build workers may declare ``build``; when some do, builds
need it, else builds go to the workers that measure nothing. Once any worker declares either, a
measurement waits for a measuring worker. A plain cluster (no worker declares anything) builds and
measures anywhere, one measurement at a time per worker process. A board worker never builds: with
no other worker, builds wait for one.

``distributed`` is imported when a cluster is first used: it is optional.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..diagnostics import printable
from ..runner.errors import InfrastructureError
from .base import ClusterUnavailable

#: the resource a worker that builds declares
BUILD = "build"

#: seconds between two looks at the workers while waiting for results
POLL = 0.5

#: what a scheduler address may look like: PROTOCOL://HOST:PORT or HOST:PORT
_ADDRESS = re.compile(r"((tcp|tls|ucx|ws|wss|inproc)://)?[A-Za-z0-9_.:\[\]%-]+(:\d+)?(/[A-Za-z0-9_./-]*)?")

Workers = dict[str, dict[str, float]]  # address -> resources


def check_address(address: str) -> None:
    """Refuse, in one line, a string that is no Dask scheduler address."""
    if not _ADDRESS.fullmatch(address):
        raise ValueError(f"not a Dask scheduler address: {address!r} (expected tcp://HOST:PORT)")


def measure_resource(kind: str) -> str:
    """The worker resource of devices that measure programs of target kind ``kind``."""
    return f"measure-{kind}"


def tls_security(ca_file: str | None, cert: str | None, key: str | None, role: str) -> Any:
    """A ``distributed.security.Security`` for TLS from file paths (``role``: ``client`` or
    ``worker``, whose certificate they are), or None when none is given (Dask's configuration then
    applies: ``DASK_DISTRIBUTED__COMM__TLS__CA_FILE`` and the like). The paths only reach Python's
    ``ssl`` module; a missing file is a one-line error."""
    if not (ca_file or cert or key):
        return None
    if not ca_file or not cert:
        need = "--tls-ca-file and --tls-cert (and --tls-key unless the certificate file holds the key)"
        raise ValueError(f"TLS needs {need}")
    for flag, path in (("--tls-ca-file", ca_file), ("--tls-cert", cert), ("--tls-key", key)):
        if path is not None and not Path(path).is_file():
            raise ValueError(f"{flag}: no such file: {printable(path, 200)}")
    settings = {"tls_ca_file": ca_file, f"tls_{role}_cert": cert, f"tls_{role}_key": key}
    return import_distributed().Security(require_encryption=True, **settings)


def board_resource(alias: str) -> str:
    """The worker resource of the worker in front of the SSH board ``alias``."""
    return f"board-{alias}"


def board_family(arch: str) -> str:
    """The target family of boards that run ``arch`` binaries (``c-aarch64``): its measuring
    resource is ``measure_resource(board_family(arch))``."""
    return f"c-{arch}"


def import_distributed() -> Any:
    """The `distributed` module, or an ImportError saying how to install it."""
    try:
        import distributed
    except ImportError:
        install = 'pip install "dask[distributed]"'
        raise ImportError(f"tuning on a Dask cluster needs dask.distributed: {install}") from None
    return distributed


class DaskCluster:
    """The client of a Dask scheduler: ``scheduler`` is its address (``tcp://host:8786``;
    ``tls://`` with Dask's own security settings) or a ``distributed.Client``. A client made
    here is closed by :meth:`close`; a given one is left open. ``worker_timeout``: seconds to wait
    for a worker able to do pending work before giving up with :class:`ClusterUnavailable`.
    ``security``: a ``distributed.security.Security`` for a ``tls://`` address (None: Dask's
    configuration, e.g. ``DASK_DISTRIBUTED__COMM__TLS__CA_FILE``)."""

    def __init__(
        self, scheduler: Any, worker_timeout: float = 60.0, connect_timeout: float = 20.0,
        security: Any = None,
    ) -> None:
        distributed = import_distributed()
        self.worker_timeout = worker_timeout
        if isinstance(scheduler, distributed.Client):
            if security is not None:
                raise ValueError("security= goes with a scheduler address; a Client has its own")
            self.client, self.own = scheduler, False
        elif isinstance(scheduler, str):
            check_address(scheduler)
            self.client = _connect(distributed, scheduler, connect_timeout, security)
            self.own = True
        else:
            raise TypeError(f"cluster must be a scheduler address or a distributed.Client, got {scheduler!r}")
        self.address = str(self.client.scheduler.address)

    def workers(self) -> Workers:
        """Every worker's address and declared resources, as the scheduler knows them now."""
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        return {addr: dict(w.get("resources") or {}) for addr, w in info.items()}

    def close(self) -> None:
        """Close the client if this object made it."""
        if self.own:
            self.client.close()

    def submit(self, func: Callable[..., Any], *args: Any, prefix: str, **where: Any) -> Any:
        """``func(*args)`` as a cluster task named ``prefix-...``, retried on another worker if
        its worker is lost."""
        key = f"{prefix}-{self.client.id}-{next_id()}"
        return self.client.submit(func, *args, key=key, pure=False, retries=2, **where)

    def scatter(self, value: Any, workers: list[str]) -> Any:
        """A cluster value holding ``value`` (a task's data), sent once: a copy on each of
        ``workers`` (those that will use it, so losing one loses no copy; none: any worker). Big
        data never travels inside a task graph (Dask warns about graphs over 10 MB)."""
        try:
            (future,) = self.client.scatter(
                [value], workers=workers or None, broadcast=bool(workers), hash=False,
                timeout=self.worker_timeout,
            )
        except TimeoutError:
            raise ClusterUnavailable(
                f"no worker of the Dask cluster at {self.address} took the task's data within "
                f"{self.worker_timeout:g} s"
            ) from None
        return future

    def _gather(self, futures: list[Any], what: str) -> list[Any]:
        """The values of completed futures; a task that failed on the cluster is an
        :class:`~autosched.runner.errors.InfrastructureError`."""
        try:
            return list(self.client.gather(futures))
        except Exception as e:
            why = f"{type(e).__name__}: {e}"
            raise InfrastructureError(f"a task to {what} failed on the Dask cluster: {why}") from None

    def completed(
        self, futures: Iterable[Any], able: Callable[[Workers], bool], what: str,
        start: str = "--device local",
    ) -> Iterator[tuple[Any, Any]]:
        """(future, value) of each future of ``futures`` as it completes. When ``able`` says
        no worker of the cluster can run them for ``worker_timeout`` seconds, the rest are
        cancelled and :class:`ClusterUnavailable` raised (``what``: which work, ``start``: the
        ``autosched worker`` flags of a worker that could do it, for the message)."""
        distributed = import_distributed()
        pending = set(futures)
        alone_since: float | None = None
        while pending:
            try:
                with self.client.as_current():  # wait() asks for the current client
                    done, pending = distributed.wait(pending, timeout=POLL, return_when="FIRST_COMPLETED")
            except TimeoutError:
                done = set()
            if done:  # one round trip for every result ready (progress: no need to ask about workers)
                alone_since = None
                done_list = list(done)
                yield from zip(done_list, self._gather(done_list, what), strict=True)
                continue
            if able(self.workers()):
                alone_since = None
                continue
            now = time.monotonic()
            alone_since = alone_since or now
            if now - alone_since >= self.worker_timeout:
                self.client.cancel(list(pending))
                raise ClusterUnavailable(
                    f"no worker of the Dask cluster at {self.address} can {what} (waited "
                    f"{self.worker_timeout:g} s): start one, e.g. autosched worker --scheduler "
                    f"{self.address} {start}".rstrip()
                )


def _connect(distributed: Any, address: str, timeout: float, security: Any) -> Any:
    """A client of the scheduler at ``address``, or a one-line :class:`ClusterUnavailable`."""
    try:
        return distributed.Client(address, timeout=timeout, set_as_default=False, security=security)
    except (OSError, TimeoutError, TypeError, ValueError, RuntimeError) as e:
        why = " ".join(str(e).split()) or type(e).__name__
        hint = ""
        if address.startswith("tls://") and (security is None or isinstance(e, TypeError)):
            hint = " (a tls:// scheduler needs TLS settings: --tls-ca-file, --tls-cert, --tls-key or Dask's"
            hint += " configuration)"
        elif not address.startswith("tls://"):
            hint = " (if the scheduler uses TLS, give its tls:// address and the TLS settings)"
        raise ClusterUnavailable(f"cannot reach the Dask scheduler {address}: {why}{hint}") from None


_ids = iter(range(1, 1 << 62))


def next_id() -> int:
    """A number unique in this process (task keys)."""
    return next(_ids)


def measure_placement(workers: Workers, kind: str) -> tuple[dict[str, Any], Callable[[Workers], bool]]:
    """Where measurements of target kind ``kind`` may run: the submit keywords, and a test of
    whether a cluster has such a worker."""
    resource = measure_resource(kind)
    if any(_declares(r) for r in workers.values()):
        return {"resources": {resource: 1}}, lambda ws: any(resource in r for r in ws.values())
    return {}, bool


def board_placements(
    family: str, aliases: Sequence[str]
) -> tuple[list[dict[str, Any]], Callable[[Workers], bool]]:
    """Where measurements on boards may run: on the board workers of target family ``family``, or
    (``aliases`` given) on those boards' workers, a candidate to each in turn. The submit keywords
    to cycle through, and a test of whether a cluster has every worker they need."""
    needs = [board_resource(a) for a in aliases] or [measure_resource(family)]
    wheres = [{"resources": {n: 1}} for n in needs]
    return wheres, lambda ws: all(any(n in r for r in ws.values()) for n in needs)


def _declares(resources: dict[str, float]) -> bool:
    """Whether a worker declares what it is for (build or measure): the cluster is not plain."""
    return any(k == BUILD or k.startswith("measure-") for k in resources)


def build_placement(workers: Workers) -> tuple[dict[str, Any], Callable[[Workers], bool]]:
    """Where builds may run (see the module docstring): the submit keywords, and a test of whether
    a cluster has such a worker."""
    if any(BUILD in r for r in workers.values()):
        return {"resources": {BUILD: 1}}, lambda ws: any(BUILD in r for r in ws.values())
    idle = [a for a, r in workers.items() if not any(k.startswith("measure-") for k in r)]
    if idle and len(idle) < len(workers):
        return {"workers": idle}, lambda ws: any(a in ws for a in idle)
    others = [a for a, r in workers.items() if not any(k.startswith("board-") for k in r)]
    if not others:  # board workers only: builds wait for a build worker (a board worker never builds)
        return {"resources": {BUILD: 1}}, lambda ws: any(BUILD in r for r in ws.values())
    if len(others) < len(workers):
        return {"workers": others}, lambda ws: any(a in ws for a in others)
    return {}, bool
