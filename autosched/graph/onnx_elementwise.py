"""ONNX converters of elementwise operators: activations, arithmetic with numpy broadcasting,
Max/Min, Where, Pow, Cast, Identity/Dropout, Softmax and LogSoftmax."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from .ir import GraphError, Shape
from .onnx_context import FLOATS, Importer, unsupported
from .onnx_rewrite import OnnxNode
from .onnx_table import Result, converter

#: ONNX operator -> the builder's ``unary`` function
UNARY = {"Tanh": "tanh", "Erf": "erf", "Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Reciprocal": "reciprocal",
         "Neg": "neg", "Abs": "abs", "Softplus": "softplus", "HardSwish": "hard_swish", "Mish": "mish",
         "Softsign": "softsign", "Round": "round"}


@converter(*UNARY, doc="elementwise")
def _unary(cx: Importer, n: OnnxNode) -> list[Result]:
    return [cx.b.unary(cx.value(n.inputs[0]), UNARY[n.op], name=n.name)]


@converter("Relu", "Sigmoid", doc="elementwise")
def _relu_sigmoid(cx: Importer, n: OnnxNode) -> list[Result]:
    fn = cx.b.relu if n.op == "Relu" else cx.b.sigmoid
    return [fn(cx.value(n.inputs[0]), name=n.name)]


#: ONNX operator with an ``alpha`` attribute -> the builder's ``unary`` function, alpha's default
ALPHA = {"LeakyRelu": ("leaky_relu", 0.01), "Elu": ("elu", 1.0), "Celu": ("celu", 1.0),
         "ThresholdedRelu": ("thresholded_relu", 1.0)}


@converter(*ALPHA, attrs=("alpha",), doc="elementwise")
def _alpha(cx: Importer, n: OnnxNode) -> list[Result]:
    fn, default = ALPHA[n.op]
    return [cx.b.unary(cx.value(n.inputs[0]), fn, alpha=float(n.attrs.get("alpha", default)), name=n.name)]


@converter("Selu", attrs=("alpha", "gamma"), doc="elementwise")
def _selu(cx: Importer, n: OnnxNode) -> list[Result]:
    alpha, gamma = (float(n.attrs[a]) if a in n.attrs else None for a in ("alpha", "gamma"))
    return [cx.b.unary(cx.value(n.inputs[0]), "selu", alpha=alpha, beta=gamma, name=n.name)]


@converter("HardSigmoid", attrs=("alpha", "beta"), doc="elementwise")
def _hard_sigmoid(cx: Importer, n: OnnxNode) -> list[Result]:
    alpha, beta = float(n.attrs.get("alpha", 0.2)), float(n.attrs.get("beta", 0.5))
    return [cx.b.unary(cx.value(n.inputs[0]), "hard_sigmoid", alpha=alpha, beta=beta, name=n.name)]


def _scalar(cx: Importer, n: OnnxNode, i: int, what: str) -> float | None:
    """Optional input ``i``, a constant scalar, as a float (None where absent)."""
    v = cx.optional_const(n, i, what)
    if v is None:
        return None
    if v.size != 1:
        raise GraphError(f"the {what} must be a scalar, got shape {v.shape}")
    return float(v.reshape(()))


@converter("Clip", attrs=("min", "max"),
           doc="min and max as constant inputs (or attributes); ReLU6 and friends")
def _clip(cx: Importer, n: OnnxNode) -> list[Result]:
    low, high = _scalar(cx, n, 1, "min"), _scalar(cx, n, 2, "max")
    low = float(n.attrs["min"]) if "min" in n.attrs else low
    high = float(n.attrs["max"]) if "max" in n.attrs else high
    x = cx.value(n.inputs[0])
    if low is None and high is None:
        return [x]
    if low == 0.0 and high is None:
        return [cx.b.relu(x, name=n.name)]
    return [cx.b.unary(x, "clip", alpha=low, beta=high, name=n.name)]


@converter("Gelu", attrs=("approximate",), doc="`approximate` none (the erf form; the erf-form subgraph "
           "of older exporters is recognized too)")
def _gelu(cx: Importer, n: OnnxNode) -> list[Result]:
    approximate = cx.text(n, "approximate", "none")
    if approximate != "none":
        raise unsupported("approximate", approximate, "only the exact (erf) Gelu")
    return [cx.b.gelu(cx.value(n.inputs[0]), name=n.name)]


@converter("Softmax", "LogSoftmax", attrs=("axis",), doc="any axis")
def _softmax(cx: Importer, n: OnnxNode) -> list[Result]:
    x = cx.value(n.inputs[0])
    axis = int(n.attrs.get("axis", -1))
    if n.op == "Softmax":
        return [cx.b.softmax(x, axis, name=n.name)]
    return [cx.b.unary(cx.b.softmax(x, axis), "log", name=n.name)]


@converter("Identity", doc="a copy of its input")
def _identity(cx: Importer, n: OnnxNode) -> list[Result]:
    return [cx.value(n.inputs[0])]


@converter("Dropout", attrs=("seed",), doc="inference: its input (the mask output, all true, too)")
def _dropout(cx: Importer, n: OnnxNode) -> list[Result]:
    training = cx.optional_const(n, 2, "training_mode")
    if training is not None and bool(training.reshape(-1)[0]):
        raise GraphError("training_mode must be false (autosched runs inference)")
    x = cx.value(n.inputs[0])
    return [x, np.ones(cx.b.shape(x), np.bool_)]


@converter("Cast", attrs=("to", "saturate"),
           doc="of a computed value to the graph's float type (a copy), of computed integers to integer "
               "types, bool or the float type; any cast of constants")
def _cast(cx: Importer, n: OnnxNode) -> list[Result]:
    from onnx import helper  # optional dependency; from_onnx said what to install

    to = np.dtype(helper.tensor_dtype_to_np_dtype(int(n.attrs["to"]))).name
    got = cx.dtype(n.inputs[0])
    if cx.is_index(n.inputs[0]) and (np.dtype(to).kind in "iu" or to == cx.b.dtype):
        return [cx.index_value(n.inputs[0])]  # whole numbers stay as they are
    if cx.is_index(n.inputs[0]) and to == "bool":  # x != 0
        nonzero = cx.b.unary(cx.b.unary(cx.index_value(n.inputs[0]), "logical_not"), "logical_not")
        return [nonzero]
    if to != cx.b.dtype or got != cx.b.dtype:
        raise GraphError(f"a cast of the computed value {n.inputs[0]!r} from {got} to {to} is not supported "
                         f"({FLOATS})")
    return [cx.value(n.inputs[0])]


def _check_types(cx: Importer, n: OnnxNode, names: Sequence[str]) -> None:
    """GraphError naming the node's operand types where one is not a float and they differ."""
    kinds = [cx.dtype(v) for v in names]
    if len(set(kinds)) > 1 and any(np.dtype(k).kind != "f" for k in kinds):
        pairs = ", ".join(f"{v!r} is {k}" for v, k in zip(names, kinds, strict=True))
        raise GraphError(f"its operands differ in type ({pairs}): {n.op} takes one type for all")


def broadcast_shape(cx: Importer, names: Sequence[str]) -> Shape:
    """The shape the ONNX values ``names`` broadcast to (numpy's rules)."""
    shapes = [cx.shape(v) for v in names]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise GraphError(f"shapes {' and '.join(map(str, shapes))} do not broadcast") from None


def _vector(shape: Shape, c: np.ndarray) -> tuple[np.ndarray, int] | None:
    """The constant ``c`` as a vector along one axis of a value of ``shape`` (a scalar: along the
    channels, axis 1 of a 4-D tensor, else the last), or None if it is not one."""
    try:
        if not shape or np.broadcast_shapes(shape, c.shape) != shape:
            return None
    except ValueError:
        return None
    if c.size == 1:
        axis = 1 if len(shape) == 4 else len(shape) - 1
        return np.full(shape[axis], c.reshape(()), np.float64), axis
    wide = [i for i, d in enumerate(c.shape) if d != 1]
    return (c.reshape(-1).astype(np.float64), len(shape) - c.ndim + wide[0]) if len(wide) == 1 else None


@converter("Add", "Sub", "Mul", "Div", doc="numpy broadcasting; a scalar or per-axis constant becomes a "
           "fused bias or scale; Add, Sub and Mul of integers computed from an integer input too")
def _binary(cx: Importer, n: OnnxNode) -> list[Result]:
    _check_types(cx, n, n.inputs)
    x_name, y_name = n.inputs
    if cx.is_index(x_name) and cx.is_index(y_name):  # integers computed from an integer input
        if n.op == "Div":
            raise GraphError("integer division of computed values is not supported")
        shape = broadcast_shape(cx, (x_name, y_name))
        method = {"Add": cx.b.add, "Sub": cx.b.sub, "Mul": cx.b.mul}[n.op]
        return [method(cx.index_value(x_name, shape), cx.index_value(y_name, shape), name=n.name)]
    if n.op in ("Add", "Mul") and cx.is_const(x_name) and not cx.is_const(y_name):
        x_name, y_name = y_name, x_name
    if cx.is_const(y_name) and not cx.is_const(x_name):
        cx.check_float(y_name)
        x = cx.value(x_name)
        found = _vector(cx.b.shape(x), cx.consts[y_name])
        if found is not None:
            vector, axis = found
            if n.op in ("Add", "Sub"):
                bias = cx.constant(vector if n.op == "Add" else -vector)
                return [cx.b.bias_add(x, bias, axis=axis, name=n.name)]
            factor = cx.constant(vector if n.op == "Mul" else 1.0 / vector)
            return [cx.b.scale(x, factor, axis=axis, name=n.name)]
    shape = broadcast_shape(cx, (x_name, y_name))
    a, b = cx.expanded(x_name, shape), cx.expanded(y_name, shape)
    method = {"Add": cx.b.add, "Sub": cx.b.sub, "Mul": cx.b.mul, "Div": cx.b.div}[n.op]
    return [method(a, b, name=n.name)]


def _times(cx: Importer, x: str, factor: str, name: str | None) -> str:
    """Builder value ``x`` times ONNX value ``factor`` (broadcast to x): a per-axis constant is a
    scale step, anything else a product."""
    shape = cx.b.shape(x)
    found = _vector(shape, cx.consts[factor]) if cx.is_const(factor) else None
    if found is not None:
        return cx.b.scale(x, cx.constant(found[0]), axis=found[1], name=name)
    return cx.b.mul(x, cx.expanded(factor, shape), name=name)


@converter("Sum", "Mean", doc="any number of inputs, numpy broadcasting")
def _sum(cx: Importer, n: OnnxNode) -> list[Result]:
    _check_types(cx, n, n.inputs)
    cx.check_float(*n.inputs)
    shape = broadcast_shape(cx, n.inputs)
    out = cx.expanded(n.inputs[0], shape)
    last = n.name if n.op == "Sum" else None
    for i, v in enumerate(n.inputs[1:], 2):
        out = cx.b.add(out, cx.expanded(v, shape), name=last if i == len(n.inputs) else None)
    if n.op == "Sum" or len(n.inputs) == 1:
        return [out]
    cx.consts[f"{n.name}.share"] = np.array(1.0 / len(n.inputs), np.dtype(cx.b.dtype))
    return [_times(cx, out, f"{n.name}.share", n.name)]


@converter("PRelu", doc="the slope a constant or computed value broadcast to the input (a scalar: LeakyRelu)")
def _prelu(cx: Importer, n: OnnxNode) -> list[Result]:
    x_name, slope = n.inputs
    _check_types(cx, n, n.inputs)
    cx.check_float(slope)
    x = cx.value(x_name)
    if cx.is_const(slope) and cx.consts[slope].size == 1:
        return [cx.b.unary(x, "leaky_relu", alpha=float(cx.consts[slope].reshape(())), name=n.name)]
    negative = _times(cx, cx.b.unary(x, "clip", beta=0.0), slope, None)  # slope * min(x, 0)
    return [cx.b.add(cx.b.relu(x), negative, name=n.name)]


@converter("Max", "Min",
           doc="any number of inputs, numpy broadcasting; a scalar constant bound becomes a clip")
def _max_min(cx: Importer, n: OnnxNode) -> list[Result]:
    _check_types(cx, n, n.inputs)
    cx.check_float(*n.inputs)
    shape = broadcast_shape(cx, n.inputs)
    computed = [v for v in n.inputs if not cx.is_const(v)]
    consts = [cx.consts[v] for v in n.inputs if cx.is_const(v)]
    pick = np.maximum if n.op == "Max" else np.minimum
    method = cx.b.maximum if n.op == "Max" else cx.b.minimum
    out = cx.expanded(computed[0], shape)
    for v in computed[1:]:
        out = method(out, cx.expanded(v, shape))
    if not consts:
        return [out]
    if all(c.size == 1 for c in consts):
        bound = float(functools.reduce(pick, [c.reshape(()) for c in consts]))
        low, high = (bound, None) if n.op == "Max" else (None, bound)
        return [cx.b.unary(out, "clip", alpha=low, beta=high, name=n.name)]
    together = functools.reduce(pick, [np.broadcast_to(c, shape) for c in consts])
    return [method(out, cx.constant(together), name=n.name)]


@converter("Pow",
           doc="a constant scalar exponent (elementwise power), or a computed one (numpy broadcasting)")
def _pow(cx: Importer, n: OnnxNode) -> list[Result]:
    base, exponent = n.inputs
    if cx.is_const(exponent) and cx.consts[exponent].size == 1 and not cx.is_const(base):
        e = float(cx.consts[exponent].reshape(()))
        x = cx.value(base)
        if e == 1.0:
            return [x]
        return [cx.b.unary(x, "pow", alpha=e, name=n.name)]
    _check_types(cx, n, n.inputs)
    shape = broadcast_shape(cx, n.inputs)
    return [cx.b.pow(cx.expanded(base, shape), cx.expanded(exponent, shape), name=n.name)]


@converter("Where", doc="a constant condition (masks): x * c + y * (1 - c), exact for finite values")
def _where(cx: Importer, n: OnnxNode) -> list[Result]:
    cond, x, y = n.inputs
    if not cx.is_const(cond):
        raise GraphError(f"the condition {cond!r} must be a constant (it is computed from the inputs)")
    _check_types(cx, n, (x, y))
    cx.check_float(x, y)
    shape = broadcast_shape(cx, n.inputs)
    c = np.broadcast_to(cx.consts[cond], shape).astype(bool)
    if c.all() or not c.any():
        return [cx.expanded(x if c.all() else y, shape)]
    parts = []
    for v, keep in ((x, c), (y, ~c)):
        if cx.is_const(v):
            parts.append(cx.constant(np.where(keep, np.broadcast_to(cx.consts[v], shape), 0)))
        else:
            parts.append(cx.b.mul(cx.expanded(v, shape), cx.constant(keep)))
    return [cx.b.add(parts[0], parts[1], name=n.name)]
