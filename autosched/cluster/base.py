"""The executor seam: where tuning builds and measures. The default is this machine's pools.

:func:`autosched.tune` asks an :class:`Executor` for its builder and runner; :class:`Executor`
itself gives the target kind's own local ones (a build worker process, an isolated measurement
worker), so a run without a cluster is exactly what it was. A Dask cluster is another executor
(:class:`~autosched.cluster.executor.DaskExecutor`).
"""

from __future__ import annotations

from ..backends.base import Backend
from ..runner.measure import Builder, MeasureOption, Runner
from ..target import Target


class ClusterUnavailable(RuntimeError):
    """The cluster cannot go on: it cannot be reached, or no worker able to do the work is left."""


class Executor:
    """Builds and measures on this machine: each target kind's local builder and runner."""

    def builder(self, backend: Backend, option: MeasureOption) -> Builder:
        """The builder of tuning runs for ``backend``'s targets."""
        return backend.builder(option)

    def runner(self, backend: Backend, option: MeasureOption, target: Target | None = None) -> Runner:
        """The runner of tuning runs for ``backend``'s targets (``target``: the one tuned for)."""
        return backend.runner(option)

    def close(self) -> None:
        """Release what the executor holds (nothing for the local one)."""
