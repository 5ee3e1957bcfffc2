"""Schedules of the network workloads (``autosched.graph.fused`` and ``.layers``) for
:mod:`schedule_cases`.

The fused workloads share one shape: reduction or copy stages, then elementwise epilogue stages,
then the output. So their recipes are generic: each one schedules whatever stages the workload has
(inlined epilogues, producers computed inside the output's loops, split + vectorized, parallel,
unrolled reductions). :mod:`schedule_cases` crosses them with :data:`NETWORK_SHAPES`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import autosched as asc

Apply = Callable[[asc.Schedule, asc.Workload], None]

_EPILOGUE = ("bias_add", "scale_mul", "residual_add", "mul", "sub", "div", "relu", "gelu", "sigmoid",
             "maximum", "clip", "leaky_relu")

NETWORK_SHAPES: dict[str, list[tuple[str, tuple[Any, ...]]]] = {
    # (N, C, H, W, K, R, S, stride, pad, groups, epilogue)
    "fused_conv2d": [
        ("even", (1, 4, 8, 8, 8, 3, 3, 1, 1, 1, "bias,add,relu")),
        ("odd", (1, 6, 9, 7, 6, 3, 3, 2, 1, 3, "bias,gelu")),
    ],
    # (N, C, H, W, K, R, S, stride, pad, block, epilogue)
    "fused_conv2d_packed": [
        ("even", (1, 4, 8, 8, 16, 3, 3, 1, 1, 8, "bias,add,relu")),
        ("odd", (1, 5, 9, 7, 12, 3, 3, 2, 1, 4, "bias,gelu")),
    ],
    # the same on blocked activations (N, C/block, H, W, block)
    "fused_conv2d_nchwc": [
        ("even", (1, 8, 8, 8, 16, 3, 3, 1, 1, 8, "bias,add,relu")),
        ("odd", (2, 12, 9, 7, 8, 1, 1, 2, 0, 4, "scale,sub,gelu")),
    ],
    # (N, C, H, W, R, S, stride, pad, block, epilogue)
    "fused_depthwise_nchwc": [
        ("even", (1, 16, 8, 8, 3, 3, 1, 1, 8, "bias,add,relu")),
        ("odd", (2, 12, 9, 7, 3, 3, 2, 1, 4, "scale,gelu")),
    ],
    "fused_dense": [("even", (16, 32, 16, "bias,relu")), ("odd", (7, 13, 19, "bias,add,gelu"))],
    # (M, N, K, block, epilogue): the weight packed by blocks of outputs, N off the block
    "fused_dense_packed": [("even", (16, 32, 16, 16, "bias,relu")), ("odd", (7, 13, 19, 8, "bias,add,gelu"))],
    # the elementwise kernels of an LSTM step (autosched.graph.lstm_cell)
    "lstm_state": [("even", (2, 16, True)), ("odd", (3, 7, False))],
    "lstm_hidden": [("even", (2, 16)), ("odd", (3, 7))],
    "fused_batch_matmul": [("even", (2, 16, 16, 8, "bias")), ("odd", (3, 13, 17, 7, "add,sigmoid"))],
    "fused_elementwise": [
        ("even", (2, 8, 16, "bias,add,relu")), ("odd", (3, 7, 5, "scale,sub,mul,div,gelu")),
    ],
    "global_avg_pool2d": [("even", (1, 8, 8, 8)), ("odd", (2, 3, 7, 5))],
    # the operators of autosched.graph.layers
    "transpose": [("even", ("2x8x4x8", "0,2,3,1")), ("odd", ("3x5x7", "2,0,1"))],
    "broadcast_to": [("even", ("2x1x4x8", "2x8x4x8")), ("odd", ("1x5x1", "3x5x7"))],
    "pad": [("even", ("1x4x6x6", "0,0,1,1,0,0,1,1", 0.0)), ("odd", ("3x5x7", "0,1,2,1,0,3", -1.0)),
            ("reflect", ("2x5x6", "0,1,2,1,3,0", 0.0, "reflect")),
            ("edge", ("3x5x7", "2,0,1,0,3,2", 0.0, "edge"))],
    "layer_norm": [("even", (8, 16, 1e-5)), ("odd", (5, 13, 1e-3))],
    "softmax_axis": [("even", (2, 8, 8)), ("odd", (3, 7, 5))],
    # the operators of autosched.graph.layers_conv, layers_pool, layers_resize and layers_tensor
    "fused_conv": [("3d", ("1x4x4x8x8", "8x4x3x3x3", "1,1,1", "1,1,1,1,1,1", "1,1,1", 1, "bias,add,relu")),
                   ("1d-odd", ("2x6x13", "6x2x3", "2", "1,2", "2", 3, "clip:0.0:6.0,maximum"))],
    "fused_conv_transpose": [
        ("even", ("1x4x4x4", "4x8x4x4", "2,2", "1,1,1,1", "0,0", "1,1", 1, "bias,relu")),
        ("odd", ("1x4x5x3", "4x1x3x2", "3,2", "0,2,1,0", "1,1", "2,1", 2, "leaky_relu:0.1")),
    ],
    "pool": [("max-ceil", ("1x4x9x9", "max", "3,3", "2,2", "0,0,0,0", "1,1", True, False)),
             ("avg-3d", ("1x3x5x6x7", "avg", "2,2,3", "2,2,2", "0,0,1,0,0,1", "1,1,1", True, False))],
    "reduce": [("rows", ("8x16", "1", "mean")), ("columns", ("3x7x5", "0,1", "max"))],
    "slice": [("even", ("4x8x8", "0,0,4", "4,8,8", "1,2,1")), ("odd", ("3x7x5", "1,2,0", "3,7,5", "1,3,2"))],
    "gather": [("even", (1, 16, 8, 4)), ("odd", (3, 7, 5, 6)),
               ("float-indices", (2, 9, 3, 5, "float32", "float32"))],
    "index_to_float": [("even", (16,)), ("odd", (13,))],
    "instance_norm": [("even", (1, 8, 16, 1e-5)), ("odd", (2, 3, 13, 1e-3))],
    "resize": [("nearest", ("1x2x4x4", "1x2x8x8", "nearest", "asymmetric", "floor")),
               ("linear", ("1x3x5x6", "1x3x7x4", "linear", "half_pixel", "round_prefer_floor"))],
}


def _inner(s: asc.Schedule, wl: asc.Workload) -> list[asc.Tensor]:
    """The computed stages before the output, producers first (pad stages left out)."""
    out = wl.outputs[0].op.name
    names = [n for n in s.stages if n not in (out, "pad") and not any(t.name == n for t in wl.inputs)]
    return [s.stages[n].op.output(0) for n in names]


def _default(s: asc.Schedule, wl: asc.Workload) -> None:
    pass


def _inline_epilogue(s: asc.Schedule, wl: asc.Workload) -> None:
    for t in _inner(s, wl):
        if t.op.name.startswith(_EPILOGUE):
            s[t].compute_inline()


def _compute_at(s: asc.Schedule, wl: asc.Workload) -> None:
    out = wl.outputs[0]
    inner = _inner(s, wl)
    if not inner:
        return
    axis = s[out].op.axis[1]
    for t in inner:
        s[t].compute_at(s[out], axis)


def _split_vectorize(s: asc.Schedule, wl: asc.Workload) -> None:
    _inline_epilogue(s, wl)
    out = wl.outputs[0]
    _, inner = s[out].split(s[out].op.axis[-1], 4)
    s[out].vectorize(inner)


def _parallel_unroll(s: asc.Schedule, wl: asc.Workload) -> None:
    out = wl.outputs[0]
    outer = s[out].op.axis[:2]
    s[out].parallel(s[out].fuse(*outer) if len(outer) > 1 else outer[0])
    for t in _inner(s, wl):
        reduce = s[t].op.reduce_axis
        if reduce:
            _, ki = s[t].split(reduce[-1], 2)
            s[t].unroll(ki)


#: (operator, recipe name, apply) for every network workload
NETWORK_RECIPES: list[tuple[str, str, Apply]] = [
    (op, name, fn)
    for op in NETWORK_SHAPES
    for name, fn in (
        ("default", _default),
        ("inline_epilogue", _inline_epilogue),
        ("compute_at", _compute_at),
        ("split_vectorize", _split_vectorize),
        ("parallel_unroll", _parallel_unroll),
    )
]
