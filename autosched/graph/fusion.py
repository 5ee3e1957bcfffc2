"""Operator fusion (the TVM paper's rules) and task extraction.

A complex operator (conv2d, conv of any rank, conv_transpose, dense, batch_matmul) absorbs the
chain of elementwise operators that follows it (bias add, per-channel scale, residual add, mul,
sub, div, maximum, minimum, pow, ReLU, GELU, sigmoid and the functions of ``unary``; a sub, div or
pow only when the chain's value is its first operand) while each link has exactly one reader
and is not a graph output: the chain becomes the epilogue of one fused workload. An elementwise
chain that follows no complex operator is one ``fused_elementwise`` workload; pooling and softmax
(any axis), layer and instance norm, reductions, resize, slice, gather, transpose, pad and
broadcast are workloads of their own; reshape and concat are done by the network runtime (a view,
a copy).
Identical workloads are one task whose weight is how often it occurs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ..ops import Workload, get_workload
from .dense_packed import DENSE_BLOCK_ATTR
from .ir import COMPLEX_OPS, ELEMENTWISE_OPS, LAYOUT_OPS, PER_CHANNEL_OPS, Graph, GraphError, Node, Shape
from .layers import shape_text, view3
from .layers_tensor import canonical_reduce
from .repack import BLOCK_ATTR, BLOCKED_ATTR
from .sink_reshape import CHANNEL_AXIS, ORDERED

_STEP = {"bias_add": "bias", "scale": "scale", **{op: op for op in ELEMENTWISE_OPS - PER_CHANNEL_OPS}}


@dataclass(frozen=True, slots=True)
class Group:
    """One fused subgraph: its nodes, the graph values its kernel reads (in the workload's input
    order) and writes, and its workload (None for a layout operator done by the runtime)."""

    nodes: tuple[Node, ...]
    inputs: tuple[str, ...]
    output: str
    workload: Workload | None


@dataclass(frozen=True, slots=True)
class TaskInfo:
    """One distinct workload of a graph: how often it occurs and its share of the graph's FLOPs."""

    workload: Workload
    flops: int
    weight: int
    share: float


def _chain(
    graph: Graph, start: Node, axis: int, users: dict[str, list[Node]], taken: set[str]
) -> tuple[list[Node], list[str]]:
    """The elementwise nodes not ``taken`` by another group that fuse after ``start``, and the
    extra inputs they read."""
    nodes: list[Node] = []
    extras: list[str] = []
    outputs = set(graph.outputs)
    value = start.output
    while value not in outputs and len(users[value]) == 1:
        nxt = users[value][0]
        if nxt.op not in ELEMENTWISE_OPS or nxt.inputs.count(value) != 1 or nxt.output in taken:
            break
        if nxt.op in PER_CHANNEL_OPS and (nxt.inputs[0] != value or nxt.attr("axis") != axis):
            break
        if nxt.op in ORDERED and nxt.inputs[0] != value:
            break
        nodes.append(nxt)
        extras.extend(v for v in nxt.inputs if v != value)
        value = nxt.output
    return nodes, extras


def _epilogue(nodes: list[Node]) -> str:
    return ",".join(n.attr("step") if n.op == "unary" else _STEP[n.op] for n in nodes)


def _ints(values: tuple[int, ...]) -> str:
    return ",".join(map(str, values))


def _anchor_workload(graph: Graph, node: Node, epilogue: str) -> Workload:
    shape = graph.shapes
    if node.op == "conv2d":
        r, s = shape[node.inputs[1]][2:4]  # (K, C/groups, R, S), or packed (K/block, C, R, S, block)
        stride, pad = node.attr("stride"), node.attr("pad")
        block = dict(node.attrs).get(BLOCK_ATTR)
        if BLOCKED_ATTR in dict(node.attrs):  # blocked activations (.activation_layout): (N, C/b, H, W, b)
            n, cb, h, w, b = shape[node.inputs[0]]
            if node.attr("groups") > 1:  # depthwise: its kernel (C/b, R, S, b)
                r, s = shape[node.inputs[1]][1:3]
                depthwise = (n, cb * b, h, w, r, s, stride, pad, block, epilogue)
                return get_workload("fused_depthwise_nchwc", (*depthwise, graph.dtype))
            args = (n, cb * b, h, w, shape[node.output][1] * b, r, s, stride, pad, block, epilogue)
            return get_workload("fused_conv2d_nchwc", (*args, graph.dtype))
        n, c, h, w = shape[node.inputs[0]]
        k = shape[node.output][1]
        if block is not None:  # the weight packed by output-channel blocks (.layout)
            args = (n, c, h, w, k, r, s, stride, pad, block, epilogue)
            return get_workload("fused_conv2d_packed", (*args, graph.dtype))
        args = (n, c, h, w, k, r, s, stride, pad, node.attr("groups"), epilogue)
        return get_workload("fused_conv2d", (*args, graph.dtype))
    if node.op in ("conv", "conv_transpose"):
        data, weight = shape_text(shape[node.inputs[0]]), shape_text(shape[node.inputs[1]])
        window = [_ints(node.attr("strides")), _ints(node.attr("pads"))]
        if node.op == "conv_transpose":
            window.append(_ints(node.attr("output_padding")))
        window.append(_ints(node.attr("dilations")))
        args = (data, weight, *window, node.attr("groups"), epilogue, graph.dtype)
        return get_workload(f"fused_{node.op}", args)
    if node.op == "dense":
        (m, k), n = shape[node.inputs[0]], shape[node.output][1]
        block = dict(node.attrs).get(DENSE_BLOCK_ATTR)
        if block is not None:  # the weight packed by output blocks (.dense_packed)
            return get_workload("fused_dense_packed", (m, n, k, block, epilogue, graph.dtype))
        return get_workload("fused_dense", (m, n, k, epilogue, graph.dtype))
    (b, m, k), (_, _, n) = shape[node.inputs[0]], shape[node.inputs[1]]
    return get_workload("fused_batch_matmul", (b, m, n, k, epilogue, graph.dtype))


#: how a node that is a kernel of its own (no anchor, no elementwise chain) becomes a workload:
#: ``SINGLE_OPS[op](graph, node, input shape)``; new graph operators register here
MakeWorkload = Callable[[Graph, Node, Shape], Workload]
SINGLE_OPS: dict[str, MakeWorkload] = {}


def single_op(*ops: str) -> Callable[[MakeWorkload], MakeWorkload]:
    """Register the function that makes the workload of a node of operator(s) ``ops``."""

    def register(fn: MakeWorkload) -> MakeWorkload:
        for op in ops:
            SINGLE_OPS[op] = fn
        return fn

    return register


@single_op("max_pool2d", "avg_pool2d")
def _pool2d(graph: Graph, node: Node, shape: Shape) -> Workload:
    window = (node.attr("kernel"), node.attr("stride"), node.attr("pad"))
    return get_workload(node.op, (*shape, *window, graph.dtype))


@single_op("global_avg_pool2d")
def _global_pool(graph: Graph, node: Node, shape: Shape) -> Workload:
    return get_workload("global_avg_pool2d", (*shape, graph.dtype))


@single_op("softmax")
def _softmax(graph: Graph, node: Node, shape: Shape) -> Workload:
    axis = dict(node.attrs).get("axis", len(shape) - 1)
    if axis == len(shape) - 1:
        return get_workload("softmax", (math.prod(shape[:-1]), shape[-1], graph.dtype))
    return get_workload("softmax_axis", (*view3(shape, axis), graph.dtype))


@single_op("layer_norm")
def _layer_norm(graph: Graph, node: Node, shape: Shape) -> Workload:
    rows, cols = math.prod(shape[: node.attr("axis")]), math.prod(shape[node.attr("axis") :])
    return get_workload("layer_norm", (rows, cols, node.attr("eps"), graph.dtype))


@single_op("transpose")
def _transpose(graph: Graph, node: Node, shape: Shape) -> Workload:
    return get_workload("transpose", (shape_text(shape), ",".join(map(str, node.attr("perm"))), graph.dtype))


@single_op("pad")
def _pad(graph: Graph, node: Node, shape: Shape) -> Workload:
    pads = ",".join(map(str, node.attr("pads")))
    return get_workload("pad", (shape_text(shape), pads, node.attr("value"), node.attr("mode"), graph.dtype))


@single_op("broadcast")
def _broadcast(graph: Graph, node: Node, shape: Shape) -> Workload:
    out = graph.shapes[node.output]
    ranked = (1,) * (len(out) - len(shape)) + shape
    return get_workload("broadcast_to", (shape_text(ranked), shape_text(out), graph.dtype))


@single_op("pool")
def _pool(graph: Graph, node: Node, shape: Shape) -> Workload:
    window = [_ints(node.attr(k)) for k in ("kernel", "strides", "pads", "dilations")]
    flags = (node.attr("ceil_mode"), node.attr("count_include_pad"))
    return get_workload("pool", (shape_text(shape), node.attr("kind"), *window, *flags, graph.dtype))


@single_op("reduce", "global_pool")
def _reduce(graph: Graph, node: Node, shape: Shape) -> Workload:
    dims, axes = canonical_reduce(shape, node.attr("axes"))
    return get_workload("reduce", (shape_text(dims), _ints(axes), node.attr("kind"), graph.dtype))


@single_op("slice")
def _slice(graph: Graph, node: Node, shape: Shape) -> Workload:
    out = graph.shapes[node.output]
    starts, steps = node.attr("starts"), node.attr("steps")
    ends = tuple(b + (n - 1) * s + 1 for b, n, s in zip(starts, out, steps, strict=True))
    return get_workload("slice", (shape_text(shape), _ints(starts), _ints(ends), _ints(steps), graph.dtype))


@single_op("gather")
def _gather(graph: Graph, node: Node, shape: Shape) -> Workload:
    outer, n, inner = view3(shape, node.attr("axis"))
    m = math.prod(graph.shapes[node.inputs[1]])
    if node.inputs[1] in graph.dtypes:  # an integer input
        return get_workload("gather", (outer, n, inner, m, graph.dtype))
    return get_workload("gather", (outer, n, inner, m, graph.dtype, graph.dtype))


@single_op("index_to_float")
def _index_to_float(graph: Graph, node: Node, shape: Shape) -> Workload:
    return get_workload("index_to_float", (math.prod(shape), graph.dtype))


@single_op("instance_norm")
def _instance_norm(graph: Graph, node: Node, shape: Shape) -> Workload:
    args = (shape[0], shape[1], math.prod(shape[2:]), node.attr("eps"), graph.dtype)
    return get_workload("instance_norm", args)


@single_op("resize")
def _resize(graph: Graph, node: Node, shape: Shape) -> Workload:
    modes = (node.attr("mode"), node.attr("coordinates"), node.attr("nearest_mode"))
    out = shape_text(graph.shapes[node.output])
    return get_workload("resize", (shape_text(shape), out, *modes, graph.dtype))


def _single_workload(graph: Graph, node: Node) -> Workload:
    make = SINGLE_OPS.get(node.op)
    if make is None:
        raise GraphError(f"node {node.name!r}: operator {node.op!r} has no workload")
    return make(graph, node, graph.shapes[node.inputs[0]])


def _elementwise_group(graph: Graph, start: Node, users: dict[str, list[Node]], taken: set[str]) -> Group:
    shape = graph.shapes[start.output]
    axis = start.attr("axis") if start.op in PER_CHANNEL_OPS else min(1, len(shape) - 1)
    data = start.inputs[0]
    nodes = [start]
    extras = list(start.inputs[1:])
    more, more_extras = _chain(graph, start, axis, users, taken)
    nodes += more
    extras += more_extras
    wl = get_workload("fused_elementwise", (*view3(shape, axis), _epilogue(nodes), graph.dtype))
    return Group(tuple(nodes), (data, *extras), nodes[-1].output, wl)


def fuse(graph: Graph) -> list[Group]:
    """The graph's fused groups, in an order that runs (every group after the groups it reads)."""
    users = graph.consumers()
    taken: set[str] = set()
    groups: list[Group] = []
    for node in graph.nodes:
        if node.output in taken:
            continue
        if node.op in COMPLEX_OPS:
            chain, extras = _chain(graph, node, CHANNEL_AXIS[node.op], users, taken)
            wl = _anchor_workload(graph, node, _epilogue(chain))
            group = Group((node, *chain), (*node.inputs, *extras), (chain[-1] if chain else node).output, wl)
        elif node.op in ELEMENTWISE_OPS:
            group = _elementwise_group(graph, node, users, taken)
        elif node.op in LAYOUT_OPS:
            group = Group((node,), node.inputs, node.output, None)
        else:
            group = Group((node,), node.inputs, node.output, _single_workload(graph, node))
        taken.update(n.output for n in group.nodes)
        groups.append(group)
    return _ordered(graph, groups)


def _ordered(graph: Graph, groups: list[Group]) -> list[Group]:
    """``groups`` sorted so that each one comes after those that make its inputs."""
    ready = set(graph.inputs) | set(graph.constants)
    pending, ordered = list(groups), []
    while pending:
        runnable = [g for g in pending if all(v in ready for v in g.inputs)]
        if not runnable:
            raise GraphError(f"graph {graph.name!r} has a cycle through {pending[0].nodes[0].name!r}")
        for g in runnable:
            ordered.append(g)
            ready.add(g.output)
        done = {id(g) for g in runnable}
        pending = [g for g in pending if id(g) not in done]
    return ordered
