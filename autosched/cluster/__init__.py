"""autosched.cluster: where tuning builds and measures: this machine's pools (the default) or a
Dask cluster (``asc.tune(task, cluster="tcp://host:8786")``, ``tls://`` with ``security=``,
``autosched worker``).

- :mod:`.connection`: the client, worker resources (``build``, ``measure-KIND``, ``measure-c-ARCH``
  and ``board-ALIAS`` for SSH boards), where each kind of work may run, TLS settings.
- :mod:`.parts`: the builder and runner of a cluster; :mod:`.boards`: the runner of SSH boards.
- :mod:`.work`, :mod:`.board_work`: what runs on the workers; :mod:`.dask_worker`: ``autosched worker``.
- :mod:`.executor`: the choice between them, from ``cluster=``.
"""

from .base import ClusterUnavailable, Executor
from .boards import DaskBoardRunner
from .connection import DaskCluster, measure_resource
from .executor import DaskExecutor, executor_for

__all__ = [
    "ClusterUnavailable", "DaskBoardRunner", "DaskCluster", "DaskExecutor", "Executor", "executor_for",
    "measure_resource",
]
