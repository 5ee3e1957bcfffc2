"""Depthwise-convolution template on CPU: ``depthwise_conv2d_nchw``.

Each channel is convolved with its own window, so there is no channel reuse to block for: the
output is tiled into (channels x rows x columns) blocks computed in a ``cache_write`` accumulator,
whose register tiles are ``tile_y[2]`` rows x ``tile_x[2]`` columns (vectorized along the row),
with the window loops around them (unrolled or not). The padding is computed once or inlined.
"""

from __future__ import annotations

from ...expr import Tensor, as_int, static_shape
from ...schedule import Schedule, create_schedule
from ...target import Target
from ..knobs import AnnotateEntity, Config, ReorderEntity, SplitEntity
from .common import (
    UNROLL_LIMIT,
    knob,
    lanes_of,
    parallel_outer,
    place_padding,
    pow2_upto,
    strided_along,
    tile_candidates,
    unroll_within,
    vector_chunks,
    vector_tiles,
)
from .registry import register_template


@register_template("depthwise_conv2d_nchw", "c")
def depthwise_conv2d_nchw_template(cfg: Config, tensors: list[Tensor], target: Target) -> Schedule:
    """depthwise_conv2d_nchw: (rows x columns) register tiles per channel, vectorized along rows."""
    conv = tensors[-1]
    _, C, P, Q = static_shape(conv.shape)
    ry, rx = conv.op.reduce_axis
    lanes = lanes_of(target, conv.dtype)
    cfg.define_split(
        "tile_c", C, 2, policy="candidate", candidate=tile_candidates(C, pow2_upto(16), levels=2)
    )
    cfg.define_split(
        "tile_y", P, 3, policy="candidate", candidate=tile_candidates(P, (1, 2, 3, 4, 6, 8), max_block=32)
    )
    cfg.define_split(
        "tile_x",
        Q,
        3,
        policy="candidate",
        candidate=tile_candidates(Q, vector_tiles(Q, lanes), max_block=128),
    )
    cfg.define_reorder("reorder_acc", 3)
    cfg.define_annotate("unroll_window", 2, policy="try_unroll")
    tc, ty, tx = (knob(cfg, n, SplitEntity) for n in ("tile_c", "tile_y", "tile_x"))

    s = create_schedule(conv)
    acc = s.cache_write(conv, "local")
    out = s[conv]
    n, c, y, x = out.op.axis
    co, ci = out.split(c, tc.size[1])
    yo, yi = out.split(y, ty.size[1] * ty.size[2])
    xo, xi = out.split(x, tx.size[1] * tx.size[2])
    out.reorder(n, co, yo, xo, ci, yi, xi)
    out.vectorize(xi)
    where = parallel_outer(cfg, out, [n], [co, yo], target)
    s[acc].compute_at(out, where.get(xo.name, xo))

    local = s[acc]
    an, ac, ay, ax = local.op.axis
    ary, arx = local.op.reduce_axis
    ay1, ay2 = local.split(ay, ty.size[2])
    ax1, ax2 = local.split(ax, tx.size[2])
    blocks = [(ac, ay1, ax1)[p] for p in knob(cfg, "reorder_acc", ReorderEntity).perm]
    local.reorder(an, *blocks, ary, arx, ay2, ax2)
    local.vectorize(ax2)
    elementwise = place_padding(cfg, s) or strided_along(conv, x)
    body = tx.size[2] if elementwise else vector_chunks(tx.size[2], lanes)
    unroll_within(local, [(ay2, ty.size[2])], body)
    knob(cfg, "unroll_window", AnnotateEntity).apply(
        s, local, [ary, arx], [as_int(ry.extent), as_int(rx.extent)], UNROLL_LIMIT // (body * ty.size[2])
    )
    return s
