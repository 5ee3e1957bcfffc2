"""The hand-written CPU schedules as points of their templates.

``matmul_cpu`` and ``conv2d_nchw_cpu`` (:mod:`autosched.ops.schedules`) are configs of the
``matmul`` and ``conv2d_nchw`` templates: :func:`hand_written_config` gives, for a workload and a
target, the config whose program is the hand-written schedule, so that a template search can
start from it (measure it first, then mutate it like any other point). None where the workload
has no hand-written schedule or its knob values are not in the space (e.g. an input-channel count
that is not a power of two for the convolution's ``tile_rc``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...expr import as_int
from ...ops import Workload
from ...ops.schedules import conv_tile, has_hand_written, matmul_tile, vector_regs
from ...target import Target
from ..knobs import ConfigEntity
from .registry import TargetLike, template_space


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _parallel(target: Target, loops: int) -> dict[str, int]:
    """Knob ``parallel`` (on a multi-threaded target): how many block loops are fused and run in
    parallel."""
    return {"parallel": loops} if (target.num_threads or 1) > 1 else {}


def matmul_knobs(wl: Workload, target: Target) -> dict[str, Any]:
    """``matmul_cpu``: a 6-row register tile over whole vectors, B packed per column block, the
    column blocks outermost, the reduction unrolled by 4."""
    out = wl.outputs[0]
    M, N = (as_int(x) for x in out.shape)
    K = as_int(out.op.reduce_axis[0].extent)
    mr, nr = matmul_tile(target, out.dtype)
    return {
        "tile_i": [_ceil(M, mr), 1, mr],
        "tile_j": [_ceil(N, nr), 1, nr],
        "tile_k": [1, _ceil(K, 4), 4],
        "reorder_outer": [1, 0],
        "reorder_acc": [0, 1, 2],
        "unroll_acc": ["unroll", "unroll"],
        "pack_b": 1,
    } | _parallel(target, 1)  # the column blocks


def conv2d_nchw_knobs(wl: Workload, target: Target) -> dict[str, Any]:
    """``conv2d_nchw_cpu``: (channels x columns) accumulator tile, whole rows, the padded input
    computed once, kernel columns unrolled."""
    conv = wl.outputs[0]
    _, K, P, Q = (as_int(x) for x in conv.shape)
    channels = as_int(conv.op.reduce_axis[0].extent)
    cols, kt = conv_tile(Q, K, target.vector_lanes(conv.dtype), vector_regs(target))
    values: dict[str, Any] = {
        "tile_k": [_ceil(K, kt), 1, kt],
        "tile_y": [P, 1],
        "tile_x": [_ceil(Q, cols), 1, cols],
        "reorder_acc": [0, 1, 2, 3],
        "tile_rc": [1, channels],
        "reorder_reduce": [0, 1, 2],
        "unroll_window": ["none", "unroll"],
    }
    if any(t.op.name == "pad" for t in conv.op.input_tensors):  # a padding stage (padding > 0)
        values["pad"] = "root"
    return values | _parallel(target, 2)  # channel blocks and rows


#: knob values of the hand-written schedule, by workload name
KNOBS: dict[str, Callable[[Workload, Target], dict[str, Any]]] = {
    "matmul": matmul_knobs,
    "conv2d_nchw": conv2d_nchw_knobs,
}


def hand_written_config(wl: Workload, target: TargetLike = "c") -> ConfigEntity | None:
    """The config of ``wl``'s template on ``target`` that is its hand-written schedule, or None."""
    tgt = Target.parse(target)
    knobs = KNOBS.get(wl.name)
    if knobs is None or tgt.like != "c" or not has_hand_written(wl) or wl.name == "matmul" and wl.args[4]:
        return None  # the matmul template's knobs do not hold the transposed product's schedule
    try:
        return template_space(wl, tgt).from_dict(knobs(wl, tgt))
    except ValueError:  # a knob value the space does not offer for this shape
        return None
