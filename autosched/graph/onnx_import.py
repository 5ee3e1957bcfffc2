"""``asc.from_onnx(path_or_model)``: an ONNX model (opset >= 13) as a :class:`~.ir.Graph`.

Supported operators: Conv (groups, symmetric pads, equal strides), BatchNormalization (folded into
the weights and bias of a Conv right before it, else a per-channel scale and bias), Gemm, MatMul,
Add, Sub, Mul, Div (numpy broadcasting; a scalar or per-channel constant becomes a bias or scale
vector), Relu, Sigmoid, Gelu (opset 20, or the ``x * 0.5 * (1 + erf(x / sqrt(2)))`` subgraph
exporters write for older opsets), Softmax (any axis), LayerNormalization (any axis),
Transpose, Pad (constant, reflect and edge modes; a zero spatial Pad before a Conv becomes its
padding), MaxPool, AveragePool, GlobalAveragePool, Reshape, Flatten, Concat, Identity, Dropout and
Constant. Anything else is one :class:`~.ir.GraphError` naming the operator and its node.

A network computes in one type, float32 or float64 (its inputs' type): an input, output or weight
of another type (float16, an integer type, or a mix of the two) is one :class:`~.ir.GraphError`
naming it, its node and its type.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .ir import Graph, GraphBuilder, GraphError
from .onnx_rewrite import OnnxNode, find_gelu, fold_batch_norm, fold_constants, fold_pad, pad_widths

MIN_OPSET = 13
FLOATS = "autosched networks compute in float32 or float64, one type for the whole graph"


def _load(model: Any) -> Any:
    try:
        import onnx
    except ImportError:
        raise ImportError("from_onnx needs the onnx package: pip install onnx") from None
    if isinstance(model, onnx.ModelProto):
        return model
    if not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"from_onnx takes a path or an onnx.ModelProto, got {type(model).__name__}")
    try:
        proto = onnx.load(os.fspath(model))
    except FileNotFoundError:
        raise GraphError(f"{os.fspath(model)}: no such file") from None
    except Exception as e:  # protobuf's DecodeError and friends: the bytes are not a model
        raise GraphError(f"{os.fspath(model)}: not an ONNX model ({type(e).__name__})") from None
    if proto.ir_version == 0 or not proto.graph.node:
        raise GraphError(f"{os.fspath(model)}: not an ONNX model (no graph in it)")
    return proto


def _opset(proto: Any, where: str) -> int:
    versions = [o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")]
    if not versions or versions[0] < MIN_OPSET:
        got = versions[0] if versions else "none"
        raise GraphError(f"{where}: ONNX opset {got} is not supported; autosched reads opset >= {MIN_OPSET}")
    return int(versions[0])


def _input_shape(value: Any, overrides: Mapping[str, Sequence[int]]) -> tuple[int, ...]:
    if value.name in overrides:
        return tuple(int(d) for d in overrides[value.name])
    dims = value.type.tensor_type.shape.dim
    shape = []
    for i, d in enumerate(dims):
        if not d.HasField("dim_value") or d.dim_value <= 0:
            label = d.dim_param or f"dimension {i}"
            raise GraphError(
                f"input {value.name!r} has a dynamic dimension {label!r} without a value; "
                f"pass shapes={{{value.name!r}: (...)}} to from_onnx"
            )
        shape.append(int(d.dim_value))
    return tuple(shape)


def _type_name(elem_type: int) -> str:
    """An ONNX element type's name as numpy spells it (``float16``), else ONNX's own (``BFLOAT16``)."""
    from onnx import TensorProto, helper  # optional dependency; _load said what to install

    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except (KeyError, TypeError, ValueError):
        known = elem_type in TensorProto.DataType.values()
        return TensorProto.DataType.Name(elem_type) if known else f"element type {elem_type}"


def _graph_dtype(proto: Any, consts: Mapping[str, np.ndarray]) -> str:
    """The type the graph computes in (its first input's); GraphError naming the input or output,
    its node and its type where one is of another type or of one networks do not run."""
    from onnx import TensorProto  # optional dependency; _load said what to install

    reader = {v: n.name or n.op_type for n in reversed(proto.graph.node) for v in n.input}
    writer = {v: n.name or n.op_type for n in proto.graph.node for v in n.output}
    values = [("input", v, reader) for v in proto.graph.input if v.name not in consts]
    dtype = None
    for kind, value, nodes in values + [("output", v, writer) for v in proto.graph.output]:
        elem = value.type.tensor_type.elem_type
        if elem == TensorProto.UNDEFINED:
            continue
        name = _type_name(elem)
        if elem not in (TensorProto.FLOAT, TensorProto.DOUBLE) or name != (dtype or name):
            node = f" of node {nodes[value.name]!r}" if value.name in nodes else ""
            raise GraphError(f"{kind} {value.name!r}{node} is {name}: {FLOATS}")
        dtype = name
    return dtype or "float32"


def from_onnx(model: Any, shapes: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """The graph of an ONNX model (a path or an ``onnx.ModelProto``); ``shapes`` gives values to
    dynamic input dimensions, by input name. Raises :class:`~.ir.GraphError` with one clear line."""
    proto = _load(model)
    from onnx import helper, numpy_helper  # optional dependency; _load said what to install

    where = str(model) if isinstance(model, (str, os.PathLike)) else (proto.graph.name or "model")
    _opset(proto, where)
    consts = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    dtype = _graph_dtype(proto, consts)
    nodes = [
        OnnxNode(n.op_type, n.name or f"{n.op_type}#{i}", list(n.input), list(n.output),
                  {a.name: helper.get_attribute_value(a) for a in n.attribute})
        for i, n in enumerate(proto.graph.node)
    ]
    for n in nodes:
        if n.op == "Constant":
            if "value" not in n.attrs:
                raise GraphError(f"Constant node {n.name!r}: only the 'value' attribute is supported")
            consts[n.outputs[0]] = numpy_helper.to_array(n.attrs["value"])
    nodes = fold_constants([n for n in nodes if n.op != "Constant"], consts)
    nodes = fold_batch_norm(find_gelu(nodes, consts), consts)
    nodes = fold_pad(nodes, consts, {o.name for o in proto.graph.output})
    b = GraphBuilder(proto.graph.name or "model", dtype)
    values: dict[str, str] = {}
    for inp in proto.graph.input:
        if inp.name not in consts:
            values[inp.name] = b.input(inp.name, _input_shape(inp, shapes or {}))
    importer = _Importer(b, values, consts)
    for n in nodes:
        importer.convert(n)
    b.output(*(importer.value(o.name) for o in proto.graph.output))
    return b.build()


class _Importer:
    """Converts ONNX nodes one by one into builder calls."""

    def __init__(self, b: GraphBuilder, values: dict[str, str], consts: dict[str, np.ndarray]) -> None:
        self.b, self.values, self.consts = b, values, consts
        self.ops: dict[str, Callable[[OnnxNode], str]] = {
            "Conv": self._conv, "Gemm": self._gemm, "MatMul": self._matmul,
            **dict.fromkeys(("Add", "Sub", "Mul", "Div"), self._binary),
            "BatchNormalization": self._batch_norm, "LayerNormalization": self._layer_norm,
            "Transpose": self._transpose, "Pad": self._pad,
            "Relu": lambda n: b.relu(self.value(n.inputs[0]), name=n.name),
            "Sigmoid": lambda n: b.sigmoid(self.value(n.inputs[0]), name=n.name),
            "Gelu": self._gelu, "Softmax": self._softmax, "MaxPool": self._pool, "AveragePool": self._pool,
            "GlobalAveragePool": lambda n: b.global_avg_pool2d(self.value(n.inputs[0]), name=n.name),
            "Reshape": self._reshape, "Flatten": self._flatten, "Concat": self._concat,
            "Identity": lambda n: self.value(n.inputs[0]), "Dropout": lambda n: self.value(n.inputs[0]),
        }

    def value(self, name: str) -> str:
        """The builder value of an ONNX value (a constant becomes a graph constant on first use)."""
        if name not in self.values:
            if name not in self.consts:
                raise GraphError(f"value {name!r} is read before it is computed")
            if self.consts[name].dtype != self.b.dtype:
                raise GraphError(f"constant {name!r} is {self.consts[name].dtype.name}: {FLOATS}")
            self.values[name] = self.b.constant(self.consts[name], name)
        return self.values[name]

    def convert(self, n: OnnxNode) -> None:
        """Add node ``n`` to the graph."""
        convert = self.ops.get(n.op)
        if convert is None:
            raise GraphError(f"unsupported ONNX operator {n.op!r} (node {n.name!r})")
        try:
            self.values[n.outputs[0]] = convert(n)
        except GraphError as e:
            raise GraphError(f"{n.op} node {n.name!r}: {e}") from None

    def _const(self, n: OnnxNode, i: int, what: str) -> np.ndarray:
        if i >= len(n.inputs) or n.inputs[i] not in self.consts:
            raise GraphError(f"the {what} must be a constant")
        return self.consts[n.inputs[i]]

    def _conv(self, n: OnnxNode) -> str:
        a = n.attrs
        pads, strides = list(a.get("pads", [0, 0, 0, 0])), list(a.get("strides", [1, 1]))
        if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET") or len(set(pads)) > 1:
            got = f"pads={pads} auto_pad={a.get('auto_pad')}"
            raise GraphError(f"only equal explicit pads are supported, got {got}")
        if len(set(strides)) > 1 or set(a.get("dilations", [1])) != {1}:
            raise GraphError(f"only equal strides and no dilation are supported, got strides={strides}")
        bias = self.value(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
        return self.b.conv2d(self.value(n.inputs[0]), self.value(n.inputs[1]), bias, stride=int(strides[0]),
                             pad=int(pads[0]), groups=int(a.get("group", 1)), name=n.name)

    def _gemm(self, n: OnnxNode) -> str:
        a = n.attrs
        if a.get("transA", 0) or a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0:
            raise GraphError("only Gemm with transA=0, alpha=1, beta=1 is supported")
        w = self._const(n, 1, "weight (B)")
        weight = w if a.get("transB", 0) else np.ascontiguousarray(w.T)
        wname = n.inputs[1] if a.get("transB", 0) else f"{n.name}.weight_t"
        self.consts.setdefault(wname, weight)
        bias = None
        if len(n.inputs) > 2 and n.inputs[2]:
            c = self._const(n, 2, "bias (C)")
            flat = c.ndim != 1
            bias = self.b.constant(c.reshape(-1), f"{n.name}.bias") if flat else self.value(n.inputs[2])
        return self.b.dense(self.value(n.inputs[0]), self.value(wname), bias, name=n.name)

    def _matmul(self, n: OnnxNode) -> str:
        x = self.value(n.inputs[0])
        shape = self.b.shape(x)
        if n.inputs[1] in self.consts and self.consts[n.inputs[1]].ndim == 2:
            w = self.consts[n.inputs[1]]
            wname = f"{n.name}.weight_t"
            self.consts.setdefault(wname, np.ascontiguousarray(w.T))
            flat = x if len(shape) == 2 else self.b.reshape(x, (-1, shape[-1]))
            out = self.b.dense(flat, self.value(wname), name=n.name)
            return out if len(shape) == 2 else self.b.reshape(out, (*shape[:-1], w.shape[1]))
        y = self.value(n.inputs[1])
        if len(shape) == 2 and len(self.b.shape(y)) == 2:
            a3, b3 = self.b.reshape(x, (1, *shape)), self.b.reshape(y, (1, *self.b.shape(y)))
            out = self.b.batch_matmul(a3, b3, name=n.name)
            return self.b.reshape(out, self.b.shape(out)[1:])
        return self.b.batch_matmul(x, y, name=n.name)

    def _shape_of(self, name: str) -> tuple[int, ...]:
        return tuple(self.consts[name].shape) if name in self.consts else self.b.shape(self.value(name))

    def _expanded(self, name: str, shape: tuple[int, ...]) -> str:
        """The value ``name`` at ``shape``: a constant repeated now, a computed value by a kernel."""
        if name in self.consts and self.consts[name].shape != shape:
            return self.b.constant(np.broadcast_to(self.consts[name], shape))
        value = self.value(name)
        return value if self.b.shape(value) == shape else self.b.broadcast(value, shape)

    def _vector(self, x: str, c: np.ndarray) -> tuple[np.ndarray, int] | None:
        """The constant ``c`` as a vector along one axis of ``x`` (a scalar: along the channels,
        axis 1 of a 4-D tensor, else the last), or None if it is not one."""
        shape = self.b.shape(x)
        try:
            if np.broadcast_shapes(shape, c.shape) != shape:
                return None
        except ValueError:
            return None
        if c.size == 1:
            axis = 1 if len(shape) == 4 else len(shape) - 1
            return np.full(shape[axis], c.reshape(()), np.float64), axis
        wide = [i for i, d in enumerate(c.shape) if d != 1]
        return (c.reshape(-1).astype(np.float64), len(shape) - c.ndim + wide[0]) if len(wide) == 1 else None

    def _binary(self, n: OnnxNode) -> str:
        x_name, y_name = n.inputs
        if n.op in ("Add", "Mul") and x_name in self.consts and y_name not in self.consts:
            x_name, y_name = y_name, x_name
        if y_name in self.consts and x_name not in self.consts:
            x = self.value(x_name)
            found = self._vector(x, self.consts[y_name])
            if found is not None:
                vector, axis = found
                if n.op in ("Add", "Sub"):
                    bias = self.b.constant(vector if n.op == "Add" else -vector)
                    return self.b.bias_add(x, bias, axis=axis, name=n.name)
                factor = self.b.constant(vector if n.op == "Mul" else 1.0 / vector)
                return self.b.scale(x, factor, axis=axis, name=n.name)
        try:
            shape = tuple(np.broadcast_shapes(self._shape_of(x_name), self._shape_of(y_name)))
        except ValueError:
            shapes = f"{self._shape_of(x_name)} and {self._shape_of(y_name)}"
            raise GraphError(f"shapes {shapes} do not broadcast") from None
        a, b = self._expanded(x_name, shape), self._expanded(y_name, shape)
        method = {"Add": self.b.add, "Sub": self.b.sub, "Mul": self.b.mul, "Div": self.b.div}[n.op]
        return method(a, b, name=n.name)

    def _batch_norm(self, n: OnnxNode) -> str:
        if n.attrs.get("training_mode", 0):
            raise GraphError("only BatchNormalization in inference mode is supported")
        gamma, beta, mean, var = (self._const(n, i, "parameter").astype(np.float64) for i in range(1, 5))
        factor = gamma / np.sqrt(var + float(n.attrs.get("epsilon", 1e-5)))
        scaled = self.b.scale(self.value(n.inputs[0]), self.b.constant(factor), axis=1)
        return self.b.bias_add(scaled, self.b.constant(beta - mean * factor), axis=1, name=n.name)

    def _layer_norm(self, n: OnnxNode) -> str:
        x = self.value(n.inputs[0])
        shape = self.b.shape(x)
        axis = int(n.attrs.get("axis", -1))
        if not -len(shape) <= axis < len(shape):
            raise GraphError(f"axis {axis} is out of range for an input of {len(shape)} axes")
        if any(n.outputs[1:]):
            raise GraphError("only the first output (Y) of LayerNormalization is supported")
        normalized = shape[axis % len(shape) :]  # scale and bias broadcast to these axes
        gamma = self._const(n, 1, "scale")
        beta = self._const(n, 2, "bias") if len(n.inputs) > 2 and n.inputs[2] else np.zeros_like(gamma)
        try:
            gamma, beta = (np.broadcast_to(v, normalized).reshape(-1) for v in (gamma, beta))
        except ValueError:
            shapes = f"scale {gamma.shape} and bias {beta.shape}"
            raise GraphError(f"{shapes} do not broadcast to the normalized axes {normalized}") from None
        eps = float(n.attrs.get("epsilon", 1e-5))
        scale, shift = self.b.constant(gamma), self.b.constant(beta)
        return self.b.layer_norm(x, scale, shift, eps, axis=axis, name=n.name)

    def _transpose(self, n: OnnxNode) -> str:
        x = self.value(n.inputs[0])
        rank = len(self.b.shape(x))
        perm = [int(p) for p in n.attrs.get("perm", range(rank - 1, -1, -1))]
        return x if perm == list(range(rank)) else self.b.transpose(x, perm, name=n.name)

    def _pad(self, n: OnnxNode) -> str:
        widths, value, mode = pad_widths(n, self.consts)
        x = self.value(n.inputs[0])
        return self.b.pad(x, widths, value, mode=mode, name=n.name) if any(widths) else x

    def _gelu(self, n: OnnxNode) -> str:
        if n.attrs.get("approximate", "none") not in ("none", b"none"):
            raise GraphError("only the exact (erf) Gelu is supported")
        return self.b.gelu(self.value(n.inputs[0]), name=n.name)

    def _softmax(self, n: OnnxNode) -> str:
        x = self.value(n.inputs[0])
        return self.b.softmax(x, int(n.attrs.get("axis", -1)), name=n.name)

    def _pool(self, n: OnnxNode) -> str:
        a = n.attrs
        kernel, strides = list(a["kernel_shape"]), list(a.get("strides", [1, 1]))
        pads = list(a.get("pads", [0, 0, 0, 0]))
        if len(set(kernel)) > 1 or len(set(strides)) > 1 or len(set(pads)) > 1 or a.get("ceil_mode", 0):
            raise GraphError(f"only square windows, equal strides and pads are supported, got {a}")
        if n.op == "AveragePool" and pads[0] and not a.get("count_include_pad", 0):
            raise GraphError("AveragePool with padding needs count_include_pad=1")
        pool = self.b.max_pool2d if n.op == "MaxPool" else self.b.avg_pool2d
        return pool(self.value(n.inputs[0]), int(kernel[0]), int(strides[0]), int(pads[0]), name=n.name)

    def _reshape(self, n: OnnxNode) -> str:
        x = self.value(n.inputs[0])
        target = [int(d) for d in self._const(n, 1, "shape")]
        shape = self.b.shape(x)
        new = [shape[i] if d == 0 and not n.attrs.get("allowzero", 0) else d for i, d in enumerate(target)]
        return self.b.reshape(x, new, name=n.name)

    def _flatten(self, n: OnnxNode) -> str:
        x = self.value(n.inputs[0])
        return self.b.flatten(x, int(n.attrs.get("axis", 1)) % len(self.b.shape(x)), name=n.name)

    def _concat(self, n: OnnxNode) -> str:
        return self.b.concat([self.value(v) for v in n.inputs], int(n.attrs["axis"]), name=n.name)
