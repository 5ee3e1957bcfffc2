"""Activations blocked by channels from one convolution to the next (TVM's AlterOpLayout, NCHWc).

A packed convolution (:mod:`.layout`) is faster on blocked activations, (N, C/b, H, W, b), than on
NCHW ones (:mod:`.conv_nchwc`), but converting its input and output around every convolution
would cost what it saves. :func:`block_activations` rewrites a CPU graph so that the blocked layout
flows: convolutions that read each other's output (as data or as the residual their epilogue
adds) are blocked together, and layout changes are left only where a value crosses between a
blocked convolution and any other reader, once per value.

**Which convolutions.** A fused group (:func:`.fusion.fuse`) is a candidate when its anchor is a
2-D convolution with a packed kernel (``kernel_block`` b) whose input channels b divides and whose
output is not a graph output. Candidates are linked where one reads another's output with the
same block; a set of linked candidates is blocked when it holds two or more and more than the
layout changes it needs (each value it reads from outside, each value it makes that is read
outside): a convolution between two others in NCHW would pay two conversions for one blocked
layer, and in MobileNet-V2, whose depthwise layers run on NCHW data, every pair of 1x1 layers
linked by a residual block's output would pay two.

**The rewrite.** A blocked group's anchor gets the attribute :data:`BLOCKED_ATTR` (it reads and
writes blocked values, a ``fused_conv2d_nchwc`` workload), and every value its nodes make has the
blocked shape; its per-channel steps (``bias_add``, ``scale``, axis 1) index channel ``c`` at
``[c // b, ..., c % b]``, which is how the workload's epilogue reads them. A value read in the
other layout than it is made goes through a ``reshape`` (a view) and a ``transpose`` (a kernel):
(N, C, H, W) -> (N, C/b, b, H, W) -> (N, C/b, H, W, b), or back.
"""

from __future__ import annotations

from dataclasses import replace

from .fusion import Group, fuse
from .ir import PER_CHANNEL_OPS, Graph, Node, Shape
from .ir_core import fresh_name
from .repack import BLOCK_ATTR, BLOCKED_ATTR


def _block_of(graph: Graph, group: Group) -> int | None:
    """The block of ``group``'s activations if it is a candidate (see the module), else None."""
    anchor = group.nodes[0]
    block = dict(anchor.attrs).get(BLOCK_ATTR)
    if anchor.op != "conv2d" or block is None or group.output in graph.outputs:
        return None
    channels = graph.shapes[anchor.inputs[0]][1]
    if anchor.attr("groups") not in (1, channels):  # grouped, neither dense nor depthwise
        return None
    return block if channels % block == 0 else None


def _reads(group: Group) -> list[str]:
    """The activations ``group`` reads in its own layout: the anchor's data, and the operand of
    each full-shape epilogue step (a residual add, a mul...)."""
    reads = [group.nodes[0].inputs[0]]
    value = group.nodes[0].output
    for node in group.nodes[1:]:
        if node.op not in PER_CHANNEL_OPS:
            reads.extend(v for v in node.inputs if v != value)
        value = node.output
    return reads


def blocked_groups(graph: Graph) -> dict[Group, int]:
    """The groups of ``graph`` that run blocked, with their blocks (see the module)."""
    groups = fuse(graph)
    block = {g.output: b for g in groups if (b := _block_of(graph, g)) is not None}
    root = {v: v for v in block}

    def find(v: str) -> str:
        while root[v] != v:
            root[v] = root[root[v]]
            v = root[v]
        return v

    candidates = [g for g in groups if g.output in block]
    for g in candidates:
        for v in _reads(g):
            if block.get(v) == block[g.output]:
                root[find(v)] = find(g.output)
    readers: dict[str, list[Group]] = {}
    for g in groups:
        for v in set(g.inputs):
            readers.setdefault(v, []).append(g)
    members: dict[str, int] = {}
    changes: dict[str, set[tuple[str, bool]]] = {}  # (value, to blocked) per set of linked candidates
    for g in candidates:
        mine = find(g.output)
        members[mine] = members.get(mine, 0) + 1
        change = changes.setdefault(mine, set())
        change.update((v, True) for v in _reads(g) if v not in block or find(v) != mine)
        if any(h.output not in block or find(h.output) != mine or g.output not in _reads(h)
               for h in readers.get(g.output, [])):
            change.add((g.output, False))  # read by another group, or in another role
    kept = {r for r, n in members.items() if n >= 2 and n > len(changes[r])}
    return {g: block[g.output] for g in candidates if find(g.output) in kept}


def blocked_shape(shape: Shape, block: int) -> Shape:
    """(N, C, H, W) as (N, C/block, H, W, block)."""
    n, c, h, w = shape
    return (n, c // block, h, w, block)


class _Rewrite:
    """The nodes and shapes of the rewritten graph, with the layout changes made so far."""

    def __init__(self, graph: Graph) -> None:
        self.shapes = dict(graph.shapes)
        self.nodes: list[Node] = []
        self.made: dict[tuple[str, int], str] = {}  # (value, block; 0: NCHW) -> its copy in that layout

    def _add(self, op: str, source: str, base: str, shape: Shape, **attrs: object) -> str:
        out = fresh_name(base, self.shapes)
        self.shapes[out] = shape
        self.nodes.append(Node(op, (source,), out, tuple(sorted(attrs.items())), name=out))
        return out

    def blocked(self, value: str, block: int) -> str:
        """``value`` (NCHW) in blocks of ``block`` channels."""
        if (value, block) not in self.made:
            n, c, h, w = self.shapes[value]
            view = self._add("reshape", value, f"{value}.split", (n, c // block, block, h, w))
            shape = blocked_shape(self.shapes[value], block)
            self.made[value, block] = self._add("transpose", view, f"{value}.nchw{block}c", shape,
                                                perm=(0, 1, 3, 4, 2))
        return self.made[value, block]

    def nchw(self, value: str) -> str:
        """Blocked ``value`` in NCHW."""
        if (value, 0) not in self.made:
            n, cb, h, w, b = self.shapes[value]
            moved = self._add("transpose", value, f"{value}.unblock", (n, cb, b, h, w),
                              perm=(0, 1, 4, 2, 3))
            self.made[value, 0] = self._add("reshape", moved, f"{value}.nchw", (n, cb * b, h, w))
        return self.made[value, 0]


def block_activations(graph: Graph) -> Graph:
    """A copy of ``graph`` whose linked packed convolutions read and write blocked activations
    (see the module); ``graph`` itself when none are, or when it was rewritten so already."""
    if any(BLOCKED_ATTR in dict(n.attrs) for n in graph.nodes):
        return graph  # rewritten already
    chosen = blocked_groups(graph)
    if not chosen:
        return graph
    group_of = {n.output: g for g in chosen for n in g.nodes}
    rw = _Rewrite(graph)
    inside: dict[str, int] = {}  # every value a blocked group makes, with its block
    for node in graph.nodes:
        group = group_of.get(node.output)
        if group is None:
            inputs = tuple(rw.nchw(v) if v in inside else v for v in node.inputs)
            rw.nodes.append(replace(node, inputs=inputs))
            continue
        block = chosen[group]
        if node is group.nodes[0]:
            node = replace(node, attrs=tuple(sorted((*node.attrs, (BLOCKED_ATTR, block)))))
            layout = [True, *(False for _ in node.inputs[1:])]  # the data; the packed kernel; a bias
        else:
            previous = group.nodes[group.nodes.index(node) - 1].output
            layout = [v != previous and node.op not in PER_CHANNEL_OPS for v in node.inputs]
        inputs = tuple(_in_layout(rw, v, block, inside) if change else v
                       for v, change in zip(node.inputs, layout, strict=True))
        rw.nodes.append(replace(node, inputs=inputs))
        inside[node.output] = block
        rw.shapes[node.output] = blocked_shape(graph.shapes[node.output], block)
    return replace(graph, nodes=rw.nodes, shapes=rw.shapes)


def _in_layout(rw: _Rewrite, value: str, block: int, inside: dict[str, int]) -> str:
    """``value`` as a blocked group of ``block`` reads it: itself if made so, else converted."""
    if inside.get(value) == block:
        return value
    return rw.blocked(rw.nchw(value) if value in inside else value, block)
