"""Convolutions whose activations are blocked by channels: ``fused_conv2d_nchwc``.

A packed convolution (``fused_conv2d_packed``) reads NCHW data and writes NCHW output: each
output tile of b channels x a few columns goes out as b short rows a whole plane apart, and the
input values one kernel tap reads for consecutive channels lie a plane apart too. With the
activations themselves blocked, (N, C/b, H, W, b) as onnxruntime's and oneDNN's NCHWc kernels
keep them, a tile is written as consecutive vectors and the input a tile reads for b channels is
one run of bytes. Between convolutions of a network the blocked layout flows from one to the
next (:mod:`.activation_layout`), so nothing converts it back in between.

Measured (AMD EPYC Zen 3, AVX2, 2 threads, weights and output out of cache as in a network;
``benchmarks/bench_nchwc.py``, benchmarks/RESULTS.md 2026-12-07): ResNet-50's 1x1 convolutions
1.05-1.42x as fast as the packed kernel on NCHW data, its 3x3 ones 0.96-1.02x; inside the network
the 1x1 layers went from 57-83 to 95-129 GFLOP/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import expr as te
from ..dtypes import dtype as dtype_info
from ..expr import Expr, Tensor, as_int
from ..ops.common import check_positive, conv_out_size, scaled
from ..ops.registry import workload
from ..ops.schedules import SCHEDULES, packed_tile, padded_input
from ..schedule import Schedule
from ..target import Target
from . import epilogue as epi
from .fused import conv_flops, conv_reference, unpack_kernel


def block_nchw(x: np.ndarray, block: int) -> np.ndarray:
    """(N, C, H, W) as (N, C/block, H, W, block): channel ``c`` at ``[:, c // block, :, :, c % block]``."""
    n, c, h, w = x.shape
    return np.ascontiguousarray(x.reshape(n, c // block, block, h, w).transpose(0, 1, 3, 4, 2))


def unblock_nchw(x: np.ndarray) -> np.ndarray:
    """The (N, C, H, W) array of a blocked (N, C/b, H, W, b) one (:func:`block_nchw`'s inverse)."""
    n, cb, h, w, b = x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, cb * b, h, w))


def _reference(
    data: np.ndarray, kernel: np.ndarray, *extras: np.ndarray,
    stride: int, pad: int, block: int, epilogue: str,
) -> np.ndarray:
    nchw = [e if e.ndim == 1 else unblock_nchw(e) for e in extras]  # per-channel inputs stay as they are
    out = conv_reference(unblock_nchw(data), unpack_kernel(kernel), *nchw, stride=stride, pad=pad, groups=1,
                         epilogue=epilogue)
    return block_nchw(out, block)


def _flops(
    N: int, C: int, H: int, W: int, K: int, R: int, S: int, stride: int, pad: int, block: int, epilogue: str,
    *_: object,
) -> int:
    return conv_flops(N, C, H, W, K, R, S, stride, pad, 1, epilogue)


@workload("fused_conv2d_nchwc", reference=_reference, flops=_flops)
def fused_conv2d_nchwc(
    N: int, C: int, H: int, W: int, K: int, R: int, S: int, stride: int = 1, pad: int = 0, block: int = 8,
    epilogue: str = "", dtype: str = "float32",
) -> list[Tensor]:
    """A convolution (one group) of blocked data (N, C/block, H, W, block) with a kernel packed
    by output-channel blocks (K/block, C, R, S, block), writing blocked output (N, K/block, P, Q,
    block), then the epilogue (a per-channel input has K values; a residual is blocked like the
    output). Stages pad, conv_blk, then one per epilogue step."""
    check_positive("fused_conv2d_nchwc", N=N, C=C, H=H, W=W, K=K, R=R, S=S, block=block)
    if C % block or K % block:
        raise ValueError(f"fused_conv2d_nchwc: block ({block}) must divide C ({C}) and K ({K})")
    p = conv_out_size("fused_conv2d_nchwc", H, R, stride, pad, 1)
    q = conv_out_size("fused_conv2d_nchwc", W, S, stride, pad, 1)
    data = te.placeholder((N, C // block, H, W, block), dtype, name="data")
    kernel = te.placeholder((K // block, C, R, S, block), dtype, name="kernel")
    src = padded(data, pad) if pad > 0 else data
    rco, rci = te.reduce_axis(C // block, "rco"), te.reduce_axis(block, "rci")
    ry, rx = te.reduce_axis(R, "ry"), te.reduce_axis(S, "rx")

    def body(n: Expr, fo: Expr, y: Expr, x: Expr, fi: Expr) -> Expr:
        h, w = scaled(y, stride) + ry.var, scaled(x, stride) + rx.var
        value = src[n, rco, h, w, rci] * kernel[fo, rco * block + rci, ry, rx, fi]
        return te.sum(value, axis=[rco, ry, rx, rci])

    blocks = te.compute((N, K // block, p, q, block), body, name="conv_blk")
    extras, out = epi.build(blocks, epilogue, 1, block)
    return [data, kernel, *extras, out]


def padded(data: Tensor, pad: int) -> Tensor:
    """Stage ``pad``: blocked ``data`` (N, C/b, H, W, b) with ``pad`` zeros on both sides of H and W."""
    n_, c_, h_, w_, b_ = data.shape
    zero = te.const(0, data.dtype)

    def body(n: Expr, c: Expr, h: Expr, w: Expr, ci: Expr) -> Expr:
        inside = te.all(h >= pad, h < h_ + pad, w >= pad, w < w_ + pad)
        return te.if_then_else(inside, data[n, c, h - pad, w - pad, ci], zero)

    return te.compute((n_, c_, h_ + 2 * pad, w_ + 2 * pad, b_), body, name="pad")


@dataclass(frozen=True, slots=True)
class NchwcTile:
    """The choices of :func:`tile_conv2d_nchwc` (the knobs of its template)."""

    blocks: int  #: channel blocks per register tile
    cols: int  #: output columns per register tile
    channels_inner: bool  #: a block's input channels innermost in the reduction (unrolled, as the taps)
    rows_outer: bool = False  #: output rows outside the channel tiles (else inside)
    parallel: int = 2  #: outer loops fused into the parallel loop (1 or 2)


def nchwc_default(out: Tensor, acc: Tensor, target: Target) -> NchwcTile:
    """The hand-written tile of output stage ``out`` (N, K/b, P, Q, b) and reduction ``acc``:
    the packed kernel's (:func:`~autosched.ops.schedules.packed_tile`), the input channels of
    a block innermost for a 1x1 window (one block of broadcast values per loaded kernel vector:
    1.1-1.3x over a block's channels outermost on ResNet-50's 1x1 layers), outside the window's
    taps for a larger one (0.7x there: the taps then load their kernel vectors far apart)."""
    rco, ry, rx, rci = (as_int(ax.extent) for ax in acc.op.reduce_axis)
    item = dtype_info(acc.dtype).bytes
    src = next(t for t in acc.op.input_tensors if len(t.shape) == 5 and t.op.name != "kernel")
    kernel_bytes = as_int(acc.shape[1]) * as_int(acc.shape[-1]) * rco * rci * ry * rx * item
    input_bytes = math.prod(as_int(d) for d in src.shape) * item
    tile = packed_tile(as_int(out.shape[3]), as_int(out.shape[2]), as_int(acc.shape[1]), (ry, rx),
                       kernel_bytes, input_bytes, target)
    return NchwcTile(tile.blocks, tile.cols, (ry, rx) == (1, 1), tile.rows_outer)


def tile_conv2d_nchwc(
    s: Schedule, out: Tensor, acc: Tensor, target: Target, tile: NchwcTile | None = None
) -> None:
    """Register tiles of (``tile.blocks`` channel blocks x ``tile.cols`` columns) of ``out``
    (N, K/b, P, Q, b), each a vector of b channels per block and column; ``acc`` (the blocked
    reduction) computed per tile in registers: per input channel and kernel tap one vector of
    kernel values per block times one broadcast input value per column. Parallel over (channel
    tile, row); the padded input over (image, channel block). ``tile`` None: :func:`nchwc_default`."""
    tile = tile or nchwc_default(out, acc, target)
    threads = (target.num_threads or 1) > 1
    n, k, y, x, ki = s[out].op.axis
    ko, kb = s[out].split(k, tile.blocks)
    xo, xi = s[out].split(x, tile.cols)
    outer = [y, ko] if tile.rows_outer else [ko, y]
    s[out].reorder(n, *outer, xo, kb, xi, ki)
    s[out].vectorize(ki)
    if threads:
        s[out].parallel(s[out].fuse(*outer) if tile.parallel == 2 else outer[0])
    s[acc].compute_at(s[out], xo)
    an, ak, ay, ax, aki = s[acc].op.axis
    rco, ry, rx, rci = s[acc].op.reduce_axis
    window = [ry, rx, rci] if tile.channels_inner else [rci, ry, rx]
    s[acc].reorder(an, ay, rco, *window, ax, ak, aki)
    for loop in (rx, rci) if tile.channels_inner else (rx,):
        s[acc].unroll(loop)
    s[acc].unroll(ax)
    s[acc].unroll(ak)
    s[acc].vectorize(aki)
    padded_input(s, threads)


def output_and_accumulator(tensors: list[Tensor], target: Target | str) -> tuple[Schedule, Tensor, Tensor]:
    """The naive schedule of a ``fused_conv2d_nchwc``'s ``tensors`` with its epilogue inlined into
    the output stage, that stage, and the reduction computed per tile (``conv_blk``, or a local
    copy of it where it is the output)."""
    s = epi.inline_default(tensors, target)
    out = tensors[-1]
    blocks = s.stages["conv_blk"].op.output(0)
    acc = s.cache_write(blocks, "local") if out.op.name == "conv_blk" else blocks
    return s, out, acc


def fused_conv2d_nchwc_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """The default schedule of ``fused_conv2d_nchwc``: :func:`tile_conv2d_nchwc` with
    :func:`nchwc_default`'s tile."""
    tgt = Target.parse(target)
    s, out, acc = output_and_accumulator(tensors, tgt)
    tile_conv2d_nchwc(s, out, acc, tgt)
    return s


SCHEDULES["fused_conv2d_nchwc"] = fused_conv2d_nchwc_cpu
