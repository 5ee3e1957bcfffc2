"""The knob templates of ``fused_conv2d_packed`` and ``fused_conv2d_nchwc`` on CPU, whose
default points are the hand-written schedules (:func:`~autosched.ops.schedules.tile_conv2d_packed`,
:func:`.conv_nchwc.tile_conv2d_nchwc`).

The generated (sketch) space cannot compute the blocked convolution inside the tiles of its
unblocking consumer, which reads ``conv_blk[n, k // b, y, x, k % b]``, so on packed kernels it
rarely matches the hand-written schedule. This template searches around it instead: channel
blocks and columns per register tile, the order and unrolling of the reduction loops, rows
inside or outside the channel tiles, and how many outer loops run in parallel. Network tuning
(``space="auto"``) uses it for packed convolutions; those on blocked activations get the same
knobs, the order of the reduction being whether a block's input channels are innermost.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from ..dtypes import dtype as dtype_info
from ..expr import Tensor, as_int, topo_order
from ..ops import Workload
from ..ops.schedules import PackedConvTile, packed_conv_cols, packed_conv_default, tile_conv2d_packed
from ..schedule import Schedule
from ..space.knobs import Config, OtherEntity, ReorderEntity
from ..space.templates.common import knob
from ..space.templates.handwritten import KNOBS
from ..space.templates.registry import register_template
from ..target import Target
from . import epilogue as epi
from .conv_nchwc import NchwcTile, nchwc_default, output_and_accumulator, tile_conv2d_nchwc
from .depthwise_nchwc import DepthwiseTile, tile_depthwise_nchwc

#: channel blocks per register tile the template tries (those that divide the kernel's blocks)
BLOCK_CHOICES = (1, 2, 4)
#: a hand-written tile (:class:`PackedConvTile` or :class:`NchwcTile`)
Tile = TypeVar("Tile", PackedConvTile, NchwcTile)
#: L2 bytes assumed where the target does not say
DEFAULT_L2 = 256 * 1024


def rows_outer_choices(kernel_bytes: int, target: Target, default: bool = False) -> list[int]:
    """Rows outside the channel tiles read the whole kernel once per output row: offered only
    where the kernel fits in the L2 cache, or where the hand-written schedule (``default``) finds
    that order moves fewer bytes. A kernel timed alone stays in the last-level cache from one run
    to the next, so the tuner would pick the order for a 9 MiB kernel too, and in a network, where
    the layer starts with its kernel out of cache, it ran 1.7x slower (ResNet-18's 512-channel 3x3
    layer, AMD EPYC Zen 4, 2026-12-03)."""
    return [0, 1] if default or kernel_bytes <= (target.l2 or DEFAULT_L2) else [0]


def col_choices(width: int) -> list[int]:
    """Columns per register tile for an output row of ``width``: its divisors from 4 to 8 and
    4, 6 and 8 (a partial last tile), never more than the row."""
    return sorted({c for c in range(4, 9) if width % c == 0} | {min(width, c) for c in (4, 6, 8)})


def _value(cfg: Config, name: str) -> Any:
    return knob(cfg, name, OtherEntity).val


def _define_tile(cfg: Config, out: Tensor, acc: Tensor) -> None:
    """The knobs of the register tile: channel blocks and output columns."""
    blocks = as_int(acc.shape[1])
    cfg.define_knob("blocks", [b for b in BLOCK_CHOICES if blocks % b == 0])
    cfg.define_knob("cols", col_choices(as_int(out.shape[3])))


def _define_outer(cfg: Config, kernel: Tensor, target: Target, rows_outer: bool) -> bool:
    """The knobs of the outer loops (``rows_outer``: the hand-written schedule's order); whether
    the target runs threads (then the parallel loops are a knob)."""
    kernel_bytes = math.prod(as_int(d) for d in kernel.shape) * dtype_info(kernel.dtype).bytes
    cfg.define_knob("rows_outer", rows_outer_choices(kernel_bytes, target, rows_outer))
    threads = (target.num_threads or 1) > 1
    if threads:
        cfg.define_knob("parallel", [1, 2])
    return threads


def _default_values(
    out: Tensor, target: Target, choose: Callable[[Tensor, Tensor, Target], Tile]
) -> tuple[Tile, dict[str, Any]]:
    """The hand-written tile of output ``out`` (``choose(out, acc, target)``) and its tile and
    loop knob values (the order's knobs are the caller's)."""
    acc = next(op.output(0) for op in topo_order([out]) if op.name == "conv_blk")
    tile = choose(out, acc, target)
    values = {"blocks": tile.blocks, "cols": tile.cols, "rows_outer": int(tile.rows_outer)}
    return tile, values | ({"parallel": 2} if (target.num_threads or 1) > 1 else {})


@register_template("fused_conv2d_packed", "c")
def fused_conv2d_packed_template(cfg: Config, tensors: list[Tensor], target: Target) -> Schedule:
    """fused_conv2d_packed: (channel blocks x columns) register tiles of the packed kernel."""
    out = tensors[-1]
    s = epi.inline_default(tensors, target)
    if out.op.name != "conv":
        s[s.stages["conv"].op.output(0)].compute_inline()
    acc = s.stages["conv_blk"].op.output(0)
    _define_tile(cfg, out, acc)
    cfg.define_reorder("reorder_reduce", 3)
    cfg.define_knob("unroll", ["none", "rx", "window"])
    threads = _define_outer(cfg, tensors[1], target, packed_conv_default(out, acc, target).rows_outer)
    tile = PackedConvTile(
        blocks=int(_value(cfg, "blocks")),
        cols=int(_value(cfg, "cols")),
        reduce_order=tuple(knob(cfg, "reorder_reduce", ReorderEntity).perm),
        unroll=str(_value(cfg, "unroll")),
        rows_outer=bool(_value(cfg, "rows_outer")),
        parallel=int(_value(cfg, "parallel")) if threads else 2,
    )
    tile_conv2d_packed(s, out, acc, target, tile)
    return s


def packed_conv_knobs(wl: Workload, target: Target) -> dict[str, Any]:
    """The knob values of ``fused_conv2d_packed_cpu`` (the hand-written schedule)."""
    _, values = _default_values(wl.outputs[0], target, packed_conv_default)
    return values | {"reorder_reduce": [0, 1, 2], "unroll": "rx"}


@register_template("fused_conv2d_nchwc", "c")
def fused_conv2d_nchwc_template(cfg: Config, tensors: list[Tensor], target: Target) -> Schedule:
    """fused_conv2d_nchwc: (channel blocks x columns) register tiles on blocked activations."""
    s, out, acc = output_and_accumulator(tensors, target)
    _define_tile(cfg, out, acc)
    cfg.define_knob("channels_inner", [0, 1])
    threads = _define_outer(cfg, tensors[1], target, nchwc_default(out, acc, target).rows_outer)
    tile = NchwcTile(
        blocks=int(_value(cfg, "blocks")),
        cols=int(_value(cfg, "cols")),
        channels_inner=bool(_value(cfg, "channels_inner")),
        rows_outer=bool(_value(cfg, "rows_outer")),
        parallel=int(_value(cfg, "parallel")) if threads else 2,
    )
    tile_conv2d_nchwc(s, out, acc, target, tile)
    return s


def nchwc_conv_knobs(wl: Workload, target: Target) -> dict[str, Any]:
    """The knob values of ``fused_conv2d_nchwc_cpu`` (the hand-written schedule)."""
    tile, values = _default_values(wl.outputs[0], target, nchwc_default)
    return values | {"channels_inner": int(tile.channels_inner)}


@register_template("fused_depthwise_nchwc", "c")
def fused_depthwise_nchwc_template(cfg: Config, tensors: list[Tensor], target: Target) -> Schedule:
    """fused_depthwise_nchwc: output columns per register tile, the padding inlined or copied."""
    s, out, acc = output_and_accumulator(tensors, target)
    cfg.define_knob("cols", col_choices(as_int(out.shape[3])))
    cfg.define_knob("inline_pad", [1, 0])
    tile = DepthwiseTile(int(_value(cfg, "cols")), bool(_value(cfg, "inline_pad")))
    tile_depthwise_nchwc(s, out, acc, target, tile)
    return s


def depthwise_knobs(wl: Workload, target: Target) -> dict[str, Any]:
    """The knob values of ``fused_depthwise_nchwc_cpu`` (the hand-written schedule)."""
    return {"cols": packed_conv_cols(as_int(wl.outputs[0].shape[3])), "inline_pad": 1}


KNOBS["fused_conv2d_packed"] = packed_conv_knobs
KNOBS["fused_conv2d_nchwc"] = nchwc_conv_knobs
KNOBS["fused_depthwise_nchwc"] = depthwise_knobs
