"""``asc.from_onnx(path_or_model)``: an ONNX model (opset >= 13) as a :class:`~.ir.Graph`.

Supported operators: Conv (groups, symmetric pads, equal strides), BatchNormalization right after
a Conv (folded into its weights and bias), Gemm, MatMul, Add, Relu, Sigmoid, Gelu (opset 20, or
the ``x * 0.5 * (1 + erf(x / sqrt(2)))`` subgraph exporters write for older opsets), Softmax (last
axis), MaxPool, AveragePool, GlobalAveragePool, Reshape, Flatten, Concat, Identity, Dropout and
Constant. Anything else is one :class:`~.ir.GraphError` naming the operator and its node.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .ir import Graph, GraphBuilder, GraphError

MIN_OPSET = 13


@dataclass(slots=True)
class _OnnxNode:
    op: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)


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


def from_onnx(model: Any, shapes: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """The graph of an ONNX model (a path or an ``onnx.ModelProto``); ``shapes`` gives values to
    dynamic input dimensions, by input name. Raises :class:`~.ir.GraphError` with one clear line."""
    proto = _load(model)
    from onnx import helper, numpy_helper  # optional dependency; _load said what to install

    where = str(model) if isinstance(model, (str, os.PathLike)) else (proto.graph.name or "model")
    _opset(proto, where)
    consts = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    nodes = [
        _OnnxNode(n.op_type, n.name or f"{n.op_type}#{i}", list(n.input), list(n.output),
                  {a.name: helper.get_attribute_value(a) for a in n.attribute})
        for i, n in enumerate(proto.graph.node)
    ]
    for n in nodes:
        if n.op == "Constant":
            if "value" not in n.attrs:
                raise GraphError(f"Constant node {n.name!r}: only the 'value' attribute is supported")
            consts[n.outputs[0]] = numpy_helper.to_array(n.attrs["value"])
    nodes = _fold_batch_norm(_find_gelu([n for n in nodes if n.op != "Constant"], consts), consts)
    b = GraphBuilder(proto.graph.name or "model")
    values: dict[str, str] = {}
    for inp in proto.graph.input:
        if inp.name not in consts:
            values[inp.name] = b.input(inp.name, _input_shape(inp, shapes or {}))
    importer = _Importer(b, values, consts)
    for n in nodes:
        importer.convert(n)
    b.output(*(importer.value(o.name) for o in proto.graph.output))
    return b.build()


def _scalar(consts: dict[str, np.ndarray], name: str, value: float) -> bool:
    return name in consts and consts[name].size == 1 and abs(float(consts[name].reshape(())) - value) < 1e-4


def _find_gelu(nodes: list[_OnnxNode], consts: dict[str, np.ndarray]) -> list[_OnnxNode]:
    """Nodes with each erf-form GELU subgraph (Div by sqrt 2 or Mul by 1/sqrt 2, Erf, Add 1, and
    the two products by x and 0.5 in either order) replaced by one Gelu node."""
    readers: dict[str, list[_OnnxNode]] = {}
    producer = {o: n for n in nodes for o in n.outputs}
    for n in nodes:
        for v in n.inputs:
            readers.setdefault(v, []).append(n)

    def only(value: str, op: str) -> _OnnxNode | None:
        users = readers.get(value, [])
        return users[0] if len(users) == 1 and users[0].op == op else None

    def other(n: _OnnxNode, value: str) -> str:
        return n.inputs[1] if n.inputs[0] == value else n.inputs[0]

    dropped: set[int] = set()
    for erf in [n for n in nodes if n.op == "Erf"]:
        scale = producer.get(erf.inputs[0])
        if scale is None or scale.op not in ("Div", "Mul"):
            continue
        x = scale.inputs[0]
        factor = (math.sqrt(2.0) if scale.op == "Div" else 1 / math.sqrt(2.0))
        plus = only(erf.outputs[0], "Add")
        if not _scalar(consts, scale.inputs[1], factor) or plus is None:
            continue
        mul1 = only(plus.outputs[0], "Mul")
        if not _scalar(consts, other(plus, erf.outputs[0]), 1.0) or mul1 is None:
            continue
        mul2 = only(mul1.outputs[0], "Mul")
        half_first = _scalar(consts, other(mul1, plus.outputs[0]), 0.5)
        if mul2 is None or not (half_first or other(mul1, plus.outputs[0]) == x):
            continue
        rest = other(mul2, mul1.outputs[0])
        if not (rest == x if half_first else _scalar(consts, rest, 0.5)):
            continue
        dropped |= {id(scale), id(erf), id(plus), id(mul1)}
        mul2.op, mul2.inputs, mul2.attrs = "Gelu", [x], {}
    return [n for n in nodes if id(n) not in dropped]


def _fold_batch_norm(nodes: list[_OnnxNode], consts: dict[str, np.ndarray]) -> list[_OnnxNode]:
    """Nodes with each BatchNormalization that follows a Conv (its only reader) folded into it."""
    producer = {o: n for n in nodes for o in n.outputs}
    readers: dict[str, int] = {}
    for n in nodes:
        for v in n.inputs:
            readers[v] = readers.get(v, 0) + 1
    kept = []
    for n in nodes:
        conv = producer.get(n.inputs[0]) if n.op == "BatchNormalization" and n.inputs else None
        if conv is None or conv.op != "Conv" or readers.get(n.inputs[0], 0) != 1:
            kept.append(n)
            continue
        if not all(v in consts for v in n.inputs[1:5]) or conv.inputs[1] not in consts:
            raise GraphError(
                f"BatchNormalization node {n.name!r}: its parameters and the Conv's weight must be constants"
            )
        gamma, beta, mean, var = (consts[v].astype(np.float64) for v in n.inputs[1:5])
        scale = gamma / np.sqrt(var + float(n.attrs.get("epsilon", 1e-5)))
        weight = consts[conv.inputs[1]].astype(np.float64)
        bias = consts[conv.inputs[2]].astype(np.float64) if len(conv.inputs) > 2 and conv.inputs[2] else 0.0
        wname, bname = f"{conv.name}.folded_weight", f"{conv.name}.folded_bias"
        consts[wname] = (weight * scale[:, None, None, None]).astype(np.float32)
        consts[bname] = ((bias - mean) * scale + beta).astype(np.float32)
        conv.inputs = [conv.inputs[0], wname, bname]
        conv.outputs = [n.outputs[0]]
    return kept


class _Importer:
    """Converts ONNX nodes one by one into builder calls."""

    def __init__(self, b: GraphBuilder, values: dict[str, str], consts: dict[str, np.ndarray]) -> None:
        self.b, self.values, self.consts = b, values, consts
        self.ops: dict[str, Callable[[_OnnxNode], str]] = {
            "Conv": self._conv, "Gemm": self._gemm, "MatMul": self._matmul, "Add": self._add,
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
            self.values[name] = self.b.constant(self.consts[name], name)
        return self.values[name]

    def convert(self, n: _OnnxNode) -> None:
        """Add node ``n`` to the graph."""
        convert = self.ops.get(n.op)
        if convert is None:
            raise GraphError(f"unsupported ONNX operator {n.op!r} (node {n.name!r})")
        try:
            self.values[n.outputs[0]] = convert(n)
        except GraphError as e:
            raise GraphError(f"{n.op} node {n.name!r}: {e}") from None

    def _const(self, n: _OnnxNode, i: int, what: str) -> np.ndarray:
        if i >= len(n.inputs) or n.inputs[i] not in self.consts:
            raise GraphError(f"the {what} must be a constant")
        return self.consts[n.inputs[i]]

    def _conv(self, n: _OnnxNode) -> str:
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

    def _gemm(self, n: _OnnxNode) -> str:
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

    def _matmul(self, n: _OnnxNode) -> str:
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

    def _add(self, n: _OnnxNode) -> str:
        x_name, y_name = n.inputs
        if x_name in self.consts and y_name not in self.consts:
            x_name, y_name = y_name, x_name
        x = self.value(x_name)
        shape = self.b.shape(x)
        if y_name in self.consts:
            c = self.consts[y_name]
            squeezed = [i for i, d in enumerate(c.shape) if d != 1]
            axis = len(shape) - c.ndim + squeezed[0] if len(squeezed) == 1 else len(shape) - 1
            if c.size == shape[axis] and c.ndim <= len(shape):
                bias = self.b.constant(c.reshape(-1), f"{y_name}.bias")
                return self.b.bias_add(x, bias, axis=axis, name=n.name)
            if c.shape != shape:
                raise GraphError(f"a constant of shape {c.shape} broadcast to {shape} is not supported")
        return self.b.add(x, self.value(y_name), name=n.name)

    def _gelu(self, n: _OnnxNode) -> str:
        if n.attrs.get("approximate", "none") not in ("none", b"none"):
            raise GraphError("only the exact (erf) Gelu is supported")
        return self.b.gelu(self.value(n.inputs[0]), name=n.name)

    def _softmax(self, n: _OnnxNode) -> str:
        x = self.value(n.inputs[0])
        rank = len(self.b.shape(x))
        if int(n.attrs.get("axis", -1)) % rank != rank - 1:
            raise GraphError("only Softmax over the last axis is supported")
        return self.b.softmax(x, name=n.name)

    def _pool(self, n: _OnnxNode) -> str:
        a = n.attrs
        kernel, strides = list(a["kernel_shape"]), list(a.get("strides", [1, 1]))
        pads = list(a.get("pads", [0, 0, 0, 0]))
        if len(set(kernel)) > 1 or len(set(strides)) > 1 or len(set(pads)) > 1 or a.get("ceil_mode", 0):
            raise GraphError(f"only square windows, equal strides and pads are supported, got {a}")
        if n.op == "AveragePool" and pads[0] and not a.get("count_include_pad", 0):
            raise GraphError("AveragePool with padding needs count_include_pad=1")
        pool = self.b.max_pool2d if n.op == "MaxPool" else self.b.avg_pool2d
        return pool(self.value(n.inputs[0]), int(kernel[0]), int(strides[0]), int(pads[0]), name=n.name)

    def _reshape(self, n: _OnnxNode) -> str:
        x = self.value(n.inputs[0])
        target = [int(d) for d in self._const(n, 1, "shape")]
        shape = self.b.shape(x)
        new = [shape[i] if d == 0 and not n.attrs.get("allowzero", 0) else d for i, d in enumerate(target)]
        return self.b.reshape(x, new, name=n.name)

    def _flatten(self, n: _OnnxNode) -> str:
        x = self.value(n.inputs[0])
        return self.b.flatten(x, int(n.attrs.get("axis", 1)) % len(self.b.shape(x)), name=n.name)

    def _concat(self, n: _OnnxNode) -> str:
        return self.b.concat([self.value(v) for v in n.inputs], int(n.attrs["axis"]), name=n.name)
