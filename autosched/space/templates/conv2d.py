"""Direct-convolution templates on CPU: ``conv2d_nchw`` and ``conv2d_nhwc``.

Both tile the output in cache blocks, compute each block in a ``cache_write`` accumulator and
update register tiles of (a few broadcast values) x (whole vectors) in the innermost loops:

- NCHW: ``tile_k[2]`` output channels x ``tile_x[2]`` output columns, vectorized along the row;
  ``conv2d_nchw_cpu`` in :mod:`autosched.ops.schedules` is a point of this space.
- NHWC: ``tile_x[2]`` output columns x ``tile_k[2]`` output channels, vectorized along channels
  (the kernel's innermost axis).

The input-channel reduction is split (``tile_rc``); the order of the block-level loops and of the
reduction loops, the unrolling of the kernel window and the padding (computed once or inlined)
are knobs. Outer loops are fused into one parallel loop on multi-threaded targets.
"""

from __future__ import annotations

from ...expr import Tensor, as_int, static_shape
from ...schedule import Schedule, create_schedule
from ...target import Target
from ..knobs import AnnotateEntity, Config, ReorderEntity, SplitEntity
from .common import (
    REGISTER_ROWS,
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


def _define_reduction(cfg: Config, channels: int) -> None:
    cfg.define_split("tile_rc", channels, 2, policy="power2")
    cfg.define_reorder("reorder_reduce", 3)
    cfg.define_annotate("unroll_window", 2, policy="try_unroll")


@register_template("conv2d_nchw", "c")
def conv2d_nchw_template(cfg: Config, tensors: list[Tensor], target: Target) -> Schedule:
    """conv2d_nchw: (channels x columns) register tiles, vectorized along output rows."""
    conv = tensors[-1]
    _, K, P, Q = static_shape(conv.shape)
    rc, ry, rx = conv.op.reduce_axis
    lanes = lanes_of(target, conv.dtype)
    cfg.define_split(
        "tile_k", K, 3, policy="candidate", candidate=tile_candidates(K, REGISTER_ROWS, max_block=64)
    )
    cfg.define_split("tile_y", P, 2, policy="candidate", candidate=tile_candidates(P, pow2_upto(8), levels=2))
    cfg.define_split(
        "tile_x",
        Q,
        3,
        policy="candidate",
        candidate=tile_candidates(Q, vector_tiles(Q, lanes), max_block=128),
    )
    cfg.define_reorder("reorder_acc", 4)
    _define_reduction(cfg, as_int(rc.extent))
    tk, ty, tx = (knob(cfg, n, SplitEntity) for n in ("tile_k", "tile_y", "tile_x"))

    s = create_schedule(conv)
    acc = s.cache_write(conv, "local")
    out = s[conv]
    n, k, y, x = out.op.axis
    ko, ki = out.split(k, tk.size[1] * tk.size[2])
    yo, yi = out.split(y, ty.size[1])
    xo, xi = out.split(x, tx.size[1] * tx.size[2])
    out.reorder(n, ko, yo, xo, ki, yi, xi)
    out.vectorize(xi)
    where = parallel_outer(cfg, out, [n], [ko, yo], target)
    s[acc].compute_at(out, where.get(xo.name, xo))

    local = s[acc]
    an, ak, ay, ax = local.op.axis
    arc, ary, arx = local.op.reduce_axis
    ak1, ak2 = local.split(ak, tk.size[2])
    ax1, ax2 = local.split(ax, tx.size[2])
    rc0, rc1 = knob(cfg, "tile_rc", SplitEntity).apply(s, local, arc)
    blocks = [(rc0, ak1, ay, ax1)[p] for p in knob(cfg, "reorder_acc", ReorderEntity).perm]
    window = [(rc1, ary, arx)[p] for p in knob(cfg, "reorder_reduce", ReorderEntity).perm]
    local.reorder(an, *blocks, *window, ak2, ax2)
    local.vectorize(ax2)
    elementwise = place_padding(cfg, s) or strided_along(conv, x)
    body = tx.size[2] if elementwise else vector_chunks(tx.size[2], lanes)
    unroll_within(local, [(ak2, tk.size[2])], body)
    knob(cfg, "unroll_window", AnnotateEntity).apply(
        s, local, [ary, arx], [as_int(ry.extent), as_int(rx.extent)], UNROLL_LIMIT // (body * tk.size[2])
    )
    return s


@register_template("conv2d_nhwc", "c")
def conv2d_nhwc_template(cfg: Config, tensors: list[Tensor], target: Target) -> Schedule:
    """conv2d_nhwc: (columns x channels) register tiles, vectorized along output channels."""
    conv = tensors[-1]
    _, P, Q, K = static_shape(conv.shape)
    ry, rx, rc = conv.op.reduce_axis
    lanes = lanes_of(target, conv.dtype)
    cfg.define_split("tile_y", P, 2, policy="candidate", candidate=tile_candidates(P, pow2_upto(8), levels=2))
    cfg.define_split(
        "tile_x", Q, 3, policy="candidate", candidate=tile_candidates(Q, REGISTER_ROWS, max_block=64)
    )
    cfg.define_split(
        "tile_k",
        K,
        3,
        policy="candidate",
        candidate=tile_candidates(K, vector_tiles(K, lanes), max_block=128),
    )
    cfg.define_reorder("reorder_outer", 3)
    cfg.define_reorder("reorder_acc", 4)
    _define_reduction(cfg, as_int(rc.extent))
    ty, tx, tk = (knob(cfg, n, SplitEntity) for n in ("tile_y", "tile_x", "tile_k"))

    s = create_schedule(conv)
    acc = s.cache_write(conv, "local")
    out = s[conv]
    n, y, x, k = out.op.axis
    yo, yi = out.split(y, ty.size[1])
    xo, xi = out.split(x, tx.size[1] * tx.size[2])
    ko, ki = out.split(k, tk.size[1] * tk.size[2])
    outer = [(yo, xo, ko)[p] for p in knob(cfg, "reorder_outer", ReorderEntity).perm]
    out.reorder(n, *outer, yi, xi, ki)
    out.vectorize(ki)
    where = parallel_outer(cfg, out, [n], outer, target)
    s[acc].compute_at(out, where[outer[-1].name])

    local = s[acc]
    an, ay, ax, ak = local.op.axis
    ary, arx, arc = local.op.reduce_axis
    ax1, ax2 = local.split(ax, tx.size[2])
    ak1, ak2 = local.split(ak, tk.size[2])
    rc0, rc1 = knob(cfg, "tile_rc", SplitEntity).apply(s, local, arc)
    blocks = [(rc0, ay, ax1, ak1)[p] for p in knob(cfg, "reorder_acc", ReorderEntity).perm]
    window = [(ary, arx, rc1)[p] for p in knob(cfg, "reorder_reduce", ReorderEntity).perm]
    local.reorder(an, *blocks, *window, ax2, ak2)
    local.vectorize(ak2)
    place_padding(cfg, s)  # the padded input is broadcast, not loaded as vectors: no extra cost
    body = vector_chunks(tk.size[2], lanes)
    unroll_within(local, [(ax2, tx.size[2])], body)
    knob(cfg, "unroll_window", AnnotateEntity).apply(
        s, local, [ary, arx], [as_int(ry.extent), as_int(rx.extent)], UNROLL_LIMIT // (body * tx.size[2])
    )
    return s
