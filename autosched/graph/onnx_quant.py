"""ONNX converters of QuantizeLinear and DequantizeLinear (QDQ models, as onnxruntime's
``quantize_static`` writes them) with a scale per tensor, and of the QOperator form's operators
(QLinearConv, QLinearMatMul and onnxruntime's com.microsoft QGemm, QLinearAdd/Mul, QLinearConcat,
QLinearSigmoid/LeakyRelu/GlobalAveragePool), each written as the DequantizeLinear of its inputs, the
float operator and a QuantizeLinear. Dynamically quantized models (``quantize_dynamic``):
DynamicQuantizeLinear computes its scale and zero point from the input's range at run time, and
MatMulInteger / ConvInteger are the float MatMul / Conv of their operands minus their zero points.

The graph computes in one float type: a quantized value is its integers as whole numbers in it,
and a QuantizeLinear / DequantizeLinear pair rounds an activation to the integer grid and back
(the computation of the quantized model, in float). Both are elementwise steps that fuse into the
producing kernel's epilogue. Weights quantized per channel are constants: their DequantizeLinear is
computed at import.
"""

from __future__ import annotations

import numpy as np

from .ir import GraphError
from .onnx_context import Importer
from .onnx_conv import CONV_ATTRS
from .onnx_rewrite import OnnxNode
from .onnx_table import Result, converter

#: integer types of quantized values -> their range
RANGES = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767)}


def _per_tensor(cx: Importer, n: OnnxNode) -> tuple[float, float, str]:
    """(scale, zero point, the quantized type) of node ``n``: constants of one element each."""
    scale = cx.const(n, 1, "scale")
    zero = cx.optional_const(n, 2, "zero point")
    if scale.size != 1 or (zero is not None and zero.size != 1):
        raise GraphError("a scale and zero point per axis of a computed value are not supported (per tensor)")
    kind = zero.dtype.name if zero is not None else "uint8"
    if kind not in RANGES:
        raise GraphError(f"quantized type {kind} is not one of {', '.join(RANGES)}")
    s = float(scale.reshape(()))
    if not np.isfinite(s) or s == 0.0:
        raise GraphError(f"the scale must be a finite non-zero number, got {s}")
    return s, float(zero.reshape(())) if zero is not None else 0.0, kind


@converter("QuantizeLinear", attrs=("axis", "saturate"),
           doc="of a computed value, scale and zero point per tensor (to uint8, int8, uint16, int16); "
               "of constants: computed at import")
def _quantize(cx: Importer, n: OnnxNode) -> list[Result]:
    scale, zero, kind = _per_tensor(cx, n)
    low, high = RANGES[kind]
    return [cx.b.quantize(cx.value(n.inputs[0]), scale, zero, low, high, name=n.name)]


@converter("DequantizeLinear", attrs=("axis",),
           doc="of a computed value, scale and zero point per tensor; of constants (weights per "
               "channel): computed at import")
def _dequantize(cx: Importer, n: OnnxNode) -> list[Result]:
    scale, zero, _ = _per_tensor(cx, n)
    return [cx.b.dequantize(cx.value(n.inputs[0]), scale, zero, name=n.name)]


def _expand(cx: Importer, n: OnnxNode, nodes: list[OnnxNode]) -> list[Result]:
    """Convert ``nodes`` (the expansion of ``n``, whose last output is ``n``'s) in order."""
    for part in nodes:
        cx.convert(part)
    last = nodes[-1].outputs[0]
    return [cx.values[last] if last in cx.values else cx.consts[last]]


def _bias(cx: Importer, n: OnnxNode, x_scale: str, w_scale: str, at: int, out: str) -> list[str]:
    """The float bias of a QLinearConv: its int32 bias times x_scale x w_scale (per channel),
    added to ``cx.consts`` as ``out``; [] where there is none."""
    if not cx.has(n, at):
        return []
    bias = cx.const(n, at, "bias").astype(np.float64)
    scale = cx.consts[x_scale].astype(np.float64) * cx.consts[w_scale].astype(np.float64).reshape(-1)
    cx.consts[out] = (bias * scale).astype(cx.b.dtype)
    return [out]


@converter("QLinearConv", attrs=CONV_ATTRS,
           doc="as DequantizeLinear of input and weight, Conv with the int32 bias scaled, QuantizeLinear "
               "(activations per tensor, weights per tensor or channel)")
def _qlinear_conv(cx: Importer, n: OnnxNode) -> list[Result]:
    x, xs, xz, w, ws, wz, ys, yz = n.inputs[:8]
    for scale in (xs, ws, ys):
        cx.const(n, n.inputs.index(scale), "scale")
    tag = f"{n.name}.qlinear"
    bias = _bias(cx, n, xs, ws, 8, f"{tag}.bias")
    return _expand(cx, n, [
        OnnxNode("DequantizeLinear", f"{tag}.x", [x, xs, xz], [f"{tag}.xf"]),
        OnnxNode("DequantizeLinear", f"{tag}.w", [w, ws, wz], [f"{tag}.wf"], {"axis": 0}),
        OnnxNode("Conv", f"{tag}.conv", [f"{tag}.xf", f"{tag}.wf", *bias], [f"{tag}.yf"], dict(n.attrs)),
        OnnxNode("QuantizeLinear", n.name, [f"{tag}.yf", ys, yz], [f"{tag}.y"]),
    ])


@converter("QLinearMatMul", doc="as DequantizeLinear of both operands, MatMul, QuantizeLinear "
           "(a constant right operand per tensor or per column)")
def _qlinear_matmul(cx: Importer, n: OnnxNode) -> list[Result]:
    a, a_s, a_z, b, b_s, b_z, ys, yz = n.inputs[:8]
    tag = f"{n.name}.qlinear"
    axis = {"axis": len(cx.shape(b)) - 1} if cx.is_const(b_s) and cx.consts[b_s].size > 1 else {}
    return _expand(cx, n, [
        OnnxNode("DequantizeLinear", f"{tag}.a", [a, a_s, a_z], [f"{tag}.af"]),
        OnnxNode("DequantizeLinear", f"{tag}.b", [b, b_s, b_z], [f"{tag}.bf"], axis),
        OnnxNode("MatMul", f"{tag}.matmul", [f"{tag}.af", f"{tag}.bf"], [f"{tag}.yf"]),
        OnnxNode("QuantizeLinear", n.name, [f"{tag}.yf", ys, yz], [f"{tag}.y"]),
    ])


def _dq(tag: str, triple: list[str], k: int) -> OnnxNode:
    """DequantizeLinear of (value, scale, zero point) ``triple`` into ``{tag}.in{k}``."""
    return OnnxNode("DequantizeLinear", f"{tag}.dq{k}", list(triple), [f"{tag}.in{k}"])


def _q(n: OnnxNode, tag: str, scale: str, zero: str) -> OnnxNode:
    return OnnxNode("QuantizeLinear", n.name, [f"{tag}.out", scale, zero], [f"{tag}.q"])


#: onnxruntime's QOperator contrib operators -> the float operator they quantize
BINARY = {"QLinearAdd": "Add", "QLinearMul": "Mul"}
UNARY = {"QLinearSigmoid": "Sigmoid", "QLinearLeakyRelu": "LeakyRelu",
         "QLinearGlobalAveragePool": "GlobalAveragePool"}


@converter(*BINARY, doc="(com.microsoft) as DequantizeLinear of both operands, the float operator, "
           "QuantizeLinear")
def _qlinear_binary(cx: Importer, n: OnnxNode) -> list[Result]:
    tag = f"{n.name}.qlinear"
    a, b = n.inputs[0:3], n.inputs[3:6]
    op = OnnxNode(BINARY[n.op], f"{tag}.op", [f"{tag}.in0", f"{tag}.in1"], [f"{tag}.out"])
    return _expand(cx, n, [_dq(tag, a, 0), _dq(tag, b, 1), op, _q(n, tag, *n.inputs[6:8])])


@converter(*UNARY, attrs=("alpha", "channels_last"),
           doc="(com.microsoft) as DequantizeLinear, the float operator, QuantizeLinear; channels first")
def _qlinear_unary(cx: Importer, n: OnnxNode) -> list[Result]:
    if n.attrs.get("channels_last", 0):
        raise GraphError("channels_last = 1 is not supported")
    tag = f"{n.name}.qlinear"
    attrs = {"alpha": n.attrs["alpha"]} if "alpha" in n.attrs else {}
    op = OnnxNode(UNARY[n.op], f"{tag}.op", [f"{tag}.in0"], [f"{tag}.out"], attrs)
    return _expand(cx, n, [_dq(tag, n.inputs[0:3], 0), op, _q(n, tag, *n.inputs[3:5])])


@converter("QLinearConcat", attrs=("axis",), doc="(com.microsoft) as DequantizeLinear of each input, "
           "Concat, QuantizeLinear")
def _qlinear_concat(cx: Importer, n: OnnxNode) -> list[Result]:
    tag = f"{n.name}.qlinear"
    triples = [n.inputs[i:i + 3] for i in range(2, len(n.inputs), 3)]
    parts = [_dq(tag, t, k) for k, t in enumerate(triples)]
    concat = OnnxNode("Concat", f"{tag}.op", [p.outputs[0] for p in parts], [f"{tag}.out"], dict(n.attrs))
    return _expand(cx, n, [*parts, concat, _q(n, tag, *n.inputs[0:2])])


@converter("QGemm", attrs=("alpha", "transA", "transB"),
           doc="(com.microsoft) as DequantizeLinear of A and B, Gemm with the int32 bias scaled, "
               "QuantizeLinear where an output scale is given")
def _qgemm(cx: Importer, n: OnnxNode) -> list[Result]:
    tag = f"{n.name}.qlinear"
    a, b = n.inputs[0:3], n.inputs[3:6]
    axis = {"axis": 0 if n.attrs.get("transB", 0) else 1} if cx.consts.get(b[1], np.zeros(1)).size > 1 else {}
    bias = _bias(cx, n, a[1], b[1], 6, f"{tag}.bias")
    gemm = OnnxNode("Gemm", f"{tag}.op" if cx.has(n, 7) else n.name, [f"{tag}.in0", f"{tag}.in1", *bias],
                    [f"{tag}.out"], dict(n.attrs))
    dq_b = OnnxNode("DequantizeLinear", f"{tag}.dq1", list(b), [f"{tag}.in1"], axis)
    quantize = [_q(n, tag, *n.inputs[7:9])] if cx.has(n, 7) else []
    return _expand(cx, n, [_dq(tag, a, 0), dq_b, gemm, *quantize])


def _float_type(cx: Importer) -> int:
    """The ONNX type number of the graph's float type (a Cast's ``to``)."""
    from onnx import helper  # optional dependency; from_onnx said what to install

    return int(helper.np_dtype_to_tensor_dtype(np.dtype(cx.b.dtype)))


def _minus_zero(cx: Importer, n: OnnxNode, i: int, name: str) -> str:
    """ONNX value ``name``: input ``i`` of integer product ``n`` minus its zero point (input
    ``i + 2``) in the graph's float type. A constant (a weight) is computed now, its zero point per
    tensor or per output channel / column; a computed value is a Cast or a Sub."""
    x, zero = n.inputs[i], n.inputs[i + 2] if cx.has(n, i + 2) else ""
    if cx.is_const(x) and (not zero or cx.is_const(zero)):
        value = cx.consts[x].astype(np.float64)
        if zero:
            z = cx.consts[zero].astype(np.float64)
            # per output channel of a Conv weight, per row of A (per column of B broadcasts as it is)
            if z.size > 1 and (n.op == "ConvInteger" or i == 0):
                z = z.reshape((-1,) + (1,) * (value.ndim - 1 if n.op == "ConvInteger" else 1))
            try:
                value = value - z
            except ValueError:
                raise GraphError(f"zero point {zero!r} of shape {z.shape} does not fit input {x!r} of shape "
                                 f"{value.shape}") from None
        cx.consts[name] = value.astype(cx.b.dtype)
        return name
    if zero:
        if cx.is_const(zero) and cx.consts[zero].size > 1:
            raise GraphError(f"a zero point per row of computed input {x!r} is not supported (per tensor)")
        cx.convert(OnnxNode("Sub", name, [x, zero], [name]))
    else:
        cx.convert(OnnxNode("Cast", name, [x], [name], {"to": _float_type(cx)}))
    return name


@converter("MatMulInteger", "ConvInteger", attrs=CONV_ATTRS,
           doc="as the float MatMul / Conv of the operands minus their zero points (a constant's per "
               "tensor or per channel/row/column, a computed one's per tensor); int32 results in the "
               "float type, exact while partial sums stay below 2^24 in float32")
def _integer_product(cx: Importer, n: OnnxNode) -> list[Result]:
    if n.op == "MatMulInteger" and n.attrs:
        raise GraphError(f"MatMulInteger takes no attributes, got {', '.join(n.attrs)}")
    tag = f"{n.name}.integer"
    operands = [_minus_zero(cx, n, i, f"{tag}.in{i}") for i in (0, 1)]
    op = "MatMul" if n.op == "MatMulInteger" else "Conv"
    return _expand(cx, n, [OnnxNode(op, f"{tag}.op", operands, [f"{tag}.out"], dict(n.attrs))])


@converter("DynamicQuantizeLinear",
           doc="computed at run time: scale (max(x, 0) - min(x, 0)) / 255, zero point and values "
               "rounded half to even and saturated to uint8, as whole numbers in the float type "
               "(scale and zero point of shape (1, ...) rather than ())")
def _dynamic_quantize(cx: Importer, n: OnnxNode) -> list[Result]:
    tag = f"{n.name}.dynamic"
    for const, value in (("zero", 0.0), ("levels", 255.0)):
        cx.consts[f"{tag}.{const}"] = np.array(value, np.dtype(cx.b.dtype))
    zero, levels = f"{tag}.zero", f"{tag}.levels"

    def node(op: str, part: str, inputs: list[str], **attrs: int) -> OnnxNode:
        return OnnxNode(op, f"{tag}.{part}", inputs, [f"{tag}.{part}"], dict(attrs))

    parts = [
        node("ReduceMin", "min", [n.inputs[0]], keepdims=1), node("Min", "low", [f"{tag}.min", zero]),
        node("ReduceMax", "max", [n.inputs[0]], keepdims=1), node("Max", "high", [f"{tag}.max", zero]),
        node("Sub", "range", [f"{tag}.high", f"{tag}.low"]), node("Div", "scale", [f"{tag}.range", levels]),
        node("Div", "low_steps", [f"{tag}.low", f"{tag}.scale"]), node("Neg", "shift", [f"{tag}.low_steps"]),
        node("Round", "shift_whole", [f"{tag}.shift"]),
        node("Clip", "zero_point", [f"{tag}.shift_whole", zero, levels]),
        node("Div", "steps", [n.inputs[0], f"{tag}.scale"]), node("Round", "whole", [f"{tag}.steps"]),
        node("Add", "shifted", [f"{tag}.whole", f"{tag}.zero_point"]),
        node("Clip", "y", [f"{tag}.shifted", zero, levels]),
    ]
    for part in parts:
        cx.convert(part)
    return [cx.values[f"{tag}.{out}"] for out in ("y", "scale", "zero_point")]
