"""The Dask executor and the choice of executor from ``asc.tune``'s ``cluster=`` argument."""

from __future__ import annotations

from typing import Any

from ..backends.base import Backend
from ..runner.measure import Builder, MeasureOption, Runner
from ..target import Target
from .base import Executor
from .connection import DaskCluster, measuring_workers
from .parts import DaskBuilder, DaskRunner


class DaskExecutor(Executor):
    """Builds and measures on a Dask cluster (``cluster``: an address or a ``distributed.Client``;
    see :class:`~autosched.cluster.connection.DaskCluster`). C targets are built on the cluster;
    other kinds are built here by their backend and measured on the cluster."""

    def __init__(self, cluster: Any, worker_timeout: float = 60.0) -> None:
        self.cluster = DaskCluster(cluster, worker_timeout)

    def builder(self, backend: Backend, option: MeasureOption) -> Builder:
        if backend.kind == "c":
            return DaskBuilder(self.cluster, option.build_timeout)
        return backend.builder(option)

    def runner(self, backend: Backend, option: MeasureOption, target: Target | None = None) -> Runner:
        named = str(target) if target is not None else None
        return DaskRunner(self.cluster, option, backend.kind, target=named)

    def devices(self, backend: Backend) -> int:
        """The cluster's workers that measure ``backend``'s programs now (at least 1: with none,
        measurements wait for one to join)."""
        return max(1, measuring_workers(self.cluster.workers(), backend.kind))

    def close(self) -> None:
        self.cluster.close()


def executor_for(cluster: Any) -> Executor:
    """The executor of ``cluster``: None for this machine's pools, an :class:`Executor` as it is,
    else a Dask scheduler address or ``distributed.Client``. An address is never read from a log
    or a model file: the cluster runs whatever code its clients send."""
    if cluster is None:
        return Executor()
    if isinstance(cluster, Executor):
        return cluster
    return DaskExecutor(cluster)
