"""The graph pass that gives nodes a packed copy of their constant weight, made once.

Convolutions (:mod:`.layout`) and dense layers (:mod:`.dense_packed`) read their weight in a
layout chosen for the target; this pass rewrites the graph for either: the weight, input 1 of a
node the plan picks, is packed once per plan key (nodes that share a weight and a block share the
copy), named ``<weight>.packed``, and a weight no node reads any more is dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace

import numpy as np

from .ir_core import Graph, Node, fresh_name

#: the attribute of a conv2d node whose weight input is packed, holding the block
BLOCK_ATTR = "kernel_block"
#: the attribute of a conv2d node that reads and writes activations blocked by channels, holding
#: the block (:mod:`.activation_layout`)
BLOCKED_ATTR = "blocked"


@dataclass(frozen=True)
class PackPlan:
    """How one node reads its weight packed: the copy's ``key`` (equal keys share one copy), the
    attribute ``attr`` set to ``block`` on the node, and ``pack`` making the copy."""

    key: Hashable
    attr: str
    block: int
    pack: Callable[[np.ndarray], np.ndarray]


def with_packed_weights(graph: Graph, plan: Callable[[Node], PackPlan | None]) -> Graph:
    """A copy of ``graph`` whose nodes with a :class:`PackPlan` read their weight packed (see the
    module); ``graph`` itself, unchanged, when the plan picks no node."""
    plans = [plan(node) for node in graph.nodes]
    if all(p is None for p in plans):
        return graph
    constants, shapes = dict(graph.constants), dict(graph.shapes)
    nodes: list[Node] = []
    packed_of: dict[Hashable, str] = {}
    for node, how in zip(graph.nodes, plans, strict=True):
        if how is None:
            nodes.append(node)
            continue
        weight = node.inputs[1]
        packed = packed_of.get(how.key)
        if packed is None:
            packed = packed_of[how.key] = fresh_name(f"{weight}.packed", shapes)
            constants[packed] = how.pack(graph.constants[weight])
            shapes[packed] = constants[packed].shape
        attrs = tuple(sorted((*node.attrs, (how.attr, how.block))))
        nodes.append(replace(node, inputs=(node.inputs[0], packed, *node.inputs[2:]), attrs=attrs))
    read = {v for n in nodes for v in n.inputs} | set(graph.outputs)
    for name in [c for c in constants if c not in read]:
        del constants[name], shapes[name]
    return replace(graph, constants=constants, nodes=nodes, shapes=shapes)
