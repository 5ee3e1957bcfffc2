"""The knob template of ``fused_conv2d`` on CPU (a convolution computed over flat pixels:
:mod:`.conv_flat`), whose default point is the hand-written schedule.

The knobs are :class:`~.conv_flat.FlatTile`'s: output channels and vectors of flat positions per
register tile, input channels per unrolled reduction step, and for a 1x1 convolution the pixels
per chunk (the channel tiles inside it), for a windowed one the output rows per band. The
channel choices divide the channels of a group (a depthwise one: any few), so no tile checks its
bounds. Network tuning (``space="auto"``) uses it for every ``fused_conv2d``: depthwise,
pointwise, grouped and small convolutions.
"""

from __future__ import annotations

from typing import Any

from ..expr import Tensor, as_int
from ..ops import Workload
from ..schedule import Schedule
from ..space.knobs import Config, OtherEntity
from ..space.templates.common import knob
from ..space.templates.handwritten import KNOBS
from ..space.templates.registry import register_template
from ..target import Target
from . import epilogue as epi
from .conv_flat import FlatTile, flat_tile, tile_conv2d_flat

#: output channels per register tile the template tries (those that divide a group's channels)
CHANNEL_CHOICES = (1, 2, 4, 6, 8, 12, 16, 24)
#: vectors of flat positions per register tile
VECTOR_CHOICES = (1, 2, 3, 4)
#: input channels per unrolled step of the reduction
UNROLL_CHOICES = (1, 2, 4)
#: pixels per chunk of a 1x1 convolution (0: the whole image; rounded to whole register tiles)
CHUNK_CHOICES = (0, 512, 2048)


def _prepared(tensors: list[Tensor], target: Target) -> tuple[Schedule, Tensor, Tensor, int]:
    """The naive schedule with the epilogue and the unflattening stage inlined into the output;
    (schedule, output, ``conv_flat``, groups)."""
    s = epi.inline_default(tensors, target)
    out, data, kernel = tensors[-1], tensors[0], tensors[1]
    if out.op.name != "conv":
        s[s.stages["conv"].op.output(0)].compute_inline()
    return s, out, s.stages["conv_flat"].op.output(0), as_int(data.shape[1]) // as_int(kernel.shape[1])


def _choices(default: FlatTile, channels: int, rows: int) -> dict[str, list[Any]]:
    """Each knob's values: the default's among them."""
    chans = sorted({c for c in CHANNEL_CHOICES if channels % c == 0} | {default.channels})
    out: dict[str, list[Any]] = {
        "channels": chans,
        "vectors": sorted({*VECTOR_CHOICES, default.vectors}),
        "unroll_reduce": list(UNROLL_CHOICES),
    }
    if default.rows:
        out["rows"] = sorted({r for r in (1, 2, 4, 8, 16, rows) if r <= rows} | {default.rows})
    else:
        out["chunk"] = sorted({*CHUNK_CHOICES, default.chunk})
    return out


def _channels(out: Tensor, groups: int) -> int:
    """The channels a tile's channel count must divide: a group's, all of them when depthwise."""
    kg = as_int(out.shape[1]) // groups
    return as_int(out.shape[1]) if kg == 1 else kg


@register_template("fused_conv2d", "c")
def fused_conv2d_template(cfg: Config, tensors: list[Tensor], target: Target) -> Schedule:
    """fused_conv2d: (channels x vectors of flat pixels) register tiles, bands of rows."""
    s, out, flat, groups = _prepared(tensors, target)
    default = flat_tile(as_int(out.shape[1]), groups, flat, out, target)
    for name, values in _choices(default, _channels(out, groups), as_int(out.shape[2])).items():
        cfg.define_knob(name, values)

    def value(name: str) -> int:
        got = knob(cfg, name, OtherEntity).val
        assert isinstance(got, int)
        return got

    tile = FlatTile(
        channels=value("channels"),
        vectors=value("vectors"),
        rows=value("rows") if default.rows else 0,
        chunk=0 if default.rows else value("chunk"),
        unroll_reduce=value("unroll_reduce"),
    )
    tile_conv2d_flat(s, out, flat, groups, target, tile)
    return s


def flat_conv_knobs(wl: Workload, target: Target) -> dict[str, Any]:
    """The knob values of ``fused_conv2d_cpu`` (the hand-written schedule)."""
    s, out, flat, groups = _prepared(wl.tensors(), target)
    tile = flat_tile(as_int(out.shape[1]), groups, flat, out, target)
    values: dict[str, Any] = {"channels": tile.channels, "vectors": tile.vectors, "unroll_reduce": 1}
    return values | ({"rows": tile.rows} if tile.rows else {"chunk": tile.chunk})


KNOBS["fused_conv2d"] = flat_conv_knobs
