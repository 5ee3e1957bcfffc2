"""Convolutions of 1 to 3 spatial axes, each with an epilogue; what transposed ones share with them.

``fused_conv('1x3x16x56x56', '64x3x3x7x7', '1,2,2', '1,3,3,1,3,3', '1,1,1', 1, 'bias,relu')`` is
3D-ResNet-18's first layer: data and weight shapes as text, ONNX's per-axis strides, pads (every
begin, then every end) and dilations, then groups and the epilogue (:mod:`.epilogue`).

The stages (``pad``, ``conv``) and the tiled default schedule serve the transposed convolutions
of :mod:`.layers_transposed` too. The reference is plain numpy written apart from the te DAG.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np

from .. import expr as te
from ..expr import Expr, Tensor, as_int, static_shape
from ..ops.common import accumulator
from ..ops.registry import workload
from ..ops.schedules import SCHEDULES, conv_tile, vector_regs
from ..schedule import Schedule
from ..target import Target
from . import epilogue as epi
from .builder_nn import window_out
from .conv_packed import blocked_conv_stage, is_packed, logical_kernel, tile_conv_packed, unpack_weight
from .layers import dims, int_list

_REDUCE_NAMES = {1: ("rx",), 2: ("ry", "rx"), 3: ("rd", "ry", "rx")}


def conv_geometry(
    op: str, shape: str, kernel: str, strides: str, pads: str, dilations: str, transposed: bool = False
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(data shape, weight shape, strides, pads, dilations), checked; the weight's shape as
    unpacked where it comes packed (:mod:`.conv_packed`)."""
    x, w = dims(shape), dims(kernel)
    if is_packed(x, w):
        w = logical_kernel(w, transposed)
    rank = len(x) - 2
    s, p = int_list(strides, f"{op}: strides"), int_list(pads, f"{op}: pads")
    d = int_list(dilations, f"{op}: dilations")
    if not 1 <= rank <= 3 or len(w) != len(x):
        raise ValueError(f"{op}: data {shape!r} and weight {kernel!r} must both have 3 to 5 axes")
    if len(s) != rank or len(d) != rank or len(p) != 2 * rank or min(s + d) < 1 or min(p) < 0:
        raise ValueError(f"{op}: {rank} strides, dilations >= 1 and {2 * rank} pads >= 0 needed, got "
                         f"{strides!r}, {dilations!r}, {pads!r}")
    return x, w, s, p, d


def pad_spatial(data: Tensor, begin: tuple[int, ...], extent: tuple[int, ...], fill: float) -> Tensor:
    """Stage ``pad``: ``data`` (N, C, *spatial) moved by ``begin`` along each spatial axis into
    ``extent`` elements, ``fill`` around it (an extent short of begin + size crops the end)."""
    shape = static_shape(data.shape)
    value = te.const(fill, data.dtype)

    def body(n: Expr, c: Expr, *ix: Expr) -> Expr:
        conds = [cond for i, b, e, size in zip(ix, begin, extent, shape[2:], strict=True)
                 for cond in ([i >= b] if b else []) + ([i < b + size] if e > b + size else [])]
        moved = data[(n, c, *(i - b if b else i for i, b in zip(ix, begin, strict=True)))]
        return te.if_then_else(te.all(*conds), moved, value) if conds else moved

    return te.compute((*shape[:2], *extent), body, name="pad")


def conv_stage(
    src: Tensor, kernel: Tensor, out: tuple[int, ...], strides: tuple[int, ...], dilations: tuple[int, ...],
    groups: int, read_weight: Callable[[Expr, Expr, list[Expr]], Expr],
) -> Tensor:
    """Stage ``conv`` (N, K, *out): the sum over rc and the kernel taps of src at
    ``o * stride + r * dilation`` times the weight value ``read_weight(f, rc, taps)``."""
    c = as_int(src.shape[1])
    k = out[1]
    cg, kg = c // groups, k // groups
    taps = static_shape(kernel.shape)[2:]
    rc = te.reduce_axis(cg, "rc")
    rs = [te.reduce_axis(t, n) for t, n in zip(taps, _REDUCE_NAMES[len(taps)], strict=True)]

    def body(n: Expr, f: Expr, *o: Expr) -> Expr:
        ch = rc.var if groups == 1 else (f // kg) * cg + rc.var
        at = [(oi if s == 1 else oi * s) + (r.var if d == 1 else r.var * d)
              for oi, r, s, d in zip(o, rs, strides, dilations, strict=True)]
        weight = read_weight(f, rc.var, [r.var for r in rs])
        return te.sum(src[(n, ch, *at)] * weight, axis=[rc, *rs])

    return te.compute(out, body, name="conv")


def _conv_ref(data: np.ndarray, kernel: np.ndarray, *extras: np.ndarray, strides: str, pads: str,
              dilations: str, groups: int, epilogue: str) -> np.ndarray:
    s, p, d = int_list(strides, "strides"), int_list(pads, "pads"), int_list(dilations, "dilations")
    rank = data.ndim - 2
    if is_packed(data.shape, kernel.shape):
        kernel = unpack_weight(kernel)
    acc = accumulator(data.dtype.name)
    x: np.ndarray = np.pad(data.astype(acc), [(0, 0), (0, 0), *zip(p[:rank], p[rank:], strict=True)])
    taps = kernel.shape[2:]
    out_sp = [(x.shape[2 + i] - d[i] * (taps[i] - 1) - 1) // s[i] + 1 for i in range(rank)]
    out = np.zeros((data.shape[0], kernel.shape[0], *out_sp), acc)
    cg, kg = data.shape[1] // groups, kernel.shape[0] // groups
    for g in range(groups):
        for tap in itertools.product(*(range(t) for t in taps)):
            window = tuple(slice(t * d[i], t * d[i] + s[i] * (out_sp[i] - 1) + 1, s[i])
                           for i, t in enumerate(tap))
            part = x[(slice(None), slice(g * cg, (g + 1) * cg), *window)]
            taken: tuple[slice | int, ...] = (slice(g * kg, (g + 1) * kg), slice(None), *tap)
            w: np.ndarray = kernel[taken].astype(acc)
            out[:, g * kg : (g + 1) * kg] += np.einsum("nc...,kc->nk...", part, w)
    return epi.reference(out, epilogue, 1, extras)


def _conv_out(x: tuple[int, ...], w: tuple[int, ...], s: tuple[int, ...], p: tuple[int, ...],
              d: tuple[int, ...]) -> tuple[int, ...]:
    rank = len(s)
    out = tuple(window_out(x[2 + i], w[2 + i], s[i], p[i], p[rank + i], d[i], False) for i in range(rank))
    if min(out) < 1:
        raise ValueError(f"fused_conv: kernel {w[2:]} (dilations {d}) does not fit data {x[2:]} "
                         f"padded by {p}")
    return (x[0], w[0], *out)


def _conv_flops(shape: str, kernel: str, strides: str, pads: str, dilations: str, groups: int, epilogue: str,
                *_: object) -> int:
    x, w, s, p, d = conv_geometry("fused_conv", shape, kernel, strides, pads, dilations)
    out = math.prod(_conv_out(x, w, s, p, d))
    return 2 * out * math.prod(w[1:]) + out * len(epi.parse(epilogue))


@workload("fused_conv", reference=_conv_ref, flops=_conv_flops)
def fused_conv(
    shape: str, kernel: str, strides: str, pads: str, dilations: str, groups: int = 1, epilogue: str = "",
    dtype: str = "float32",
) -> list[Tensor]:
    """Convolution of data(shape: N, C, *spatial, 1 to 3 axes) with kernel(K, C/groups, *taps),
    ONNX's strides, pads and dilations, then the epilogue; stages pad, conv, one per epilogue step.
    A kernel of one axis more is packed, (K/b, C, *taps, b), one group only: stages pad,
    conv_blk, conv, the epilogue (:mod:`.conv_packed`)."""
    x, w, s, p, d = conv_geometry("fused_conv", shape, kernel, strides, pads, dilations)
    if x[1] != w[1] * groups or w[0] % groups:
        raise ValueError(f"fused_conv: weight {kernel!r} does not fit data {shape!r} with {groups} groups")
    given = dims(kernel)
    if is_packed(x, given) and groups != 1:
        raise ValueError(f"fused_conv: a packed kernel {kernel!r} needs groups 1, got {groups}")
    out = _conv_out(x, w, s, p, d)
    rank = len(s)
    data = te.placeholder(x, dtype, name="data")
    weight = te.placeholder(given, dtype, name="kernel")
    extent = tuple(x[2 + i] + p[i] + p[rank + i] for i in range(rank))
    src = pad_spatial(data, p[:rank], extent, 0.0) if any(p) else data
    if is_packed(x, given):
        conv = blocked_conv_stage(src, out, w[2:], s, d, given[-1],
                                  lambda fo, fi, c, taps: weight[(fo, c, *taps, fi)])
    else:
        conv = conv_stage(src, weight, out, s, d, groups, lambda f, c, taps: weight[(f, c, *taps)])
    extras, result = epi.build(conv, epilogue, 1)
    return [data, weight, *extras, result]


def tile_conv_nd(s: Schedule, out: Tensor, acc: Tensor, target: Target | str = "c") -> None:
    """:func:`~autosched.ops.schedules.tile_conv2d_nchw` for 1 to 3 spatial axes: ``out`` the
    (N, K, *spatial) stage whose loops are tiled, ``acc`` the reduction computed per tile of
    (channels x output columns) in registers, vectorized along the columns, the channels of a tile
    a divisor of K (a partial tile would check its bounds in the innermost loop); parallel over
    (channel block, first spatial axis) (with 1 spatial axis: (image, channel block)); the
    ``pad`` stage, if any, computed once, parallel over (image, channel)."""
    tgt = Target.parse(target)
    lanes = tgt.vector_lanes(out.dtype)
    channels = as_int(out.shape[1])
    cols, most = conv_tile(as_int(out.shape[-1]), channels, lanes, vector_regs(tgt))
    kt = max(d for d in range(1, most + 1) if channels % d == 0)  # no partial tile: no bounds checks
    n, k, *space = s[out].op.axis
    ko, ki = s[out].split(k, kt)
    xo, xi = s[out].split(space[-1], cols)
    s[out].reorder(n, ko, *space[:-1], xo, ki, xi)
    s[out].vectorize(xi)
    threads = (tgt.num_threads or 1) > 1
    if threads:
        s[out].parallel(s[out].fuse(ko, space[0]) if len(space) > 1 else s[out].fuse(n, ko))
    s[acc].compute_at(s[out], xo)
    an, ak, *aspace = s[acc].op.axis
    rc, *taps = s[acc].op.reduce_axis
    s[acc].reorder(an, *aspace[:-1], rc, *taps, ak, aspace[-1])
    s[acc].unroll(taps[-1])
    s[acc].unroll(ak)
    s[acc].vectorize(aspace[-1])
    if "pad" in s.stages:
        pad = s.stages["pad"].op.output(0)
        s[pad].vectorize(s[pad].op.axis[-1])
        if threads:
            s[pad].parallel(s[pad].fuse(*s[pad].op.axis[:2]))


def conv_nd_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """The default schedule of ``fused_conv`` (and of a ``fused_conv_transpose`` computed as a
    convolution): :func:`tile_conv_nd` over the output stage, the epilogue inlined into it, the
    convolution's accumulator tile computed inside each output tile; with a packed kernel
    :func:`.conv_packed.tile_conv_packed`."""
    s = epi.inline_default(tensors, target)
    out = tensors[-1]
    conv = s.stages["conv"].op.output(0)
    if "conv_blk" in s.stages:  # a packed kernel: vectorized along its blocks of output channels
        if out.op.name != "conv":
            s[conv].compute_inline()
        tile_conv_packed(s, out, s.stages["conv_blk"].op.output(0), target)
        return s
    tile_conv_nd(s, out, s.cache_write(conv, "local") if out.op.name == "conv" else conv, target)
    return s


SCHEDULES["fused_conv"] = conv_nd_cpu
