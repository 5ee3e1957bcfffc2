"""Dense layers whose constant weight is packed once, when the network is built, for the CPU's
vectors: ``fused_dense_packed``.

``fused_dense`` reads its weight (N, K) row by row: each output is a dot product along K, summed
across a vector's lanes at the end (:func:`~autosched.ops.schedules.tile_dot`). Packed by blocks of
``block`` outputs, (ceil(N / block), K, block) with the last block padded with zeros, one vector
load reads one weight of ``block`` outputs, so the product is the register-blocked outer product of
a GEMM (:func:`tile_dense_packed`: a tile of up to 6 rows x one block of accumulators, one
broadcast value of the data per row and k): no lane sums, and each block a single contiguous
stream, which a matrix-vector product (M = 1: an LSTM step, a batch-1 classifier) reads once at
the memory's speed. :func:`pack_dense_weights` rewrites a graph's dense nodes that read constant
weights (``for_target`` calls it for C targets), as :mod:`.layout` packs convolution kernels.
"""

from __future__ import annotations

import math

import numpy as np

from .. import expr as te
from ..expr import Expr, Tensor, as_int
from ..ops.common import accumulator, check_positive
from ..ops.registry import workload
from ..ops.schedules import SCHEDULES, matmul_tile
from ..schedule import Schedule
from ..target import Target
from . import epilogue as epi
from .ir import Graph, Node
from .repack import PackPlan, with_packed_weights

#: the attribute of a dense node whose weight input is packed, holding the block
DENSE_BLOCK_ATTR = "weight_block"


def dense_block(target: Target | str, outputs: int) -> int:
    """Outputs per weight block of a dense layer of ``outputs`` on ``target``: the columns of its
    matmul register tile (4 vectors with 32 vector registers, 2 with 16), or the power of two
    that holds the outputs where they are fewer (a layer of 5 outputs pads them to 8, not 64)."""
    tile = matmul_tile(Target.parse(target), "float32")[1]
    return tile if outputs >= tile else 1 << (outputs - 1).bit_length()


def pack_dense_weight(weight: np.ndarray, block: int) -> np.ndarray:
    """A (N, K) dense weight in ``fused_dense_packed``'s layout (ceil(N / block), K, block): each
    block of ``block`` outputs innermost, the outputs past N zeros."""
    n, k = weight.shape
    padded = np.zeros((math.ceil(n / block) * block, k), weight.dtype)
    padded[:n] = weight
    return np.ascontiguousarray(padded.reshape(-1, block, k).transpose(0, 2, 1))


def unpack_dense_weight(packed: np.ndarray, n: int) -> np.ndarray:
    """The (N, K) weight of a weight packed by :func:`pack_dense_weight`."""
    blocks, k, block = packed.shape
    return np.ascontiguousarray(packed.transpose(0, 2, 1).reshape(blocks * block, k)[:n])


def _ref(data: np.ndarray, packed: np.ndarray, *extras: np.ndarray, N: int, epilogue: str) -> np.ndarray:
    acc = accumulator(data.dtype.name)
    weight = unpack_dense_weight(packed, N)
    return epi.reference(data.astype(acc) @ weight.astype(acc).T, epilogue, 1, extras)


def _flops(M: int, N: int, K: int, block: int, epilogue: str, *_: object) -> int:
    return 2 * M * N * K + M * N * len(epi.parse(epilogue))


@workload("fused_dense_packed", reference=_ref, flops=_flops)
def fused_dense_packed(
    M: int, N: int, K: int, block: int = 16, epilogue: str = "", dtype: str = "float32"
) -> list[Tensor]:
    """``fused_dense`` whose weight comes packed by blocks of ``block`` outputs:
    weight(ceil(N/block), K, block) (:func:`pack_dense_weight`). Stages dense_blk (M, N rounded up
    to whole blocks: the padding's products are zeros, computed so that no block has a partial
    tile), dense (M, N), then the epilogue."""
    check_positive("fused_dense_packed", M=M, N=N, K=K, block=block)
    blocks = math.ceil(N / block)
    data = te.placeholder((M, K), dtype, name="data")
    weight = te.placeholder((blocks, K, block), dtype, name="weight")
    k = te.reduce_axis(K, name="k")

    def body(i: Expr, j: Expr) -> Expr:
        return te.sum(data[i, k] * weight[j // block, k, j % block], axis=k)

    padded = te.compute((M, blocks * block), body, name="dense_blk")
    mm = te.compute((M, N), lambda i, j: padded[i, j], name="dense")
    extras, out = epi.build(mm, epilogue, 1)
    return [data, weight, *extras, out]


def tile_dense_packed(s: Schedule, out: Tensor, acc: Tensor, block: int, target: Target | str = "c") -> None:
    """The register-blocked product of ``fused_dense_packed``: ``out`` (M, N) (the product or its
    epilogue's last stage) tiled by (up to 6 rows, one weight block), the product ``acc`` computed
    per tile over k (4 at a time, unrolled) into the tile's accumulators, one vector load of the
    block per k and one broadcast per row; weight blocks in parallel (with the row tiles when the
    blocks are fewer than two per thread)."""
    tgt = Target.parse(target)
    rows, cols = (as_int(d) for d in out.shape)
    mr = min(rows, matmul_tile(tgt, out.dtype)[0])
    i, j = s[out].op.axis
    io, jo, ii, ji = s[out].tile(i, j, mr, block)
    s[out].reorder(jo, io, ii, ji)
    s[out].vectorize(ji)
    at = io
    threads = tgt.num_threads or 1
    if threads > 1:
        few = math.ceil(cols / block) < 2 * threads and rows > mr
        at = s[out].fuse(jo, io) if few else io
        s[out].parallel(at if few else jo)
    s[acc].compute_at(s[out], at)
    ai, aj = s[acc].op.axis
    (ak,) = s[acc].op.reduce_axis
    ko, ki = s[acc].split(ak, 4)
    s[acc].reorder(ko, ki, ai, aj)
    s[acc].unroll(ki)
    s[acc].unroll(ai)
    s[acc].vectorize(aj)


def fused_dense_packed_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """The default schedule of ``fused_dense_packed``: :func:`tile_dense_packed`, the epilogue
    inlined into the output stage and computed per tile from the accumulators (whole blocks)."""
    s = epi.inline_default(tensors, target)
    out = tensors[-1]
    if out.op.name != "dense":
        s[s.stages["dense"].op.output(0)].compute_inline()
    tile_dense_packed(s, out, s.stages["dense_blk"].op.output(0), as_int(tensors[1].shape[2]), target)
    return s


SCHEDULES["fused_dense_packed"] = fused_dense_packed_cpu


def pack_dense_weights(graph: Graph, target: Target | str) -> Graph:
    """A copy of ``graph`` whose dense nodes with a constant weight read it packed for ``target``
    (:func:`pack_dense_weight` by :func:`dense_block`, named ``<weight>.packed``), with the block
    in their attribute :data:`DENSE_BLOCK_ATTR`; a weight no other node reads is dropped.
    Idempotent; ``graph`` is left as it was."""

    def plan(node: Node) -> PackPlan | None:
        weight = node.inputs[1] if node.op == "dense" else ""
        if weight not in graph.constants or DENSE_BLOCK_ATTR in dict(node.attrs):
            return None
        block = dense_block(target, graph.shapes[weight][0])
        return PackPlan(weight, DENSE_BLOCK_ATTR, block, lambda w: pack_dense_weight(w, block))

    return with_packed_weights(graph, plan)
