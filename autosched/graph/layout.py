"""Weight layouts chosen for the target: convolution kernels packed by output-channel blocks.

On a CPU a direct convolution with many values per output is fastest vectorized along output
channels: one vector of kernel values for a block of channels times one broadcast input value, for
any stride and any output width. That needs the kernel's channels innermost, so :func:`for_target`
rewrites a graph for a C target: each convolution (2-D, N-d or transposed) of one group whose
weight is a constant and whose output channels a block divides reads a packed copy of its weight
(``fused_conv2d_packed``'s layout; N-d and transposed ones :mod:`.conv_packed`'s), made once here,
as onnxruntime and oneDNN pack weights when a model is loaded; but a 2-D one computed over flat
pixels (:func:`.conv_flat.runs_flat`: 1x1 of stride 1 and few channels, or few values per
output) and an N-d or transposed one of fewer than :data:`.conv_flat.FLAT_REDUCTION` values per
output keep theirs. A block is one vector of float32 where the target's vectors hold 8 or more
(16 with AVX-512), else :data:`CONV_BLOCK` channels; a convolution whose channels that does not
divide gets blocks of :data:`CONV_BLOCK` (:func:`conv_blocks`). GPU targets keep the weights as
they are, and compute 2-D convolutions directly, one output pixel from its window
(:func:`direct_convs`).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import replace

import numpy as np

from ..target import Target
from .activation_layout import block_activations, blocked_groups
from .conv_flat import FLAT_REDUCTION, is_pointwise, runs_flat
from .conv_packed import pack_weight
from .dense_packed import pack_dense_weights
from .depthwise_nchwc import pack_depthwise
from .fused import pack_kernel
from .ir import Graph, Node
from .repack import BLOCK_ATTR, PackPlan, with_packed_weights
from .sink_reshape import sink_reshapes

#: output channels per kernel block at least: one AVX2 vector of float32, two NEON vectors
CONV_BLOCK = 8


def packs_weights(target: Target | str) -> bool:
    """Whether graphs compiled for ``target`` get packed convolution kernels (C targets)."""
    return Target.parse(target).is_cpu


def conv_blocks(target: Target | str) -> tuple[int, ...]:
    """The kernel blocks (output channels) for ``target``'s convolutions, preferred first: one
    float32 vector where it holds more than :data:`CONV_BLOCK`, then :data:`CONV_BLOCK`."""
    tgt = Target.parse(target)
    lanes = tgt.vector_lanes("float32") if tgt.vector_bytes is not None else CONV_BLOCK
    return (lanes, CONV_BLOCK) if lanes > CONV_BLOCK else (CONV_BLOCK,)


#: the convolution operators whose weight :func:`pack_conv_weights` packs
PACKED_OPS = frozenset({"conv2d", "conv", "conv_transpose"})


def _block(graph: Graph, node: Node, blocks: tuple[int, ...], joining: Collection[str] = ()) -> int | None:
    """The block of ``blocks`` that ``node``'s weight is packed by, None if it is not packed (a
    1x1 convolution that would run flat, or a depthwise one, is packed where its output is in
    ``joining``: it joins a chain of blocked activations)."""
    if node.op not in PACKED_OPS or BLOCK_ATTR in dict(node.attrs) or node.inputs[1] not in graph.constants:
        return None
    shape = graph.shapes[node.inputs[1]]
    if node.op == "conv2d" and _depthwise(graph, node):
        return next((b for b in blocks if shape[0] % b == 0), None) if node.output in joining else None
    if node.attr("groups") != 1:
        return None
    if node.op == "conv2d":
        k, c, r, s = shape
        stride, pad = node.attr("stride"), node.attr("pad")
        wanted = node.output in joining and is_pointwise(r, s, stride, pad)
        if runs_flat(c, r, s, stride, pad, k) and not wanted:  # vectorized along pixels instead
            return None
    elif math.prod(shape[1:] if node.op == "conv" else (shape[0], *shape[2:])) < FLAT_REDUCTION:
        return None  # few values per output: (K, C, *taps), or a transposed one's (C, K, *taps)
    channels = shape[1] if node.op == "conv_transpose" else shape[0]
    return next((b for b in blocks if channels % b == 0), None)


def _depthwise(graph: Graph, node: Node) -> bool:
    """Whether 2-D convolution ``node`` is depthwise: one group per input and output channel."""
    groups = node.attr("groups")
    return groups > 1 and graph.shapes[node.inputs[1]][0] == groups == graph.shapes[node.inputs[0]][1]


def _packed(weight: np.ndarray, op: str, block: int, depthwise: bool) -> np.ndarray:
    """``weight`` of a node of ``op`` packed by ``block`` output channels."""
    if depthwise:
        return pack_depthwise(weight, block)
    if op == "conv2d":
        return pack_kernel(weight, block)
    return pack_weight(weight, block, transposed=op == "conv_transpose")


def pack_conv_weights(
    graph: Graph, blocks: tuple[int, ...] = (CONV_BLOCK,), joining: Collection[str] = ()
) -> Graph:
    """A copy of ``graph`` whose packable convolutions (see the module) read packed weights,
    named ``<weight>.packed``, by the first of ``blocks`` that divides their output channels; a
    weight no other node reads is dropped. The 1x1 convolutions of stride 1 and the depthwise ones
    whose outputs are in ``joining`` are packed too (they join blocked activations, where a 1x1
    one would otherwise run flat and a depthwise one is never packed). Idempotent; ``graph`` is left as it
    was."""

    def plan(node: Node) -> PackPlan | None:
        block = _block(graph, node, blocks, joining)
        if block is None:
            return None
        op, depthwise = node.op, node.op == "conv2d" and _depthwise(graph, node)
        key = (node.inputs[1], op == "conv_transpose", depthwise, block)
        return PackPlan(key, BLOCK_ATTR, block, lambda weight: _packed(weight, op, block, depthwise))

    return with_packed_weights(graph, plan)


def direct_convs(graph: Graph) -> Graph:
    """A copy of ``graph`` whose 2-D convolutions are N-d ``conv`` nodes of two spatial axes: each
    output pixel computed directly from its window (``fused_conv``), as a GPU thread does, rather
    than over flat pixels (``fused_conv2d``, a CPU's vector layout, which needs a second pass to
    drop the padding columns). ``graph`` itself where it has none."""

    def direct(node: Node) -> Node:
        if node.op != "conv2d":
            return node
        stride, pad = node.attr("stride"), node.attr("pad")
        attrs = {"strides": (stride, stride), "pads": (pad,) * 4, "dilations": (1, 1),
                 "groups": node.attr("groups")}
        return replace(node, op="conv", attrs=tuple(sorted(attrs.items())))

    if not any(n.op == "conv2d" for n in graph.nodes):
        return graph
    return replace(graph, nodes=[direct(n) for n in graph.nodes])


def for_target(graph: Graph, target: Target | str = "c") -> Graph:
    """``graph`` as it is compiled for ``target``: reshapes moved below the elementwise chains
    after them (:func:`.sink_reshape.sink_reshapes`), then on C targets :func:`pack_conv_weights`
    by :func:`conv_blocks`, the activations between packed convolutions blocked
    (:func:`.activation_layout.block_activations`) and the dense weights packed
    (:func:`.dense_packed.pack_dense_weights`), on GPU targets the 2-D convolutions computed
    directly (:func:`direct_convs`)."""
    graph = sink_reshapes(graph)
    if not packs_weights(target):
        return direct_convs(graph)
    blocks = conv_blocks(target)
    convs = _blocked_convs(graph, blocks) if blocks_activations(target) else pack_conv_weights(graph, blocks)
    return pack_dense_weights(convs, target)


def blocks_activations(target: Target | str) -> bool:
    """Whether graphs compiled for C target ``target`` keep activations blocked between packed
    convolutions (:mod:`.activation_layout`): where a float32 vector holds 4 lanes or more. On a
    core without float vectors (a Cortex-M4) a blocked kernel only unrolls more code: DS-CNN's
    flash grew by a fifth."""
    tgt = Target.parse(target)
    return tgt.vector_bytes is not None and tgt.vector_lanes("float32") >= 4


def _blocked_convs(graph: Graph, blocks: tuple[int, ...]) -> Graph:
    """``graph`` with its convolution weights packed and the activations between them blocked.
    A 1x1 convolution that would run flat on NCHW data (:func:`.conv_flat.runs_flat`), or a
    depthwise one, is packed when it joins a chain of blocked ones: ResNet-50's 64->256 and 128->512
    layers, which link every bottleneck to the next, MobileNet-V2's 1x1 and depthwise layers;
    elsewhere they stay flat."""
    every = {n.output for n in graph.nodes if n.op == "conv2d"}
    joined = {g.nodes[0].output for g in blocked_groups(pack_conv_weights(graph, blocks, every))} & every
    return block_activations(pack_conv_weights(graph, blocks, joined))
