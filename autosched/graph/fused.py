"""Fused workloads: one complex operator (or an elementwise chain) with its epilogue.

These are the workloads a network's tasks are made of. Each is registered like a built-in, so a
fused subgraph is a :class:`~autosched.ops.Workload` with JSON-scalar arguments: it is tuned,
logged and rebuilt like any operator. The epilogue (see :mod:`.epilogue`) is an argument, so
``fused_conv2d(1,64,56,56,64,3,3,1,1,1,'bias,add,relu')`` is a ResNet block's second convolution.

Input order: the operator's inputs (data, then weight), then one input per ``bias``/``add``
epilogue step, in order. Every reference is plain numpy, written apart from the te DAG.
"""

from __future__ import annotations

import numpy as np

from .. import expr as te
from ..expr import Expr, Tensor, as_int
from ..ops.common import accumulator, check_positive, conv_out_size, pad_nchw, scaled, windows
from ..ops.registry import workload
from ..ops.schedules import (
    SCHEDULES,
    packed_panel,
    tile_conv2d_packed,
    tile_dot,
    tile_matmul,
)
from ..schedule import Schedule
from ..target import Target
from . import epilogue as epi
from .conv_flat import flat_stages, tile_conv2d_flat
from .rows_cpu import elementwise_cpu


def conv_reference(
    data: np.ndarray, kernel: np.ndarray, *extras: np.ndarray,
    stride: int, pad: int, groups: int, epilogue: str,
) -> np.ndarray:
    acc = accumulator(data.dtype.name)
    x: np.ndarray = np.pad(data.astype(acc), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, w = data.shape
    k, cg, r, s = kernel.shape
    p = conv_out_size("fused_conv2d", h, r, stride, pad, 1)
    q = conv_out_size("fused_conv2d", w, s, stride, pad, 1)
    kg = k // groups
    out: np.ndarray = np.zeros((n, k, p, q), dtype=acc)
    for g in range(groups):
        xs = x[:, g * cg : (g + 1) * cg]
        ws: np.ndarray = kernel[g * kg : (g + 1) * kg].astype(acc)
        for ry in range(r):
            for rx in range(s):
                tap = windows(xs, (2, 3), (ry, rx), (p, q), stride, 1)
                out[:, g * kg : (g + 1) * kg] += np.einsum("nchw,kc->nkhw", tap, ws[:, :, ry, rx])
    return epi.reference(out, epilogue, 1, extras)


def _epilogue_flops(size: int, epilogue: str) -> int:
    return size * len(epi.parse(epilogue))


def conv_flops(
    N: int, C: int, H: int, W: int, K: int, R: int, S: int, stride: int, pad: int, groups: int, epilogue: str,
    *_: object,
) -> int:
    p = conv_out_size("fused_conv2d", H, R, stride, pad, 1)
    q = conv_out_size("fused_conv2d", W, S, stride, pad, 1)
    return 2 * N * K * p * q * (C // groups) * R * S + _epilogue_flops(N * K * p * q, epilogue)


@workload("fused_conv2d", reference=conv_reference, flops=conv_flops)
def fused_conv2d(
    N: int, C: int, H: int, W: int, K: int, R: int, S: int, stride: int = 1, pad: int = 0, groups: int = 1,
    epilogue: str = "", dtype: str = "float32",
) -> list[Tensor]:
    """NCHW grouped convolution (groups == C == K: depthwise) of data(N, C, H, W) with
    kernel(K, C/groups, R, S), then the epilogue, computed over flat pixels
    (:mod:`.conv_flat`): stages pad (unless 1x1 of stride 1), conv_flat, conv, then one per
    epilogue step."""
    check_positive("fused_conv2d", N=N, C=C, H=H, W=W, K=K, R=R, S=S, groups=groups)
    if C % groups or K % groups:
        raise ValueError(f"fused_conv2d: groups ({groups}) must divide C ({C}) and K ({K})")
    conv_out_size("fused_conv2d", H, R, stride, pad, 1)
    conv_out_size("fused_conv2d", W, S, stride, pad, 1)
    data = te.placeholder((N, C, H, W), dtype, name="data")
    kernel = te.placeholder((K, C // groups, R, S), dtype, name="kernel")
    extras, out = epi.build(flat_stages(data, kernel, stride, pad, groups), epilogue, 1)
    return [data, kernel, *extras, out]


def pack_kernel(kernel: np.ndarray, block: int) -> np.ndarray:
    """A (K, C, R, S) convolution kernel in ``fused_conv2d_packed``'s layout (K/block, C, R, S,
    block): each block of ``block`` output channels innermost, so that one vector load reads one
    kernel value of ``block`` channels."""
    k, c, r, s = kernel.shape
    if k % block:
        raise ValueError(f"pack_kernel: block ({block}) must divide the output channels ({k})")
    return np.ascontiguousarray(kernel.reshape(k // block, block, c, r, s).transpose(0, 2, 3, 4, 1))


def unpack_kernel(packed: np.ndarray) -> np.ndarray:
    """The (K, C, R, S) kernel of a kernel packed by :func:`pack_kernel`."""
    kb, c, r, s, block = packed.shape
    return np.ascontiguousarray(packed.transpose(0, 4, 1, 2, 3).reshape(kb * block, c, r, s))


def _packed_conv_ref(
    data: np.ndarray, packed: np.ndarray, *extras: np.ndarray,
    stride: int, pad: int, block: int, epilogue: str,
) -> np.ndarray:
    kernel = unpack_kernel(packed)
    return conv_reference(data, kernel, *extras, stride=stride, pad=pad, groups=1, epilogue=epilogue)


def _packed_conv_flops(
    N: int, C: int, H: int, W: int, K: int, R: int, S: int, stride: int, pad: int, block: int, epilogue: str,
    *_: object,
) -> int:
    return conv_flops(N, C, H, W, K, R, S, stride, pad, 1, epilogue)


@workload("fused_conv2d_packed", reference=_packed_conv_ref, flops=_packed_conv_flops)
def fused_conv2d_packed(
    N: int, C: int, H: int, W: int, K: int, R: int, S: int, stride: int = 1, pad: int = 0, block: int = 8,
    epilogue: str = "", dtype: str = "float32",
) -> list[Tensor]:
    """``fused_conv2d`` (one group) whose kernel comes packed by blocks of ``block`` output
    channels: kernel(K/block, C, R, S, block) (:func:`pack_kernel`; a network packs its weights
    once, when it is built). Stages pad, conv_blk (N, K/block, P, Q, block), conv (N, K, P, Q: the
    blocks back in NCHW order), then one per epilogue step."""
    check_positive("fused_conv2d_packed", N=N, C=C, H=H, W=W, K=K, R=R, S=S, block=block)
    if K % block:
        raise ValueError(f"fused_conv2d_packed: block ({block}) must divide K ({K})")
    p = conv_out_size("fused_conv2d_packed", H, R, stride, pad, 1)
    q = conv_out_size("fused_conv2d_packed", W, S, stride, pad, 1)
    data = te.placeholder((N, C, H, W), dtype, name="data")
    kernel = te.placeholder((K // block, C, R, S, block), dtype, name="kernel")
    src = pad_nchw(data, pad, 0) if pad > 0 else data
    rc, ry, rx = te.reduce_axis(C, "rc"), te.reduce_axis(R, "ry"), te.reduce_axis(S, "rx")

    def body(n: Expr, fo: Expr, y: Expr, x: Expr, fi: Expr) -> Expr:
        h = scaled(y, stride) + ry.var
        w = scaled(x, stride) + rx.var
        return te.sum(src[n, rc, h, w] * kernel[fo, rc, ry, rx, fi], axis=[rc, ry, rx])

    blocks = te.compute((N, K // block, p, q, block), body, name="conv_blk")
    conv = te.compute((N, K, p, q), lambda n, f, y, x: blocks[n, f // block, y, x, f % block], name="conv")
    extras, out = epi.build(conv, epilogue, 1)
    return [data, kernel, *extras, out]


def _dense_ref(data: np.ndarray, weight: np.ndarray, *extras: np.ndarray, epilogue: str) -> np.ndarray:
    acc = accumulator(data.dtype.name)
    return epi.reference(data.astype(acc) @ weight.astype(acc).T, epilogue, 1, extras)


def _dense_flops(M: int, N: int, K: int, epilogue: str, *_: object) -> int:
    return 2 * M * N * K + _epilogue_flops(M * N, epilogue)


@workload("fused_dense", reference=_dense_ref, flops=_dense_flops)
def fused_dense(M: int, N: int, K: int, epilogue: str = "", dtype: str = "float32") -> list[Tensor]:
    """out(M, N) = epilogue(data(M, K) @ weight(N, K).T); the bias is per column."""
    check_positive("fused_dense", M=M, N=N, K=K)
    data = te.placeholder((M, K), dtype, name="data")
    weight = te.placeholder((N, K), dtype, name="weight")
    k = te.reduce_axis(K, name="k")
    mm = te.compute((M, N), lambda i, j: te.sum(data[i, k] * weight[j, k], axis=k), name="dense")
    extras, out = epi.build(mm, epilogue, 1)
    return [data, weight, *extras, out]


def _bmm_ref(a: np.ndarray, b: np.ndarray, *extras: np.ndarray, epilogue: str) -> np.ndarray:
    acc = accumulator(a.dtype.name)
    return epi.reference(np.einsum("bik,bkj->bij", a.astype(acc), b.astype(acc)), epilogue, 2, extras)


def _bmm_flops(batch: int, M: int, N: int, K: int, epilogue: str, *_: object) -> int:
    return 2 * batch * M * N * K + _epilogue_flops(batch * M * N, epilogue)


@workload("fused_batch_matmul", reference=_bmm_ref, flops=_bmm_flops)
def fused_batch_matmul(
    batch: int, M: int, N: int, K: int, epilogue: str = "", dtype: str = "float32"
) -> list[Tensor]:
    """C(batch, M, N) = epilogue(A(batch, M, K) @ B(batch, K, N)); the bias is per column."""
    check_positive("fused_batch_matmul", batch=batch, M=M, N=N, K=K)
    A = te.placeholder((batch, M, K), dtype, name="A")
    B = te.placeholder((batch, K, N), dtype, name="B")
    k = te.reduce_axis(K, name="k")
    C = te.compute((batch, M, N), lambda b, i, j: te.sum(A[b, i, k] * B[b, k, j], axis=k), name="C")
    extras, out = epi.build(C, epilogue, 2)
    return [A, B, *extras, out]


def _elementwise_ref(data: np.ndarray, *extras: np.ndarray, epilogue: str) -> np.ndarray:
    return epi.reference(data, epilogue, 1, extras)


def _elementwise_flops(outer: int, channels: int, inner: int, epilogue: str, *_: object) -> int:
    return _epilogue_flops(outer * channels * inner, epilogue)


@workload("fused_elementwise", reference=_elementwise_ref, flops=_elementwise_flops)
def fused_elementwise(
    outer: int, channels: int, inner: int, epilogue: str = "relu", dtype: str = "float32"
) -> list[Tensor]:
    """out = epilogue(data) over data(outer, channels, inner), the bias per channel: an
    elementwise chain that follows no complex operator (a tensor of any rank, viewed in 3-D)."""
    check_positive("fused_elementwise", outer=outer, channels=channels, inner=inner)
    if not epi.parse(epilogue):
        raise ValueError("fused_elementwise: the epilogue must have at least one step")
    data = te.placeholder((outer, channels, inner), dtype, name="data")
    copy = te.compute((outer, channels, inner), lambda *ix: data[ix], name="load")
    extras, out = epi.build(copy, epilogue, 1)
    return [data, *extras, out]


def _global_pool_ref(data: np.ndarray) -> np.ndarray:
    return data.astype(accumulator(data.dtype.name)).mean(axis=(2, 3), keepdims=True)


def _global_pool_flops(N: int, C: int, H: int, W: int, *_: object) -> int:
    return N * C * (H * W + 1)


@workload("global_avg_pool2d", reference=_global_pool_ref, flops=_global_pool_flops)
def global_avg_pool2d(N: int, C: int, H: int, W: int, dtype: str = "float32") -> list[Tensor]:
    """pool(N, C, 1, 1): the mean of each channel of data(N, C, H, W); stages pool_sum, pool."""
    check_positive("global_avg_pool2d", N=N, C=C, H=H, W=W)
    data = te.placeholder((N, C, H, W), dtype, name="data")
    ry, rx = te.reduce_axis(H, "ry"), te.reduce_axis(W, "rx")
    total = te.compute(
        (N, C, 1, 1), lambda n, c, y, x: te.sum(data[n, c, ry, rx], axis=[ry, rx]), name="pool_sum"
    )
    scale = te.const(1.0 / (H * W), dtype)
    return [data, te.compute((N, C, 1, 1), lambda n, c, y, x: total[n, c, y, x] * scale, name="pool")]


def fused_conv2d_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """The default schedule of ``fused_conv2d``: :func:`.conv_flat.tile_conv2d_flat` over the
    output stage, the epilogue and the unflattening stage inlined into it, the flat convolution
    computed per register tile."""
    s = epi.inline_default(tensors, target)
    out, data, kernel = tensors[-1], tensors[0], tensors[1]
    if out.op.name != "conv":
        s[s.stages["conv"].op.output(0)].compute_inline()
    groups = as_int(data.shape[1]) // as_int(kernel.shape[1])
    tile_conv2d_flat(s, out, s.stages["conv_flat"].op.output(0), groups, target)
    return s


def fused_conv2d_packed_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """The default schedule of ``fused_conv2d_packed``:
    :func:`~autosched.ops.schedules.tile_conv2d_packed` over the output stage, the epilogue and
    the unblocking stage inlined into it, the blocked convolution computed per output tile."""
    s = epi.inline_default(tensors, target)
    out = tensors[-1]
    if out.op.name != "conv":
        s[s.stages["conv"].op.output(0)].compute_inline()
    tile_conv2d_packed(s, out, s.stages["conv_blk"].op.output(0), target)
    return s


def fused_dense_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """The default schedule of ``fused_dense``: the register-blocked ``data @ weight.T`` of
    :func:`~autosched.ops.schedules.tile_dot`, the epilogue inlined into the output stage and
    computed per tile from the accumulators."""
    s = epi.inline_default(tensors, target)
    tile_dot(s, tensors[-1], s.stages["dense"].op.output(0), target)
    return s


def fused_batch_matmul_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """The default schedule of ``fused_batch_matmul``: the loops of the hand-written matmul
    (:func:`~autosched.ops.schedules.tile_matmul`) per batch index over the output stage, the
    epilogue inlined into it and the product's accumulator tile computed inside each output tile."""
    s = epi.inline_default(tensors, target)
    out, (A, B) = tensors[-1], tensors[:2]
    prod = s.stages["C"].op.output(0)
    acc = s.cache_write(prod, "local") if out.op.name == "C" else prod
    tile_matmul(s, out, acc, packed_panel(s, B, acc, as_int(A.shape[1]), target), target)
    return s


SCHEDULES.update(
    fused_conv2d=fused_conv2d_cpu,
    fused_conv2d_packed=fused_conv2d_packed_cpu,
    fused_dense=fused_dense_cpu,
    fused_batch_matmul=fused_batch_matmul_cpu,
)
#: an elementwise chain: one vectorized loop nest (softmax and layer norm are registered there too)
SCHEDULES["fused_elementwise"] = elementwise_cpu
