"""Weight layouts chosen for the target: convolution kernels packed by output-channel blocks.

On a CPU a direct convolution is fastest vectorized along output channels: one vector of kernel
values for ``CONV_BLOCK`` channels times one broadcast input value, for any stride and any output
width (NCHW's rows of 7 or 14 outputs fill vectors badly, and a stride-2 row is a gather). That
needs the kernel's channels innermost, so :func:`for_target` rewrites a graph for a C target: each
convolution of one group whose weight is a constant and whose output channels ``CONV_BLOCK``
divides reads a packed copy of its weight (``fused_conv2d_packed``'s layout), made once here, as
onnxruntime and oneDNN pack weights when a model is loaded. GPU targets keep the graph as it is.
"""

from __future__ import annotations

from dataclasses import replace

from ..target import Target
from .fused import pack_kernel
from .ir import Graph, Node

#: output channels per kernel block: one AVX2 vector of float32, two NEON vectors
CONV_BLOCK = 8
#: the attribute of a conv2d node whose weight input is packed, holding the block
BLOCK_ATTR = "kernel_block"


def packs_weights(target: Target | str) -> bool:
    """Whether graphs compiled for ``target`` get packed convolution kernels (C targets)."""
    return Target.parse(target).kind == "c"


def _packable(graph: Graph, node: Node) -> bool:
    if node.op != "conv2d" or BLOCK_ATTR in dict(node.attrs) or node.attr("groups") != 1:
        return False
    weight = node.inputs[1]
    return weight in graph.constants and graph.shapes[weight][0] % CONV_BLOCK == 0


def _fresh(name: str, taken: dict[str, tuple[int, ...]]) -> str:
    out, i = name, 1
    while out in taken:
        out, i = f"{name}{i}", i + 1
    return out


def pack_conv_weights(graph: Graph) -> Graph:
    """A copy of ``graph`` whose packable convolutions (see the module) read packed weights,
    named ``<weight>.packed``; a weight no other node reads is dropped. Idempotent; ``graph`` is
    left as it was."""
    if not any(_packable(graph, n) for n in graph.nodes):
        return graph
    constants, shapes = dict(graph.constants), dict(graph.shapes)
    nodes: list[Node] = []
    packed_of: dict[str, str] = {}
    for node in graph.nodes:
        if not _packable(graph, node):
            nodes.append(node)
            continue
        weight = node.inputs[1]
        packed = packed_of.get(weight)
        if packed is None:
            packed = packed_of[weight] = _fresh(f"{weight}.packed", shapes)
            constants[packed] = pack_kernel(graph.constants[weight], CONV_BLOCK)
            shapes[packed] = constants[packed].shape
        attrs = tuple(sorted((*node.attrs, (BLOCK_ATTR, CONV_BLOCK))))
        nodes.append(replace(node, inputs=(node.inputs[0], packed, *node.inputs[2:]), attrs=attrs))
    read = {v for n in nodes for v in n.inputs} | set(graph.outputs)
    for name in [c for c in constants if c not in read]:
        del constants[name], shapes[name]
    return replace(graph, constants=constants, nodes=nodes, shapes=shapes)


def for_target(graph: Graph, target: Target | str = "c") -> Graph:
    """``graph`` as it is compiled for ``target``: :func:`pack_conv_weights` on C targets."""
    return pack_conv_weights(graph) if packs_weights(target) else graph
