"""The Dask executor and the choice of executor from ``asc.tune``'s ``cluster=`` argument.

Routing of a C target's measurements: a cross target (its compiler builds for another architecture
than this machine's, e.g. ``c -cc=aarch64-linux-gnu-gcc``), or any C target when boards are named
(``DaskExecutor(..., boards=["rpi4"])``, ``autosched tune --cluster ADDR --board rpi4``), is
measured on board workers as static executables; any other on the workers that measure their own
CPU (``measure-c``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..backends.base import Backend
from ..runner.measure import Builder, MeasureOption, Runner
from ..target import Target
from .base import Executor
from .boards import DaskBoardRunner
from .connection import DaskCluster, board_family
from .parts import DaskBuilder, DaskRunner


class DaskExecutor(Executor):
    """Builds and measures on a Dask cluster (``cluster``: an address or a ``distributed.Client``;
    ``security``: TLS settings for an address; see :class:`~autosched.cluster.connection.DaskCluster`).
    C targets (CPU kinds) are built on the cluster; GPU kinds are built here by their backend and measured on
    the cluster. ``boards``: measure C targets only on these SSH boards' workers."""

    def __init__(
        self, cluster: Any, worker_timeout: float = 60.0, *, boards: Sequence[str] = (), security: Any = None
    ) -> None:
        self.cluster = DaskCluster(cluster, worker_timeout, security=security)
        self.boards = tuple(boards)

    def builder(self, backend: Backend, option: MeasureOption) -> Builder:
        if not backend.gpu:
            return DaskBuilder(self.cluster, option.build_timeout)
        return backend.builder(option)

    def runner(self, backend: Backend, option: MeasureOption, target: Target | None = None) -> Runner:
        named = str(target) if target is not None else None
        if not backend.gpu and target is not None and (self.boards or target.is_cross):
            family = board_family(target.machine)
            return DaskBoardRunner(self.cluster, option, family, self.boards, target=named)
        return DaskRunner(self.cluster, option, backend.kind, target=named)

    def close(self) -> None:
        self.cluster.close()


def executor_for(cluster: Any, security: Any = None) -> Executor:
    """The executor of ``cluster``: None for this machine's pools, an :class:`Executor` as it is,
    else a Dask scheduler address (with ``security``: TLS settings) or ``distributed.Client``. An
    address is never read from a log or a model file: the cluster runs whatever code its clients
    send."""
    if cluster is None or isinstance(cluster, Executor):
        if security is not None:
            raise ValueError("security= goes with a cluster address (cluster='tls://HOST:PORT')")
        return cluster or Executor()
    return DaskExecutor(cluster, security=security)
