"""Reshapes moved below the elementwise chains they stand before, so that the chains fuse into the
operator that makes their data.

An importer writes a 3-D MatMul as reshape -> dense -> reshape, so the bias, GELU and residual add
after it read the reshaped value, not the dense output, and :mod:`.fusion` cannot make them the
dense's epilogue. A reshape changes no element's place in memory, so the chain computes the same
numbers on the dense output itself wherever every operand maps to the dense's shape:

- a per-channel operand (``bias_add``, ``scale``) whose axis, in the reshaped shape, has the same
  extent and the same number of elements after it as the anchor's channel axis (a bias on the
  last axis of a (1, 128, 768) view is a bias on axis 1 of the (128, 768) dense output); or a
  constant whose entries are all equal (a scalar broadcast along any axis), made again along the
  anchor's channel axis;
- an operand of the reshaped shape (a residual ``add``), itself reshaped to the anchor's shape (a
  view, free).

The anchor may already have an elementwise chain before the reshape (a ConvTranspose of one input
position imports as dense -> bias_add -> reshape, :meth:`.ir.GraphBuilder.conv_transpose`): the
chain after the reshape then joins it. The chain then reads the anchor's output (or the end of
that chain), and one reshape after its last node makes the value the rest of the graph reads,
under its old name. Only links that :func:`.fusion.fuse` would fuse are
moved (each read once, no graph output in the middle), so every moved chain becomes an epilogue.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from .ir import COMPLEX_OPS, ELEMENTWISE_OPS, PER_CHANNEL_OPS, Graph, Node, Shape
from .ir_core import fresh_name

#: the channel axis of each anchor's output (where its epilogue's per-channel operands broadcast)
CHANNEL_AXIS = {"conv2d": 1, "conv": 1, "conv_transpose": 1, "dense": 1, "batch_matmul": 2}
#: elementwise operators whose chained value must be the first operand
ORDERED = frozenset({"sub", "div", "pow"})


def same_axis(view: Shape, axis: int, shape: Shape, channel: int) -> bool:
    """Whether axis ``axis`` of a reshaped value of shape ``view`` indexes the same elements as
    axis ``channel`` of the same data in ``shape`` (same extent, same count of elements after it)."""
    return view[axis] == shape[channel] and math.prod(view[axis + 1 :]) == math.prod(shape[channel + 1 :])


def _uniform(graph: Graph, vector: str) -> bool:
    values = graph.constants.get(vector)
    return values is not None and values.size > 0 and bool(np.all(values == values.flat[0]))


def _movable(graph: Graph, node: Node, value: str, shape: Shape, channel: int) -> bool:
    """Whether the elementwise ``node`` reading ``value`` (a reshape of data of ``shape``) can read
    the data in ``shape`` instead and then fuse as an epilogue on channel axis ``channel``."""
    if node.op not in ELEMENTWISE_OPS or node.inputs.count(value) != 1:
        return False
    if node.op in ORDERED and node.inputs[0] != value:
        return False
    if node.op in PER_CHANNEL_OPS:
        view = graph.shapes[value]
        return node.inputs[0] == value and (
            same_axis(view, node.attr("axis"), shape, channel) or _uniform(graph, node.inputs[1])
        )
    return True


def _chain(graph: Graph, start: str, shape: Shape, channel: int, users: dict[str, list[Node]]) -> list[Node]:
    """The elementwise nodes after the reshaped value ``start`` that move below the reshape."""
    outputs = set(graph.outputs)
    chain: list[Node] = []
    value = start
    while value not in outputs and len(users[value]) == 1:
        nxt = users[value][0]
        if not _movable(graph, nxt, value, shape, channel):
            break
        chain.append(nxt)
        value = nxt.output
    return chain


class _Rewrite:
    """The new graph's nodes, constants and shapes, written as the old nodes are visited."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.nodes: list[Node] = []
        self.shapes = dict(graph.shapes)
        self.constants = dict(graph.constants)

    def reshape(self, value: str, shape: Shape, output: str | None = None) -> str:
        """A new reshape node of ``value`` to ``shape``; its output (``output``, or a new name)."""
        out = output or fresh_name(f"{value}.view", self.shapes)
        self.shapes[out] = shape
        self.nodes.append(Node("reshape", (value,), out, (), out))
        return out

    def link(self, node: Node, old: str, new: str, shape: Shape, channel: int) -> Node:
        """``node`` of the chain reading ``new`` (data of ``shape``) in place of ``old``."""
        inputs = [new if v == old else v for v in node.inputs]
        attrs = node.attrs
        if node.op in PER_CHANNEL_OPS:
            axis = node.attr("axis")
            if not same_axis(self.graph.shapes[old], axis, shape, channel):  # a uniform constant
                vector = self.graph.constants[inputs[1]]
                inputs[1] = fresh_name(f"{inputs[1]}.ch", self.shapes)
                self.constants[inputs[1]] = np.full(shape[channel], vector.flat[0], vector.dtype)
                self.shapes[inputs[1]] = (shape[channel],)
            attrs = tuple(sorted({**dict(attrs), "axis": channel}.items()))
        else:
            inputs = [v if v == new else self.reshape(v, shape) for v in inputs]
        return replace(node, inputs=tuple(inputs), attrs=attrs)


def _anchor(graph: Graph, value: str, producer: dict[str, Node], users: dict[str, list[Node]]) -> Node | None:
    """The operator whose output reaches ``value`` through elementwise nodes that each read the one
    before as their first operand, every value on the way read once and no graph output (the
    epilogue fusion gives it): the anchor a reshape of ``value`` stands after; None if none."""
    outputs = set(graph.outputs)
    while value not in outputs and len(users[value]) == 1 and value in producer:
        node = producer[value]
        if node.op in COMPLEX_OPS:
            return node
        if node.op not in ELEMENTWISE_OPS or node.inputs.count(node.inputs[0]) != 1:
            return None
        value = node.inputs[0]
    return None


def sink_reshapes(graph: Graph) -> Graph:
    """A copy of ``graph`` where each reshape of an anchor's output (read by nothing else), or of
    the end of the elementwise chain already after it, stands after the elementwise chain that
    follows it instead of before (see the module); ``graph`` itself when there is none."""
    users = graph.consumers()
    producer = {n.output: n for n in graph.nodes}
    moves: dict[str, list[Node]] = {}  # the reshape's output -> the chain moved above it
    anchors: dict[str, Node] = {}  # the reshape's output -> the operator the chain fuses into
    for node in graph.nodes:
        anchor = _anchor(graph, node.inputs[0], producer, users) if node.op == "reshape" else None
        if anchor is None:
            continue
        shape = graph.shapes[anchor.output]
        chain = _chain(graph, node.output, shape, CHANNEL_AXIS[anchor.op], users)
        if chain:
            moves[node.output], anchors[node.output] = chain, anchor
    if not moves:
        return graph
    new = _Rewrite(graph)
    moved = {n.output: (view, i) for view, chain in moves.items() for i, n in enumerate(chain)}
    reshapes = {n.output: n for n in graph.nodes if n.output in moves}
    for node in graph.nodes:
        if node.output in moves:
            continue  # the reshape: made again after its chain
        if node.output not in moved:
            new.nodes.append(node)
            continue
        view, i = moved[node.output]
        chain, data = moves[view], reshapes[view].inputs[0]
        shape = graph.shapes[data]
        anchor = anchors[view]
        old = view if i == 0 else chain[i - 1].output
        src = data if i == 0 else chain[i - 1].output
        link = new.link(node, old, src, shape, CHANNEL_AXIS[anchor.op])
        last = i == len(chain) - 1
        out = fresh_name(f"{node.output}.flat", new.shapes) if last else node.output
        new.shapes[out] = shape
        new.nodes.append(replace(link, output=out))
        if last:
            new.reshape(out, graph.shapes[node.output], output=node.output)
    for view in moves:
        del new.shapes[view]
    return replace(graph, nodes=new.nodes, shapes=new.shapes, constants=new.constants)
