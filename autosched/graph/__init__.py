"""Whole networks: a graph of operators, its fused tasks, and the network built from them.

    graph = asc.from_onnx("model.onnx")            # or GraphBuilder for a graph written by hand
    for t in asc.graph.extract_tasks(graph): ...   # distinct fused workloads with weights
    net = asc.build_network(graph, log="model.jsonl")
"""

# importing registers the workloads of the network operators and their templates
from . import (  # noqa: F401
    conv_nchwc,
    flat_template,
    fused,
    layers_conv,
    layers_pool,
    layers_resize,
    layers_tensor,
    layers_transposed,
    lstm_cell,
    packed_template,
)
from .fusion import Group, TaskInfo, fuse
from .ir import Graph, GraphBuilder, GraphError, Node
from .network import Network, build_network, extract_tasks, network_tasks
from .onnx_import import from_onnx
from .tuning import NetworkTuneResult, tune_network

__all__ = [
    "Graph",
    "GraphBuilder",
    "GraphError",
    "Group",
    "Network",
    "NetworkTuneResult",
    "Node",
    "TaskInfo",
    "build_network",
    "extract_tasks",
    "from_onnx",
    "fuse",
    "network_tasks",
    "tune_network",
]
