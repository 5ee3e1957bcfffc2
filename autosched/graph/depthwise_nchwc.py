"""Depthwise convolutions on activations blocked by channels: ``fused_depthwise_nchwc``.

With the activations blocked (:mod:`.conv_nchwc`), a depthwise convolution is vectorized along
the b channels of a block: per output pixel and kernel tap, one vector of input times one vector
of kernel values, the kernel packed (C/b, R, S, b). It lets the blocked layout flow through
MobileNet-style blocks (1x1, depthwise, 1x1) instead of stopping at every depthwise layer.

The padding is a bounds check on the input read, not a padded copy: MobileNet-V2's depthwise
layers ran 1.19-1.61x as fast as the flat NCHW kernel (``fused_conv2d``) that way, and 0.72-1.23x
with a padded copy written first (a depthwise layer does too little work per byte to pay for that
pass; AMD EPYC Zen 3, AVX2, 2 threads, caches evicted as in a network, ``benchmarks/bench_nchwc.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import expr as te
from ..expr import Expr, Tensor, as_int
from ..ops.common import check_positive, conv_out_size, scaled
from ..ops.registry import workload
from ..ops.schedules import SCHEDULES, packed_conv_cols
from ..schedule import Schedule
from ..target import Target
from . import epilogue as epi
from .conv_nchwc import block_nchw, output_and_accumulator, padded, unblock_nchw
from .fused import conv_flops, conv_reference


def pack_depthwise(kernel: np.ndarray, block: int) -> np.ndarray:
    """A depthwise kernel (C, 1, R, S) as (C/block, R, S, block): channel ``c`` at ``[c // block,
    :, :, c % block]``."""
    c, _, r, s = kernel.shape
    return np.ascontiguousarray(kernel.reshape(c // block, block, r, s).transpose(0, 2, 3, 1))


def unpack_depthwise(packed: np.ndarray) -> np.ndarray:
    """The (C, 1, R, S) kernel of one packed by :func:`pack_depthwise`."""
    cb, r, s, b = packed.shape
    return np.ascontiguousarray(packed.transpose(0, 3, 1, 2).reshape(cb * b, 1, r, s))


def _reference(
    data: np.ndarray, kernel: np.ndarray, *extras: np.ndarray,
    stride: int, pad: int, block: int, epilogue: str,
) -> np.ndarray:
    nchw = [e if e.ndim == 1 else unblock_nchw(e) for e in extras]
    channels = kernel.shape[0] * kernel.shape[3]
    out = conv_reference(unblock_nchw(data), unpack_depthwise(kernel), *nchw, stride=stride, pad=pad,
                         groups=channels, epilogue=epilogue)
    return block_nchw(out, block)


def _flops(
    N: int, C: int, H: int, W: int, R: int, S: int, stride: int, pad: int, block: int, epilogue: str,
    *_: object,
) -> int:
    return conv_flops(N, C, H, W, C, R, S, stride, pad, C, epilogue)


@workload("fused_depthwise_nchwc", reference=_reference, flops=_flops)
def fused_depthwise_nchwc(
    N: int, C: int, H: int, W: int, R: int, S: int, stride: int = 1, pad: int = 0, block: int = 8,
    epilogue: str = "", dtype: str = "float32",
) -> list[Tensor]:
    """A depthwise convolution of blocked data (N, C/block, H, W, block) with a kernel packed
    (C/block, R, S, block) (:func:`pack_depthwise`), writing blocked output (N, C/block, P, Q,
    block), then the epilogue. Stages pad, conv_blk, then one per epilogue step."""
    check_positive("fused_depthwise_nchwc", N=N, C=C, H=H, W=W, R=R, S=S, block=block)
    if C % block:
        raise ValueError(f"fused_depthwise_nchwc: block ({block}) must divide C ({C})")
    p = conv_out_size("fused_depthwise_nchwc", H, R, stride, pad, 1)
    q = conv_out_size("fused_depthwise_nchwc", W, S, stride, pad, 1)
    data = te.placeholder((N, C // block, H, W, block), dtype, name="data")
    kernel = te.placeholder((C // block, R, S, block), dtype, name="kernel")
    src = padded(data, pad) if pad > 0 else data
    ry, rx = te.reduce_axis(R, "ry"), te.reduce_axis(S, "rx")

    def body(n: Expr, c: Expr, y: Expr, x: Expr, ci: Expr) -> Expr:
        h, w = scaled(y, stride) + ry.var, scaled(x, stride) + rx.var
        return te.sum(src[n, c, h, w, ci] * kernel[c, ry, rx, ci], axis=[ry, rx])

    blocks = te.compute((N, C // block, p, q, block), body, name="conv_blk")
    extras, out = epi.build(blocks, epilogue, 1, block)
    return [data, kernel, *extras, out]


@dataclass(frozen=True, slots=True)
class DepthwiseTile:
    """The choices of :func:`tile_depthwise_nchwc` (the knobs of its template)."""

    cols: int  #: output columns per register tile (one vector of a block's channels each)
    inline_pad: bool = True  #: the padding a bounds check on the read (else a padded copy first)


def tile_depthwise_nchwc(
    s: Schedule, out: Tensor, acc: Tensor, target: Target, tile: DepthwiseTile | None = None
) -> None:
    """Register tiles of ``tile.cols`` output pixels x one block of channels of ``out`` (N, C/b,
    P, Q, b); ``acc`` computed per tile, the window's taps and the columns unrolled, a vector of
    channels each. Parallel over (channel block, row). ``tile`` None: :func:`packed_conv_cols`
    columns, the padding inlined."""
    tile = tile or DepthwiseTile(packed_conv_cols(as_int(out.shape[3])))
    threads = (target.num_threads or 1) > 1
    n, c, y, x, ci = s[out].op.axis
    xo, xi = s[out].split(x, tile.cols)
    s[out].reorder(n, c, y, xo, xi, ci)
    s[out].vectorize(ci)
    if threads:
        s[out].parallel(s[out].fuse(c, y))
    s[acc].compute_at(s[out], xo)
    an, ac, ay, ax, aci = s[acc].op.axis
    ry, rx = s[acc].op.reduce_axis
    s[acc].reorder(an, ac, ay, ry, rx, ax, aci)
    for loop in (ry, rx, ax):
        s[acc].unroll(loop)
    s[acc].vectorize(aci)
    if "pad" in s.stages:
        pad = s[s.stages["pad"].op.output(0)]
        if tile.inline_pad:
            pad.compute_inline()
        else:
            pad.vectorize(pad.op.axis[-1])
            if threads:
                pad.parallel(pad.fuse(*pad.op.axis[:2]))


def fused_depthwise_nchwc_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """The default schedule of ``fused_depthwise_nchwc``: :func:`tile_depthwise_nchwc`'s default."""
    tgt = Target.parse(target)
    s, out, acc = output_and_accumulator(tensors, tgt)
    tile_depthwise_nchwc(s, out, acc, tgt)
    return s


SCHEDULES["fused_depthwise_nchwc"] = fused_depthwise_nchwc_cpu
