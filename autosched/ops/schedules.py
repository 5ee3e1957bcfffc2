"""Hand-written CPU schedules for the reference workloads, built only from public primitives.

They show what the emitter can express (the benchmarks compare them with OpenBLAS and oneDNN), and
they are the programs the quick start builds before tuning exists. Tile sizes follow the target's
vector width and register count.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ..dtypes import dtype as dtype_info
from ..expr import Tensor, as_int
from ..intrin.lowp import matmul_lowp
from ..schedule import Schedule, create_schedule
from ..target import Target
from ..vector_lanes import chunks_of
from .registry import Workload


def vector_regs(target: Target) -> int:
    """Vector registers of the target's ISA (AVX-512 and NEON have 32, AVX2 16)."""
    return 32 if (target.vector_bytes or 16) >= 64 or target.machine.startswith(("aarch64", "arm")) else 16


def matmul_tile(target: Target, dtype: str) -> tuple[int, int]:
    """(rows, columns) of :func:`matmul_cpu`'s accumulator tile: 6 rows of 2 vectors (4 where
    the ISA has 32 vector registers)."""
    return 6, target.vector_lanes(dtype) * (4 if vector_regs(target) == 32 else 2)


def matmul_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """Register-blocked matmul: a 6 x (2-4 vectors) accumulator tile kept in registers, a packed
    B panel per column block (reused by every row block), vectorized, unrolled, parallel columns."""
    A, B, C = tensors
    s = create_schedule(C)
    acc = s.cache_write(C, "local")
    tile_matmul(s, C, acc, s.cache_read(B, "local", [acc]), target)
    return s


def batch_matmul_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """:func:`matmul_cpu`'s loops for each batch index (batch and column blocks parallel)."""
    A, B, C = tensors
    s = create_schedule(C)
    acc = s.cache_write(C, "local")
    tile_matmul(s, C, acc, packed_panel(s, B, acc, as_int(A.shape[-2]), target), target)
    return s


#: bytes of one B matrix above which :func:`packed_panel` packs it (about a core's L2 share)
PANEL_BYTES = 256 * 1024


def packed_panel(s: Schedule, B: Tensor, acc: Tensor, rows: int, target: Target | str) -> Tensor | None:
    """A packed copy of ``B`` read by ``acc`` (for :func:`tile_matmul`) where it pays: B's
    (K, N) matrix is larger than :data:`PANEL_BYTES` and the product has several blocks of rows
    to reuse it; else None (a small B stays in cache as it is, and packing its column tails costs
    more than it saves)."""
    tgt = Target.parse(target)
    k, n = (as_int(d) for d in B.shape[-2:])
    large = k * n * dtype_info(B.dtype).bytes > PANEL_BYTES
    return s.cache_read(B, "local", [acc]) if large and rows > matmul_tile(tgt, B.dtype)[0] else None


def tile_matmul(
    s: Schedule, out: Tensor, acc: Tensor, panel: Tensor | None, target: Target | str = "c"
) -> None:
    """The loops of :func:`matmul_cpu` in ``s``: ``out`` is the (..., M, N) stage whose loops are
    tiled (the product, or an elementwise stage after it), ``acc`` the reduction stage computed per
    tile (its cache, or the product itself), ``panel`` a cache read of B packed per column block
    (None: none). Leading batch axes of ``out`` are outermost (fused with the column blocks when
    the target has threads)."""
    tgt = Target.parse(target)
    mr, nr = matmul_tile(tgt, out.dtype)
    *batch, i, j = s[out].op.axis
    io, jo, ii, ji = s[out].tile(i, j, mr, nr)
    s[out].reorder(*batch, jo, io, ii, ji)
    s[out].vectorize(ji)
    block = jo
    if (tgt.num_threads or 1) > 1:
        block = s[out].fuse(*batch, jo) if batch else jo
        s[out].parallel(block)
    s[acc].compute_at(s[out], io)
    *acc_batch, ai, aj = s[acc].op.axis
    (ak,) = s[acc].op.reduce_axis
    ko, ki = s[acc].split(ak, 4)
    s[acc].reorder(*acc_batch, ko, ki, ai, aj)
    s[acc].unroll(ki)
    s[acc].unroll(ai)
    s[acc].vectorize(aj)
    if panel is not None:
        s[panel].compute_at(s[out], block)
        s[panel].vectorize(s[panel].op.axis[-1])


def dot_tile(target: Target, dtype: str, rows: int, cols: int) -> tuple[int, int]:
    """(rows, columns) of :func:`tile_dot`'s tile: one vector accumulator per output element, and
    the tile's row vectors, one column vector and a spare in the registers; the most multiply-adds
    per load, no larger than the output."""
    regs = vector_regs(target)
    best = (0.0, 1, 1)
    for mr in range(1, min(rows, 8) + 1):
        nr = min(cols, 8, (regs - mr - 2) // mr)
        if nr >= 1 and mr * nr / (mr + nr) > best[0]:
            best = (mr * nr / (mr + nr), mr, nr)
    return best[1], best[2]


def tile_dot(s: Schedule, out: Tensor, mm: Tensor, target: Target | str = "c") -> None:
    """Register-blocked ``A @ W.T`` (``mm[i, j] = sum_k A[i, k] * W[j, k]``, both read along k):
    the reduction split by the vector width and factored (rfactor) into a tile of vector
    accumulators in registers, summed across lanes per tile, then the (M, N) stage ``out`` (``mm``
    or an elementwise stage after it) written from them; parallel column blocks."""
    tgt = Target.parse(target)
    lanes = tgt.vector_lanes(mm.dtype)
    (k,) = s[mm].op.reduce_axis
    _, ki = s[mm].split(k, lanes)
    rf = s.rfactor(mm, ki, factor_axis=2)
    mr, nr = dot_tile(tgt, mm.dtype, as_int(mm.shape[0]), as_int(mm.shape[1]))
    i, j = s[out].op.axis
    io, jo, ii, ji = s[out].tile(i, j, mr, nr)
    s[out].reorder(jo, io, ii, ji)
    if (tgt.num_threads or 1) > 1:
        s[out].parallel(jo)
    if out.op.name != mm.op.name:
        s[mm].compute_at(s[out], io)
        ii, ji = s[mm].op.axis
    for axis in (ii, ji, *s[mm].op.reduce_axis):  # the lane sums read the accumulators by constant index
        s[mm].unroll(axis)
    s[rf].compute_at(s[out], io)
    ri, rj, rl = s[rf].op.axis
    (rk,) = s[rf].op.reduce_axis
    s[rf].reorder(rk, ri, rj, rl)
    s[rf].unroll(ri)
    s[rf].unroll(rj)
    s[rf].vectorize(rl)


def matmul_bt_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """``matmul`` with B transposed (``A @ B.T``, both operands read along k): :func:`tile_dot`."""
    s = create_schedule(tensors[-1])
    tile_dot(s, tensors[-1], tensors[-1], target)
    return s


def dense_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """``dense`` (``data @ weight.T``, then bias and ReLU): :func:`tile_dot` with the epilogue
    computed per tile from the accumulators."""
    s = create_schedule(tensors[-1])
    tile_dot(s, tensors[-1], s.stages["dense"].op.output(0), target)
    return s


def conv_tile(width: int, channels: int, lanes: int, regs: int) -> tuple[int, int]:
    """(output columns, output channels) of the accumulator tile: as many accumulator lanes as fit
    in the registers next to one row of input vectors and a broadcast."""
    best = (0, 1, 1)
    for cols in (d for d in range(1, width + 1) if width % d == 0):
        vectors = len(chunks_of(cols, lanes))
        kt = min(channels, (regs - vectors - 1) // vectors)
        if kt >= 1 and kt * cols > best[0]:
            best = (kt * cols, cols, kt)
    return best[1], best[2]


def conv2d_nchw_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """Direct NCHW convolution: a (channels x output columns) accumulator tile in registers, the
    padded input computed once, vectorized along the row, unrolled over channels and kernel
    columns, parallel over (channel block, row)."""
    conv = tensors[-1]
    s = create_schedule(conv)
    tile_conv2d_nchw(s, conv, s.cache_write(conv, "local"), target)
    return s


def tile_conv2d_nchw(s: Schedule, conv: Tensor, acc: Tensor, target: Target | str = "c") -> None:
    """The loops of :func:`conv2d_nchw_cpu` in ``s``: ``conv`` is the (N, K, P, Q) stage whose
    loops are tiled (the convolution, or an elementwise stage after it), ``acc`` the reduction
    stage computed per tile (its cache, or the convolution itself)."""
    tgt = Target.parse(target)
    lanes = tgt.vector_lanes(conv.dtype)
    cols, kt = conv_tile(as_int(conv.shape[3]), as_int(conv.shape[1]), lanes, vector_regs(tgt))
    n, k, y, x = s[conv].op.axis
    ko, ki = s[conv].split(k, kt)
    xo, xi = s[conv].split(x, cols)
    s[conv].reorder(n, ko, y, xo, ki, xi)
    s[conv].vectorize(xi)
    if (tgt.num_threads or 1) > 1:
        s[conv].parallel(s[conv].fuse(ko, y))
    s[acc].compute_at(s[conv], xo)
    an, ak, ay, ax = s[acc].op.axis
    rc, ry, rx = s[acc].op.reduce_axis
    s[acc].reorder(an, ay, rc, ry, rx, ak, ax)
    s[acc].unroll(rx)
    s[acc].unroll(ak)
    s[acc].vectorize(ax)
    if "pad" in s.stages:
        pad = s.stages["pad"].op.output(0)
        s[pad].vectorize(s[pad].op.axis[-1])


#: most output columns of :func:`tile_conv2d_packed`'s tile (with one block of 8 channels, 12 or 14
#: columns ran slower than 7 or 8 in every layer tried on AVX2: the compiler spills)
PACKED_CONV_COLS = 8
#: channel blocks per register tile of :func:`tile_conv2d_packed` where the ISA has 32 vector
#: registers: 2 blocks (of one vector of channels each) x up to 8 columns, 16 vector accumulators
#: (10-25% faster than one block on ResNet-18's convolutions, 2 threads, AMD EPYC Zen 4, blocks of
#: 8; 4 blocks x 3-4 columns were slower). With AVX2's 16 registers those 16 accumulators spill:
#: 8 accumulators (one block x 7-8 columns, two x 4) ran 1.1-1.8x faster on 7 of 7 layers (3x3
#: and 4x4/2 convolutions of ResNet, DCGAN and DQN, 1 thread, AMD EPYC Zen 3;
#: benchmarks/bench_packed_tiles.py, RESULTS.md 2026-12-07)
PACKED_CONV_BLOCKS = 2


def packed_conv_cols(width: int) -> int:
    """Output columns per tile of :func:`tile_conv2d_packed`: the largest divisor of the output
    width from 4 to :data:`PACKED_CONV_COLS`, else that many (the last tile of a row is partial),
    else the whole (narrower) row."""
    if width <= PACKED_CONV_COLS:
        return width
    return max((d for d in range(4, PACKED_CONV_COLS + 1) if width % d == 0), default=PACKED_CONV_COLS)


def packed_conv_blocks(blocks: int, target: Target, cols: int = PACKED_CONV_COLS) -> int:
    """Channel blocks per tile of :func:`tile_conv2d_packed` with ``cols`` columns: up to
    :data:`PACKED_CONV_BLOCKS` while the tile keeps at most 16 vector accumulators (32 vector
    registers) or 8 (AVX2's 16), where that divides the number of blocks; else 1."""
    budget = 2 * PACKED_CONV_COLS if vector_regs(target) == 32 else PACKED_CONV_COLS
    want = max(1, min(PACKED_CONV_BLOCKS, budget // max(cols, 1)))
    return want if blocks % want == 0 else 1


#: output columns of a 1x1 window's tile where the ISA has 16 vector registers: two blocks x 6
#: columns, 12 accumulators (no window taps to unroll, so nothing else competes for registers).
#: Against one block x 8 columns, ResNet-50's 1x1 layers ran 0.9-1.4x as fast, faster on 9 of 10
#: (2 threads, AMD EPYC Zen 3, weights and outputs out of cache as in a network:
#: benchmarks/bench_pointwise.py); with a 3x3 window 2x6 spills and ran at half the speed
POINTWISE_COLS = 6


def rows_outer_pays(kernel_bytes: int, input_bytes: int, rows: int, channel_tiles: int) -> bool:
    """Whether :func:`tile_conv2d_packed`'s output rows go outside its channel tiles: each order
    re-reads one operand, the kernel once per row (rows outer) or the input once per channel tile
    (channel tiles outer); the order that moves fewer bytes. On ResNet-50's 1x1 layers (weights
    and outputs out of cache) it picked the faster order, or one within 3% of it, on 9 of 10 (the
    tenth 9% slower; AMD EPYC Zen 3, 2 threads, benchmarks/bench_pointwise.py)."""
    return kernel_bytes * rows < input_bytes * channel_tiles


@dataclass(frozen=True, slots=True)
class PackedConvTile:
    """The choices of :func:`tile_conv2d_packed` (the knobs of its template,
    ``fused_conv2d_packed`` in :mod:`autosched.graph.packed_template`); the defaults are the
    hand-written schedule's, except ``blocks`` and ``cols``, which depend on the shape."""

    blocks: int  #: channel blocks of the packed kernel per register tile
    cols: int  #: output columns per register tile
    reduce_order: tuple[int, ...] = (0, 1, 2)  #: order of the reduction loops (rc, ry, rx)
    unroll: str = "rx"  #: unrolled kernel-window loops: "none", "rx" or "window" (ry and rx)
    rows_outer: bool = False  #: output rows outside the channel tiles (else inside)
    parallel: int = 2  #: outer loops fused into the parallel loop (1 or 2)


def packed_conv_default(out: Tensor, acc: Tensor, target: Target) -> PackedConvTile:
    """The hand-written choices of :func:`tile_conv2d_packed` for output stage ``out`` (N, K, P, Q)
    and blocked reduction ``acc`` (N, K/b, P, Q, b) reading (padded) input (N, C, H, W): those of
    :func:`packed_tile` for its shape."""
    rc, ry, rx = (as_int(ax.extent) for ax in acc.op.reduce_axis)
    src = next(t for t in acc.op.input_tensors if len(t.shape) == 4)
    item = dtype_info(acc.dtype).bytes
    kernel_bytes = as_int(acc.shape[1]) * as_int(acc.shape[-1]) * rc * ry * rx * item
    input_bytes = math.prod(as_int(d) for d in src.shape) * item
    return packed_tile(as_int(out.shape[3]), as_int(out.shape[2]), as_int(acc.shape[1]), (ry, rx),
                       kernel_bytes, input_bytes, target)


def packed_tile(
    width: int, rows: int, blocks: int, window: tuple[int, int], kernel_bytes: int, input_bytes: int,
    target: Target,
) -> PackedConvTile:
    """The register tile of a convolution whose kernel is packed by channel blocks (``blocks`` of
    them), output rows of ``width`` x ``rows``: two blocks x :data:`POINTWISE_COLS` columns for a
    1x1 ``window`` on a 16-register ISA, else :func:`packed_conv_blocks` x
    :func:`packed_conv_cols`; rows outside the channel tiles where that moves fewer bytes
    (:func:`rows_outer_pays`)."""
    if window == (1, 1) and vector_regs(target) == 16 and blocks % 2 == 0:
        cols, nblocks = min(width, POINTWISE_COLS), 2
    else:
        cols = packed_conv_cols(width)
        nblocks = packed_conv_blocks(blocks, target, cols)
    outer = rows_outer_pays(kernel_bytes, input_bytes, rows, blocks // nblocks)
    return PackedConvTile(nblocks, cols, rows_outer=outer)


def tile_conv2d_packed(
    s: Schedule, out: Tensor, acc: Tensor, target: Target | str = "c", tile: PackedConvTile | None = None
) -> None:
    """Direct convolution with the kernel packed by blocks of output channels (the kernel layout
    (K/b, C, R, S, b) of ``fused_conv2d_packed``): ``out`` is the (N, K, P, Q) stage whose loops
    are tiled, ``acc`` the (N, K/b, P, Q, b) reduction computed per tile of (``tile.blocks``
    blocks of b channels x ``tile.cols`` columns) in registers: per kernel tap, one vector of b
    kernel values per block times one broadcast input value per column, any stride. The tile is
    written out channel by channel; parallel over (channel tile, row), the padded input over
    (image, channel). ``tile`` None: the hand-written choices (:func:`packed_conv_default`)."""
    tgt = Target.parse(target)
    block = as_int(acc.shape[-1])
    if tile is None:
        tile = packed_conv_default(out, acc, tgt)
    n, k, y, x = s[out].op.axis
    ko, ki = s[out].split(k, block * tile.blocks)
    xo, xi = s[out].split(x, tile.cols)
    outer = [y, ko] if tile.rows_outer else [ko, y]
    s[out].reorder(n, *outer, xo, ki, xi)
    if (tgt.num_threads or 1) > 1:
        s[out].parallel(s[out].fuse(*outer) if tile.parallel == 2 else outer[0])
    s[acc].compute_at(s[out], xo)
    an, ako, ay, ax, aki = s[acc].op.axis
    reduction = s[acc].op.reduce_axis
    rc, ry, rx = reduction
    s[acc].reorder(an, ay, *(reduction[i] for i in tile.reduce_order), ax, ako, aki)
    for loop in {"none": [], "rx": [rx], "window": [ry, rx]}[tile.unroll]:
        s[acc].unroll(loop)
    s[acc].unroll(ax)
    s[acc].unroll(ako)
    s[acc].vectorize(aki)
    padded_input(s, (tgt.num_threads or 1) > 1)


def padded_input(s: Schedule, threads: bool) -> None:
    """The stage ``pad`` of ``s``, if it has one, computed once before the convolution by all
    ``threads``: vectorized along its last axis, parallel over its first two (image, channel)."""
    if "pad" in s.stages:
        pad = s.stages["pad"].op.output(0)
        s[pad].vectorize(s[pad].op.axis[-1])
        if threads:
            s[pad].parallel(s[pad].fuse(*s[pad].op.axis[:2]))


def max_pool2d_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """Max pooling: parallel over (image, channel), a vector of output columns per window tap, the
    window unrolled, the padding inlined as a bounds check, each vector of outputs reduced in a
    local tile (a register) and stored once. ResNet-18's 3x3/2 pool (2 threads, Zen 4, kernel
    timed alone): 0.21-0.27 ms, against 0.39-0.42 ms when every tap read and wrote the output
    (whose scalar taps at the padded border then stalled the vector loads after them) and 0.98 ms
    for the naive schedule; computing the padded plane first was slower (0.46 ms)."""
    tgt = Target.parse(target)
    out = tensors[-1]
    s = create_schedule(out)
    acc = s.cache_write(out, "local")
    n, c, y, x = s[out].op.axis
    planes = s[out].fuse(n, c)
    xo, xi = s[out].split(x, tgt.vector_lanes(out.dtype))
    s[out].vectorize(xi)
    if (tgt.num_threads or 1) > 1:
        s[out].parallel(planes)
    s[acc].compute_at(s[out], xo)
    an, ac, ay, ax = s[acc].op.axis
    ry, rx = s[acc].op.reduce_axis
    s[acc].reorder(an, ac, ay, ry, rx, ax)
    s[acc].unroll(ry)
    s[acc].unroll(rx)
    s[acc].vectorize(ax)
    if "pad" in s.stages:
        s[s.stages["pad"].op.output(0)].compute_inline()
    return s


#: hand-written schedules by workload name; other workloads get the naive schedule
SCHEDULES: dict[str, Callable[[list[Tensor], Target | str], Schedule]] = {
    "matmul": matmul_cpu,
    "batch_matmul": batch_matmul_cpu,
    "dense": dense_cpu,
    "conv2d_nchw": conv2d_nchw_cpu,
    "max_pool2d": max_pool2d_cpu,
    "matmul_lowp": matmul_lowp,  # AMX, VNNI / AVX512-BF16 or portable: what the target allows
}


#: the default schedules of target kinds that have their own (the GPU kinds), by kind name; a
#: backend registers its :meth:`~autosched.backends.Backend.default_schedule` here
KIND_DEFAULTS: dict[str, Callable[[Workload, Target], tuple[Schedule, str] | None]] = {}


def hand_written(wl: Workload) -> Callable[[list[Tensor], Target | str], Schedule] | None:
    """``wl``'s hand-written schedule: :data:`SCHEDULES` by name (:func:`matmul_bt_cpu` for a
    matmul with B transposed), or None."""
    if wl.name == "matmul" and wl.args[4]:
        return matmul_bt_cpu
    return SCHEDULES.get(wl.name)


def has_hand_written(wl: Workload) -> bool:
    """Whether ``wl`` has a hand-written schedule (:func:`hand_written`)."""
    return hand_written(wl) is not None


def default_schedule(wl: Workload, target: Target | str = "c") -> tuple[Schedule, str]:
    """The schedule ``wl`` gets before any tuning, and its name: the default of ``target``'s kind
    where it has its own (:data:`KIND_DEFAULTS`: a GPU's), else its hand-written schedule where
    there is one (:func:`hand_written`), else the naive schedule (``create_schedule`` with no
    steps, called ``"default schedule"``)."""
    tgt = Target.parse(target)
    own = KIND_DEFAULTS.get(tgt.kind)
    chosen = own(wl, tgt) if own is not None else None
    if chosen is not None:
        return chosen
    make = hand_written(wl)
    if make is not None:
        return make(wl.tensors(), tgt), f"{make.__module__}.{make.__name__}"
    return create_schedule(wl.outputs), "default schedule"
