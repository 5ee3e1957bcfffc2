"""Convolutions of 1 to 3 spatial axes, and transposed ones, whose kernel comes packed by blocks of
output channels: kernel (K/b, C, *taps, b), one axis more than the data.

:mod:`.layout` packs the constant weight of a convolution of one group (``fused_conv``) or of a
transposed one (``fused_conv_transpose``, whose weight is (C, K, *taps)) once, when a network is
built, where a block divides the output channels: a workload whose kernel text has one axis more
than its data reads it packed. The convolution is then stage ``conv_blk`` (N, K/b, *spatial, b),
vectorized along each block's b output channels (one vector of kernel values times one broadcast
input value per tap, any stride or width), read back as stage ``conv`` (N, K, *spatial);
:func:`tile_conv_packed` is :func:`~autosched.ops.schedules.tile_conv2d_packed` for any number
of spatial axes. A transposed convolution's phases (:mod:`.layers_transposed`) are computed as
one blocked stage too (:func:`tile_blocked_root`), then interleaved into the output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .. import expr as te
from ..expr import Expr, Tensor, as_int
from ..ops.schedules import packed_conv_blocks, packed_conv_cols
from ..schedule import Schedule
from ..target import Target

#: a packed kernel's value for (output block, lane in it, input channel, taps)
ReadPacked = Callable[[Expr, Expr, Expr, list[Expr]], Expr]


def pack_weight(weight: np.ndarray, block: int, transposed: bool = False) -> np.ndarray:
    """A (K, C, *taps) kernel, or a transposed convolution's (C, K, *taps) one, packed as
    (K/block, C, *taps, block): each block of ``block`` output channels innermost."""
    w = np.swapaxes(weight, 0, 1) if transposed else weight
    k, c, *taps = w.shape
    if k % block:
        raise ValueError(f"pack_weight: block ({block}) must divide the output channels ({k})")
    return np.ascontiguousarray(np.moveaxis(w.reshape(k // block, block, c, *taps), 1, -1))


def unpack_weight(packed: np.ndarray, transposed: bool = False) -> np.ndarray:
    """The kernel a :func:`pack_weight` of the same ``transposed`` packed."""
    kb, c, *taps, block = packed.shape
    w = np.moveaxis(packed, -1, 1).reshape(kb * block, c, *taps)
    return np.ascontiguousarray(np.swapaxes(w, 0, 1) if transposed else w)


def is_packed(data: Sequence[int], kernel: Sequence[int]) -> bool:
    """Whether a kernel of shape ``kernel`` for data of shape ``data`` is packed (one axis more)."""
    return len(kernel) == len(data) + 1


def logical_kernel(kernel: Sequence[int], transposed: bool = False) -> tuple[int, ...]:
    """The shape of the kernel a packed ``kernel`` shape holds ((K, C, *taps), or (C, K, *taps)
    for a transposed convolution)."""
    kb, c, *taps, block = kernel
    return (c, kb * block, *taps) if transposed else (kb * block, c, *taps)


def blocked(shape: Sequence[int], block: int, body: Callable[[Expr, Expr, Expr, list[Expr]], Expr]) -> Tensor:
    """Stage ``conv_blk`` (N, K/block, *rest, block) of ``body(n, block index, lane, rest)``, and
    stage ``conv`` (N, K, *rest) reading it back; returns ``conv``."""
    n_, k_, *rest = shape
    blk = te.compute((n_, k_ // block, *rest, block), lambda n, fo, *ix: body(n, fo, ix[-1], list(ix[:-1])),
                     name="conv_blk")
    return te.compute(tuple(shape), lambda n, f, *ix: blk[(n, f // block, *ix, f % block)], name="conv")


def blocked_conv_stage(
    src: Tensor, out: tuple[int, ...], taps: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
    block: int, read: ReadPacked,
) -> Tensor:
    """:func:`.layers_conv.conv_stage` (one group) as stages ``conv_blk`` and ``conv``: the sum
    over the input channels and taps of src at ``o * stride + r * dilation`` times the packed
    kernel value ``read(block index, lane, channel, taps)``."""
    rc = te.reduce_axis(as_int(src.shape[1]), "rc")
    names = {1: ("rx",), 2: ("ry", "rx"), 3: ("rd", "ry", "rx")}[len(taps)]
    rs = [te.reduce_axis(t, n) for t, n in zip(taps, names, strict=True)]

    def body(n: Expr, fo: Expr, fi: Expr, o: list[Expr]) -> Expr:
        at = [(oi if s == 1 else oi * s) + (r.var if d == 1 else r.var * d)
              for oi, r, s, d in zip(o, rs, strides, dilations, strict=True)]
        return te.sum(src[(n, rc.var, *at)] * read(fo, fi, rc.var, [r.var for r in rs]), axis=[rc, *rs])

    return blocked(out, block, body)


def tile_conv_packed(s: Schedule, out: Tensor, acc: Tensor, target: Target | str = "c") -> None:
    """:func:`~autosched.ops.schedules.tile_conv2d_packed` for 1 to 3 spatial axes: ``out`` the
    (N, K, *spatial) stage whose loops are tiled, ``acc`` the (N, K/b, *spatial, b) stage
    ``conv_blk`` computed per register tile of (:func:`~autosched.ops.schedules.packed_conv_blocks`
    blocks) x (up to 8 output columns), the reduction outside it, kernel columns, tile columns and
    blocks unrolled, each block's lanes vectorized; parallel over (channel tile, first spatial
    axis) (one spatial axis: (image, channel tile)); the ``pad`` stage, if any, computed once,
    parallel over (image, channel)."""
    tgt = Target.parse(target)
    block = as_int(acc.shape[-1])
    cols = packed_conv_cols(as_int(out.shape[-1]))
    blocks = packed_conv_blocks(as_int(acc.shape[1]), tgt, cols)
    n, k, *space = s[out].op.axis
    ko, ki = s[out].split(k, block * blocks)
    xo, xi = s[out].split(space[-1], cols)
    s[out].reorder(n, ko, *space[:-1], xo, ki, xi)
    threads = (tgt.num_threads or 1) > 1
    if threads:
        s[out].parallel(s[out].fuse(ko, space[0]) if len(space) > 1 else s[out].fuse(n, ko))
    s[acc].compute_at(s[out], xo)
    an, ako, *aspace, aki = s[acc].op.axis
    rc, *taps = s[acc].op.reduce_axis
    s[acc].reorder(an, *aspace[:-1], rc, *taps, aspace[-1], ako, aki)
    for loop in (taps[-1], aspace[-1], ako):
        s[acc].unroll(loop)
    s[acc].vectorize(aki)
    if "pad" in s.stages:
        pad = s.stages["pad"].op.output(0)
        s[pad].vectorize(s[pad].op.axis[-1])
        if threads:
            s[pad].parallel(s[pad].fuse(*s[pad].op.axis[:2]))


def tile_blocked_root(s: Schedule, blk: Tensor, target: Target | str = "c") -> None:
    """Stage ``blk`` (N, K/b, *rest, b), computed whole before its consumer, in register tiles of
    (:func:`~autosched.ops.schedules.packed_conv_blocks` blocks) x (up to 8 positions of its last axis)
    accumulated in a local tile over the whole reduction and stored as whole vectors of b
    channels; parallel over (image, channel tile, next axis)."""
    tgt = Target.parse(target)
    acc = s.cache_write(blk, "local")
    n, fo, *rest, fi = s[blk].op.axis
    cols = packed_conv_cols(as_int(blk.shape[-2]))
    fo_o, fo_i = s[blk].split(fo, packed_conv_blocks(as_int(blk.shape[1]), tgt, cols))
    qo, qi = s[blk].split(rest[-1], cols)
    s[blk].reorder(n, fo_o, *rest[:-1], qo, fo_i, qi, fi)
    s[blk].vectorize(fi)
    if (tgt.num_threads or 1) > 1:
        s[blk].parallel(s[blk].fuse(n, fo_o, *rest[:1]) if len(rest) > 1 else s[blk].fuse(n, fo_o))
    s[acc].compute_at(s[blk], qo)
    an, afo, *arest, afi = s[acc].op.axis
    rc, *taps = s[acc].op.reduce_axis
    s[acc].reorder(an, *arest[:-1], rc, *taps, arest[-1], afo, afi)
    for loop in (taps[-1], arest[-1], afo):
        s[acc].unroll(loop)
    s[acc].vectorize(afi)
    if "pad" in s.stages:
        pad = s.stages["pad"].op.output(0)
        s[pad].vectorize(s[pad].op.axis[-1])
