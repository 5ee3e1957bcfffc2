"""autosched.cluster: where tuning builds and measures: this machine's pools (the default) or a
Dask cluster (``asc.tune(task, cluster="tcp://host:8786")``, ``autosched worker``)."""

from .base import ClusterUnavailable, Executor
from .connection import DaskCluster, measure_resource
from .executor import DaskExecutor, executor_for

__all__ = [
    "ClusterUnavailable", "DaskCluster", "DaskExecutor", "Executor", "executor_for", "measure_resource",
]
