"""ONNX converters of normalizations (BatchNormalization, InstanceNormalization, LayerNormalization,
GroupNormalization), reductions (ReduceMean/Sum/Max/Min, of squares, L1, L2, LogSum, LogSumExp),
Pad and Resize."""

from __future__ import annotations

import numpy as np

from .ir import GraphError
from .onnx_context import Importer, unsupported
from .onnx_fold import axes_of
from .onnx_rewrite import OnnxNode, pad_widths
from .onnx_table import Result, converter


@converter("BatchNormalization", attrs=("epsilon", "momentum", "training_mode"),
           doc="inference, any rank; after a Conv or ConvTranspose folded into its weights, else a "
           "per-channel scale and bias")
def _batch_norm(cx: Importer, n: OnnxNode) -> list[Result]:
    if n.attrs.get("training_mode", 0):
        raise unsupported("training_mode", n.attrs["training_mode"], "autosched runs inference")
    gamma, beta, mean, var = (cx.const(n, i, what).astype(np.float64)
                              for i, what in enumerate(("scale", "bias", "mean", "var"), 1))
    factor = gamma / np.sqrt(var + float(n.attrs.get("epsilon", 1e-5)))
    scaled = cx.b.scale(cx.value(n.inputs[0]), cx.constant(factor), axis=1)
    return [cx.b.bias_add(scaled, cx.constant(beta - mean * factor), axis=1, name=n.name)]


@converter("InstanceNormalization", attrs=("epsilon",), doc="any rank >= 3, constant scale and bias")
def _instance_norm(cx: Importer, n: OnnxNode) -> list[Result]:
    scale, bias = cx.const(n, 1, "scale"), cx.const(n, 2, "bias")
    x, eps = cx.value(n.inputs[0]), float(n.attrs.get("epsilon", 1e-5))
    gamma, beta = (cx.constant(v.reshape(-1)) for v in (scale, bias))
    return [cx.b.instance_norm(x, gamma, beta, eps, name=n.name)]


@converter("LayerNormalization", attrs=("axis", "epsilon", "stash_type"),
           doc="any axis, constant scale and bias (through Identity too); the Y output")
def _layer_norm(cx: Importer, n: OnnxNode) -> list[Result]:
    x = cx.value(n.inputs[0])
    shape = cx.b.shape(x)
    axis = int(n.attrs.get("axis", -1))
    if not -len(shape) <= axis < len(shape):
        raise GraphError(f"axis {axis} is out of range for an input of {len(shape)} axes")
    normalized = shape[axis % len(shape):]  # scale and bias broadcast to these axes
    gamma = cx.const(n, 1, "scale")
    beta = cx.const(n, 2, "bias") if cx.has(n, 2) else np.zeros_like(gamma)
    try:
        gamma, beta = (np.broadcast_to(v, normalized).reshape(-1) for v in (gamma, beta))
    except ValueError:
        shapes = f"scale {gamma.shape} and bias {beta.shape}"
        raise GraphError(f"{shapes} do not broadcast to the normalized axes {normalized}") from None
    eps = float(n.attrs.get("epsilon", 1e-5))
    return [cx.b.layer_norm(x, cx.constant(gamma), cx.constant(beta), eps, axis=axis, name=n.name)]


#: ONNX reduction -> the builder's ``reduce`` kind
REDUCE = {"ReduceMean": "mean", "ReduceSum": "sum", "ReduceMax": "max", "ReduceMin": "min"}


#: reductions of a function of the input: ONNX operator -> (function before, kind, function after)
REDUCE_OF = {"ReduceSumSquare": ("square", "sum", None), "ReduceL2": ("square", "sum", "sqrt"),
             "ReduceL1": ("abs", "sum", None), "ReduceLogSum": (None, "sum", "log")}


@converter(*REDUCE, *REDUCE_OF, "ReduceLogSumExp", attrs=("axes", "keepdims", "noop_with_empty_axes"),
           doc="axes as attribute or constant input, keepdims, noop_with_empty_axes; LogSumExp "
               "shifted by the maximum (no overflow)")
def _reduce(cx: Importer, n: OnnxNode) -> list[Result]:
    x = cx.value(n.inputs[0])
    rank = len(cx.b.shape(x))
    axes = axes_of(n, [None, cx.optional_const(n, 1, "axes")])
    if not axes:
        if n.attrs.get("noop_with_empty_axes", 0):
            return [x]
        axes = list(range(rank))
    axes = [a + rank if a < 0 else a for a in axes]
    keep = bool(n.attrs.get("keepdims", 1))
    if n.op in REDUCE:
        return [cx.b.reduce(x, REDUCE[n.op], axes, keep, name=n.name)]
    if n.op == "ReduceLogSumExp":
        top = cx.b.reduce(x, "max", axes, True)
        shifted = cx.b.sub(x, cx.b.broadcast(top, cx.b.shape(x)))
        total = cx.b.unary(cx.b.reduce(cx.b.unary(shifted, "exp"), "sum", axes, True), "log")
        out = cx.b.add(total, top)
        return [out if keep else cx.b.reshape(out, [d for i, d in enumerate(cx.b.shape(x)) if i not in axes])]
    before, kind, after = REDUCE_OF[n.op]
    if before is not None:
        x = cx.b.unary(x, "pow", alpha=2.0) if before == "square" else cx.b.unary(x, before)
    out = cx.b.reduce(x, kind, axes, keep, name=None if after else n.name)
    return [cx.b.unary(out, after, name=n.name) if after else out]


@converter("GroupNormalization", attrs=("epsilon", "num_groups", "stash_type"),
           doc="any rank >= 3, constant scale and bias per channel (opset 21) or per group (18)")
def _group_norm(cx: Importer, n: OnnxNode) -> list[Result]:
    x = cx.value(n.inputs[0])
    shape = cx.b.shape(x)
    groups, eps = int(n.attrs["num_groups"]), float(n.attrs.get("epsilon", 1e-5))
    if len(shape) < 3 or groups < 1 or shape[1] % groups:
        raise GraphError(f"num_groups {groups} must divide the channels of an input (N, C, ...), got {shape}")
    scale, bias = cx.const(n, 1, "scale").reshape(-1), cx.const(n, 2, "bias").reshape(-1)
    c = shape[1]
    if scale.size == groups != c:  # opset 18: one scale and bias per group
        scale, bias = np.repeat(scale, c // groups), np.repeat(bias, c // groups)
    if scale.size != c or bias.size != c:
        raise GraphError(f"scale {scale.shape} and bias {bias.shape} must have the {c} channels' elements")
    grouped = cx.b.reshape(x, (shape[0], groups, -1))
    ones, zeros = cx.constant(np.ones(groups)), cx.constant(np.zeros(groups))
    normal = cx.b.reshape(cx.b.instance_norm(grouped, ones, zeros, eps), shape)
    scaled = cx.b.scale(normal, cx.constant(scale), axis=1)
    return [cx.b.bias_add(scaled, cx.constant(bias), axis=1, name=n.name)]


@converter("Pad", attrs=("mode",), doc="constant, reflect and edge modes, constant pads and axes; a zero "
           "spatial Pad before a Conv becomes its padding")
def _pad(cx: Importer, n: OnnxNode) -> list[Result]:
    x = cx.value(n.inputs[0])
    widths, value, mode = pad_widths(n, cx.consts, len(cx.b.shape(x)))
    return [cx.b.pad(x, widths, value, mode=mode, name=n.name) if any(widths) else x]


RESIZE_COORDINATES = ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel")


def _resize_shape(cx: Importer, n: OnnxNode, shape: tuple[int, ...]) -> list[int]:
    """The output shape a Resize node asks for (sizes, or scales that give whole sizes)."""
    rank = len(shape)
    axes = [a + rank if a < 0 else a for a in cx.ints(n, "axes", range(rank))]
    sizes, scales = cx.optional_const(n, 3, "sizes"), cx.optional_const(n, 2, "scales")
    out = list(shape)
    if sizes is not None and sizes.size:
        policy = cx.text(n, "keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            raise unsupported("keep_aspect_ratio_policy", policy, "only stretch")
        for a, s in zip(axes, sizes.reshape(-1), strict=True):
            out[a] = int(s)
        return out
    if scales is None or not scales.size:
        raise GraphError("it needs scales or sizes")
    exact = cx.text(n, "coordinate_transformation_mode", "half_pixel") == "align_corners"
    for a, s in zip(axes, scales.reshape(-1), strict=True):
        out[a] = int(np.floor(shape[a] * float(s)))
        if not exact and abs(out[a] - shape[a] * float(s)) > 1e-6 * out[a]:
            raise GraphError(f"scale {float(s)} of axis {a} ({shape[a]} -> {shape[a] * float(s):g}) does not "
                             "give a whole size; give sizes instead")
    return out


@converter("Resize", attrs=("antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a",
                            "exclude_outside", "extrapolation_value", "keep_aspect_ratio_policy", "mode",
                            "nearest_mode"),
           doc="nearest and linear, scales or sizes (with axes), coordinate modes half_pixel, "
           "asymmetric, align_corners, pytorch_half_pixel")
def _resize(cx: Importer, n: OnnxNode) -> list[Result]:
    x = cx.value(n.inputs[0])
    mode = cx.text(n, "mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise unsupported("mode", mode, "only nearest and linear")
    coordinates = cx.text(n, "coordinate_transformation_mode", "half_pixel")
    if coordinates not in RESIZE_COORDINATES:
        known = ", ".join(RESIZE_COORDINATES)
        raise unsupported("coordinate_transformation_mode", coordinates, f"one of {known}")
    for key in ("antialias", "exclude_outside"):
        if n.attrs.get(key, 0):
            raise unsupported(key, n.attrs[key], "only 0")
    out = _resize_shape(cx, n, cx.b.shape(x))
    if out == list(cx.b.shape(x)):
        return [x]
    return [cx.b.resize(x, out, mode=mode, coordinate_transformation_mode=coordinates,
                        nearest_mode=cx.text(n, "nearest_mode", "round_prefer_floor"), name=n.name)]
