"""Weight layouts chosen for the target: convolution kernels packed by output-channel blocks.

On a CPU a direct convolution is fastest vectorized along output channels: one vector of kernel
values for a block of channels times one broadcast input value, for any stride and any output
width (NCHW's rows of 7 or 14 outputs fill vectors badly, and a stride-2 row is a gather). That
needs the kernel's channels innermost, so :func:`for_target` rewrites a graph for a C target: each
convolution of one group whose weight is a constant and whose output channels a block divides
reads a packed copy of its weight (``fused_conv2d_packed``'s layout), made once here, as
onnxruntime and oneDNN pack weights when a model is loaded. A block is one vector of float32 where
the target's vectors hold 8 or more (16 with AVX-512), else :data:`CONV_BLOCK` channels; a
convolution whose channels that does not divide gets blocks of :data:`CONV_BLOCK`
(:func:`conv_blocks`). GPU targets keep the graph as it is.
"""

from __future__ import annotations

from dataclasses import replace

from ..target import Target
from .fused import pack_kernel
from .ir import Graph, Node

#: output channels per kernel block at least: one AVX2 vector of float32, two NEON vectors
CONV_BLOCK = 8
#: the attribute of a conv2d node whose weight input is packed, holding the block
BLOCK_ATTR = "kernel_block"


def packs_weights(target: Target | str) -> bool:
    """Whether graphs compiled for ``target`` get packed convolution kernels (C targets)."""
    return Target.parse(target).kind == "c"


def conv_blocks(target: Target | str) -> tuple[int, ...]:
    """The kernel blocks (output channels) for ``target``'s convolutions, preferred first: one
    float32 vector where it holds more than :data:`CONV_BLOCK`, then :data:`CONV_BLOCK`."""
    tgt = Target.parse(target)
    lanes = tgt.vector_lanes("float32") if tgt.vector_bytes is not None else CONV_BLOCK
    return (lanes, CONV_BLOCK) if lanes > CONV_BLOCK else (CONV_BLOCK,)


def _block(graph: Graph, node: Node, blocks: tuple[int, ...]) -> int | None:
    """The block of ``blocks`` that ``node``'s weight is packed by, None if it is not packed."""
    if node.op != "conv2d" or BLOCK_ATTR in dict(node.attrs) or node.attr("groups") != 1:
        return None
    weight = node.inputs[1]
    if weight not in graph.constants:
        return None
    return next((b for b in blocks if graph.shapes[weight][0] % b == 0), None)


def _fresh(name: str, taken: dict[str, tuple[int, ...]]) -> str:
    out, i = name, 1
    while out in taken:
        out, i = f"{name}{i}", i + 1
    return out


def pack_conv_weights(graph: Graph, blocks: tuple[int, ...] = (CONV_BLOCK,)) -> Graph:
    """A copy of ``graph`` whose packable convolutions (see the module) read packed weights,
    named ``<weight>.packed``, by the first of ``blocks`` that divides their output channels; a
    weight no other node reads is dropped. Idempotent; ``graph`` is left as it was."""
    if all(_block(graph, n, blocks) is None for n in graph.nodes):
        return graph
    constants, shapes = dict(graph.constants), dict(graph.shapes)
    nodes: list[Node] = []
    packed_of: dict[str, str] = {}
    for node in graph.nodes:
        block = _block(graph, node, blocks)
        if block is None:
            nodes.append(node)
            continue
        weight = node.inputs[1]
        packed = packed_of.get(weight)
        if packed is None:
            packed = packed_of[weight] = _fresh(f"{weight}.packed", shapes)
            constants[packed] = pack_kernel(graph.constants[weight], block)
            shapes[packed] = constants[packed].shape
        attrs = tuple(sorted((*node.attrs, (BLOCK_ATTR, block))))
        nodes.append(replace(node, inputs=(node.inputs[0], packed, *node.inputs[2:]), attrs=attrs))
    read = {v for n in nodes for v in n.inputs} | set(graph.outputs)
    for name in [c for c in constants if c not in read]:
        del constants[name], shapes[name]
    return replace(graph, constants=constants, nodes=nodes, shapes=shapes)


def for_target(graph: Graph, target: Target | str = "c") -> Graph:
    """``graph`` as it is compiled for ``target``: :func:`pack_conv_weights` by
    :func:`conv_blocks` on C targets."""
    return pack_conv_weights(graph, conv_blocks(target)) if packs_weights(target) else graph
