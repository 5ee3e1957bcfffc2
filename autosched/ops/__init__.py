"""Workloads: the registry and the built-in operators (registered when this package is imported)."""

from . import conv, elementwise, lowp, matmul, nn, pool  # noqa: F401  (importing registers the built-ins)
from .registry import Workload, WorkloadDef, WorkloadInfo, get_workload, list_workloads, workload

__all__ = ["Workload", "WorkloadDef", "WorkloadInfo", "get_workload", "list_workloads", "workload"]
