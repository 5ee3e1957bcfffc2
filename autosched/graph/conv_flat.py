"""NCHW convolutions computed over flat pixels: 1x1 ones as matrix products, windowed ones
(depthwise, grouped, any stride) over the flat rows of the padded image.

A 1x1 convolution of stride 1 is ``out(K, H*W) = weight(K, C) @ data(C, H*W)`` per image, the
data's and the output's rows contiguous runs of H*W pixels: stage ``conv_flat`` (N, K, H*W).

A windowed convolution reads its input from stage ``pad``: each input channel padded and split
by stride phase, ``pad[n, c, py, px, j]`` holding padded pixel (y*stride + py, x*stride + px) at
``j = y * pitch + x``, the rows of a phase ``pitch`` apart. Output pixel (y, x) is then computed
at flat position ``e = y * pitch + x`` of stage ``conv_flat`` (N, K, out rows * pitch), and its
kernel tap (ry, rx) reads phase (ry % stride, rx % stride) at ``e + (ry // stride) * pitch +
rx // stride``: for every tap and any stride a contiguous run of the flat input, so consecutive
positions fill whole vectors; the ``pitch - out columns`` positions past each row's end are
computed and never read. (Rows of 7 or 14 outputs fill vectors badly, and a stride-2 row read
directly is a gather.) The phase planes hold enough zero rows that every position reads inside.

Stage ``conv`` (N, K, P, Q) reads ``conv_flat[n, k, y * pitch + x]``; the epilogue follows it.
The default schedule (:func:`tile_conv2d_flat`) accumulates a register tile of (output channels x
vectors of flat positions) over the whole reduction: per input channel and tap, the tile's
vectors loaded once and one broadcast weight per channel, then the epilogue applied and stored
as vectors along the output rows. Vectorized along pixels, not output channels, it stores no
transposed tile: with 16 to 32 input channels (MobileNet-V2's expansions) the kernel packed by
output channels (:mod:`.layout`) spent most of its time writing its tiles out channel by channel.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import expr as te
from ..expr import Expr, Tensor, as_int
from ..ops.common import conv_out_size
from ..ops.schedules import vector_regs
from ..schedule import Schedule
from ..target import Target

#: the most accumulator registers of a tile (of 32 AVX-512/NEON registers: the rest hold one
#: row of input vectors and a broadcast); half that with 16 registers
ACCUMULATORS = 24
#: flat positions (x output channels) of one band of output rows (32 KiB of float32 partial sums).
#: A quarter of that (the earlier value) left MobileNet-V2's first convolution (3 input channels,
#: 112 output rows of 113 positions) in bands of 4 rows: bands of 16 ran it 2.3x faster, 32 3.0x,
#: while its depthwise layers and DCGAN's first layer were within the noise (+-5%) of taller
#: bands (2 threads, AMD EPYC Zen 3: benchmarks/bench_flat_bands.py)
BAND = 8192
#: L2 bytes per core assumed where the target does not say
DEFAULT_L2 = 1 << 20


#: values summed per output (C x R x S) under which a convolution of one group runs faster flat
#: than with its kernel packed by output channels, which then spends most of its time storing
#: its register tiles transposed (1 thread, AVX-512, 2026-12-06: MobileNet-V2's first layer, 27
#: values, 10x faster flat; DCGAN's discriminator's first, 48, 6x; from 128 to 1024 values the
#: two were within 15% either way; ResNet's 3x3 layers of 256 channels and more on 7x7 or 14x14
#: pixels 1.5x faster packed)
FLAT_REDUCTION = 64


def is_pointwise(r: int, s: int, stride: int, pad: int) -> bool:
    """Whether ``fused_conv2d`` with this window computes the flat matrix product (see the module)."""
    return r == s == 1 and stride == 1 and pad == 0


#: input and output channels from which a 1x1 convolution of stride 1 runs with its kernel packed
#: rather than flat. Timed alone (2 threads, AMD EPYC Zen 3, weights and outputs out of cache as
#: in a network: benchmarks/bench_pointwise.py), flat was up to 1.6x faster with 16-96 input
#: channels (MobileNet-V2's expansions), packed 1.0-1.5x faster on ResNet-50's layers of 256
#: input channels and more; inside MobileNet-V2, its 160->960 and 320->1280 layers ran 1.1-1.25x
#: slower packed (profile_network), and projections to 24 or 32 channels gave no clear winner
POINTWISE_PACKED = (256, 64)


def runs_flat(c: int, r: int, s: int, stride: int, pad: int, k: int) -> bool:
    """Whether a convolution of one group of ``c`` input channels, ``k`` output channels and an
    (r, s) window is computed flat (``fused_conv2d``) on a CPU rather than with a packed kernel: a
    1x1 one of stride 1 (a matrix product) with fewer channels than :data:`POINTWISE_PACKED`, or
    one of fewer than :data:`FLAT_REDUCTION` values per output."""
    if is_pointwise(r, s, stride, pad):
        return c < POINTWISE_PACKED[0] or k < POINTWISE_PACKED[1]
    return c * r * s < FLAT_REDUCTION


@dataclass(frozen=True, slots=True)
class FlatGeometry:
    """Sizes of the flat stages of a windowed convolution (see the module)."""

    out_h: int
    out_w: int
    pitch: int  #: flat positions per row of a phase plane and of ``conv_flat``
    rows: int  #: rows of a phase plane (zero rows below the image included)

    @classmethod
    def of(cls, h: int, w: int, r: int, s: int, stride: int, pad: int) -> FlatGeometry:
        """The geometry of an (h, w) image, an (r, s) window, ``stride`` and ``pad``."""
        p = conv_out_size("fused_conv2d", h, r, stride, pad, 1)
        q = conv_out_size("fused_conv2d", w, s, stride, pad, 1)
        pitch = -(-(w + 2 * pad) // stride)
        last = p * pitch - 1 + (r - 1) // stride * pitch + (s - 1) // stride  # the last position read
        return cls(p, q, pitch, max(-(-(h + 2 * pad) // stride), last // pitch + 1))


def flat_stages(data: Tensor, kernel: Tensor, stride: int, pad: int, groups: int) -> Tensor:
    """Stages ``pad`` (windowed only), ``conv_flat`` and ``conv`` of data (N, C, H, W) convolved
    with kernel (K, C/groups, R, S) (see the module); returns ``conv`` (N, K, P, Q)."""
    n_, c_, h_, w_ = (as_int(d) for d in data.shape)
    k_, cg, r_, s_ = (as_int(d) for d in kernel.shape)
    kg = k_ // groups
    rc = te.reduce_axis(cg, "rc")

    def channel(f: Expr) -> Expr:
        return rc.var if groups == 1 else (f // kg) * cg + rc.var

    if is_pointwise(r_, s_, stride, pad):
        zero = te.const(0, "int32")
        def product(n: Expr, f: Expr, i: Expr) -> Expr:
            return te.sum(data[n, channel(f), i // w_, i % w_] * kernel[f, rc.var, zero, zero], axis=rc)

        flat = te.compute((n_, k_, h_ * w_), product, name="conv_flat")
        pitch = w_
    else:
        g = FlatGeometry.of(h_, w_, r_, s_, stride, pad)
        pitch, fill = g.pitch, te.const(0.0, data.dtype)

        def padded(n: Expr, c: Expr, py: Expr, px: Expr, j: Expr) -> Expr:
            y = (j // pitch) * stride + py - pad
            x = (j % pitch) * stride + px - pad
            return te.if_then_else(te.all(y >= 0, y < h_, x >= 0, x < w_), data[n, c, y, x], fill)

        # the phases a tap reads: all of them, but where the window is narrower than the stride
        src = te.compute((n_, c_, min(r_, stride), min(s_, stride), g.rows * pitch), padded, name="pad")
        ry, rx = te.reduce_axis(r_, "ry"), te.reduce_axis(s_, "rx")

        def phase(r: Expr) -> Expr:
            return r % stride if stride > 1 else te.const(0, "int32")

        def window(n: Expr, f: Expr, e: Expr) -> Expr:
            if stride > 1:
                at = e + (ry.var // stride) * pitch + rx.var // stride
            else:
                at = e + ry.var * pitch + rx.var
            value = src[n, channel(f), phase(ry.var), phase(rx.var), at]
            return te.sum(value * kernel[f, rc.var, ry.var, rx.var], axis=[rc, ry, rx])

        flat = te.compute((n_, k_, g.out_h * pitch), window, name="conv_flat")
        h_, w_ = g.out_h, g.out_w
    return te.compute((n_, k_, h_, w_), lambda n, f, y, x: flat[n, f, y * pitch + x], name="conv")


@dataclass(frozen=True, slots=True)
class FlatTile:
    """The choices of :func:`tile_conv2d_flat` (the knobs of its template)."""

    channels: int  #: output channels per register tile (a divisor of K / groups: no bounds checks)
    vectors: int  #: vectors of flat positions per register tile
    rows: int = 0  #: output rows per band of a windowed convolution (0: pointwise, no bands)
    chunk: int = 0  #: pointwise: flat pixels per chunk, all channel tiles inside it (0: the image)
    unroll_reduce: int = 1  #: input channels per step of the reduction loop (unrolled)


def _tile_shape(kg: int, positions: int, lanes: int, regs: int) -> tuple[int, int]:
    """(channels, vectors) of a register tile: the most accumulators (up to ``regs``) of 1 to 4
    vectors, wasting the fewest lanes on ``positions``, channels a divisor of ``kg``; ties to two
    vectors (then three, one, four), which ran fastest on MobileNet-V2's 1x1 layers."""
    best: tuple[float, int, int] = (0.0, 1, 1)
    for nv in (2, 3, 1, 4):
        if nv > 1 and (nv - 1) * lanes >= positions:
            continue
        kt = max(d for d in range(1, regs // nv + 1) if kg % d == 0)
        tiles = -(-positions // (nv * lanes))
        score = kt * nv * positions / (tiles * nv * lanes)
        if score > best[0] * 1.05:
            best = (score, kt, nv)
    return best[1], best[2]


def flat_tile(wl_k: int, groups: int, conv_flat: Tensor, out: Tensor, target: Target) -> FlatTile:
    """The hand-written tile of a ``fused_conv2d`` computed flat: a depthwise one (one output
    channel per group) up to 4 vectors of one channel, of 4 channels where a channel's plane fits
    in them (MobileNet-V2's 7x7 layer 1.9x faster; larger planes were 10-25% slower with several);
    else :func:`_tile_shape`; windowed ones in bands of :data:`BAND` positions."""
    lanes = target.vector_lanes(out.dtype)
    regs = ACCUMULATORS if vector_regs(target) == 32 else ACCUMULATORS // 2
    kg = wl_k // groups
    p, q = (as_int(d) for d in out.shape[2:])
    pitch = as_int(conv_flat.shape[2]) // p
    if kg == 1:  # depthwise: several channels per tile only where a plane fits in one tile
        nv = min(4, -(-p * pitch // lanes))
        kt = 4 if p * pitch <= nv * lanes and wl_k % 4 == 0 else 1
    else:
        kt, nv = _tile_shape(kg, p * q if pitch == q else q, lanes, regs)
    if pitch == q and "pad" not in {t.op.name for t in conv_flat.op.input_tensors}:
        cg = as_int(conv_flat.op.reduce_axis[0].extent)
        return FlatTile(kt, nv, chunk=pixel_chunk(cg, p * q, nv * lanes, target.l2 or DEFAULT_L2))
    return FlatTile(kt, nv, rows=band_rows(p, max(1, BAND // (kt * pitch))))


def pixel_chunk(channels: int, pixels: int, tile: int, l2: int) -> int:
    """Flat pixels per chunk of a 1x1 convolution (a multiple of the ``tile``'s): 0 (the whole
    image) where its ``channels`` x ``pixels`` input fits in half the ``l2`` bytes, else as many
    as fit in a quarter. Each channel tile then reads the chunk's input from the cache, not the
    whole image from memory again (1 thread, 2 MiB L2: ResNet-50's 1x1 layers of 256 channels
    on 56x56 pixels 1.5-1.7x faster in chunks, 512 channels on 28x28 1.17x; inputs that fit
    were 3-8% slower)."""
    if 4 * channels * pixels <= l2 // 2:
        return 0
    return max(1, l2 // (16 * channels * tile)) * tile


def band_rows(rows: int, most: int) -> int:
    """Output rows per band: all ``rows`` if they are at most ``most``, else the largest divisor
    of ``rows`` up to ``most`` (no partial band: its guards would stay in every band of a loop
    that fuses the bands with the channel tiles), else ``most``."""
    if rows <= most:
        return rows
    best = max(d for d in range(1, most + 1) if rows % d == 0)
    return best if 2 * best > most else most


def tile_conv2d_flat(
    s: Schedule, out: Tensor, flat: Tensor, groups: int, target: Target | str = "c",
    tile: FlatTile | None = None,
) -> None:
    """The schedule of the module in ``s``: ``out`` is the (N, K, P, Q) stage whose loops are
    tiled, ``flat`` the ``conv_flat`` reduction computed per tile (pointwise: tiles of flat
    pixels in chunks, the channel tiles parallel; windowed: per band of output rows, parallel over
    (image, channel tile, band), the phase planes computed per channel tile where a tile reads
    only its own input channels, else once for all, in parallel)."""
    tgt = Target.parse(target)
    lanes = tgt.vector_lanes(out.dtype)
    if tile is None:
        tile = flat_tile(as_int(out.shape[1]), groups, flat, out, tgt)
    threads = (tgt.num_threads or 1) > 1
    n, k, y, x = s[out].op.axis
    kg = as_int(out.shape[1]) // groups
    if 1 < tile.channels < kg and kg % tile.channels == 0:
        # channel tiles inside their group, so that the input channel a tile reads, (f // kg) *
        # C/groups + rc, is the same for all its channels (one vector load for them all)
        group, k = s[out].split(k, kg)
        ko, ki = s[out].split(k, tile.channels)
        ko = s[out].fuse(group, ko)
    else:
        ko, ki = s[out].split(k, tile.channels)
    if tile.rows == 0:
        p = s[out].fuse(y, x)
        width = tile.vectors * lanes
        if tile.chunk:  # whole register tiles per chunk
            chunk, p = s[out].split(p, max(1, tile.chunk // width) * width)
        po, pi = s[out].split(p, width)
        s[out].reorder(n, *([chunk] if tile.chunk else []), ko, po, ki, pi)
        s[out].vectorize(pi)
        if threads:
            s[out].parallel(ko)
        s[flat].compute_at(s[out], po)
    else:
        yo, yi = s[out].split(y, tile.rows)
        s[out].reorder(n, ko, yo, ki, yi, x)
        q = as_int(out.shape[3])
        if q > 8 * lanes:
            x, xi = s[out].split(x, 4 * lanes)
        s[out].vectorize(xi if q > 8 * lanes else x)
        pad = s.stages["pad"].op.output(0)
        own = groups > 1 and tile.channels % kg == 0  # a tile reads its own input channels
        whole = as_int(out.shape[2]) % tile.rows == 0  # no partial band (else bands stay serial)
        band = s[out].fuse(n, ko, yo) if whole and not own else yo
        planes = band if band is not yo else s[out].fuse(n, ko)
        if threads:
            s[out].parallel(planes)
        if own:
            s[pad].compute_at(s[out], planes)
        elif threads:
            s[pad].parallel(s[pad].fuse(*s[pad].op.axis[:2]))
        _pad_rows(s, pad, as_int(flat.shape[2]) // as_int(out.shape[2]))
        s[flat].compute_at(s[out], band)
    _accumulate(s, flat, tile, lanes)


def _pad_rows(s: Schedule, pad: Tensor, pitch: int) -> None:
    """The phase planes written row by row, vectorized along the rows."""
    *_, j = s[pad].op.axis
    _, col = s[pad].split(j, pitch)
    s[pad].vectorize(col)


def _accumulate(s: Schedule, flat: Tensor, tile: FlatTile, lanes: int) -> None:
    """``flat``'s loops inside its tile: vectors of flat positions split off, the reduction
    outside the (channels x vectors) register tile, kernel taps and channels unrolled."""
    fn, fk, fe = s[flat].op.axis
    eo, ei = s[flat].split(fe, tile.vectors * lanes)
    rc, *taps = s[flat].op.reduce_axis
    if tile.unroll_reduce > 1:
        rco, rci = s[flat].split(rc, tile.unroll_reduce)
        s[flat].reorder(fn, eo, rco, rci, *taps, fk, ei)
        s[flat].unroll(rci)
    else:
        s[flat].reorder(fn, eo, rc, *taps, fk, ei)
    for tap in taps:
        s[flat].unroll(tap)
    s[flat].unroll(fk)
    s[flat].vectorize(ei)
