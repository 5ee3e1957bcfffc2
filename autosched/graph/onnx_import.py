"""``asc.from_onnx(path_or_model)``: an ONNX model (opset >= 13) as a :class:`~.ir.Graph`.

Shapes are static once the input shapes are known: every node on constants only and every
``Shape`` is computed at import (:mod:`.onnx_fold`); patterns become one operator
(:mod:`.onnx_rewrite`: erf GELU, batch-norm folded into convolutions, zero pads into them); then
each node goes to its converter in the operator table (:mod:`.onnx_table`; the converters live in
the ``onnx_*`` modules imported below). An operator or attribute autosched does not run is one
:class:`~.ir.GraphError` naming the node, the operator and the attribute.

A network computes in one type, float32 or float64 (its inputs' type); an int64/int32 input is
allowed where it is read only as Gather indices (token ids). An input, output or weight of another
type is one GraphError naming it, its node and its type.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from . import (  # noqa: F401 (converters)
    onnx_conv,
    onnx_einsum,
    onnx_elementwise,
    onnx_index,
    onnx_matmul,
    onnx_norm,
    onnx_quant,
    onnx_rnn,
    onnx_shape,
)
from .ir import Graph, GraphBuilder, GraphError
from .onnx_checks import check_size, check_structure, load_initializers
from .onnx_context import FLOATS, INDEX_VIEWS, Importer
from .onnx_fold import fold, prune
from .onnx_rewrite import OnnxNode, find_gelu, fold_batch_norm, fold_pad

MIN_OPSET = 13
#: the input types read only as Gather indices
INDEX_TYPES = ("int64", "int32")


def _load(model: Any) -> Any:
    try:
        import onnx
    except ImportError:
        raise ImportError("from_onnx needs the onnx package: pip install onnx") from None
    if isinstance(model, onnx.ModelProto):
        return _inlined(model)
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
    return _inlined(proto)


def _inlined(proto: Any) -> Any:
    """``proto`` with its model-local functions (exporters write some) inlined into the graph."""
    if not proto.functions:
        return proto
    from onnx import inliner

    return inliner.inline_local_functions(proto)


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
        if d.HasField("dim_value") and d.dim_value < 0:
            raise GraphError(f"input {value.name!r} has a negative dimension {d.dim_value} (dimension {i}); "
                             f"sizes are positive: fix the model or pass shapes={{{value.name!r}: (...)}}")
        if not d.HasField("dim_value") or d.dim_value == 0:
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


#: operators computing on integers (indices) that a graph's integer input may reach a Gather through
INDEX_ARITHMETIC = frozenset({"Equal", "Not", "Cast", "CumSum", "Add", "Sub", "Mul"})


def _not_an_index(value: str, nodes: Sequence[OnnxNode], is_int: Callable[[str], bool]) -> OnnxNode | None:
    """The first node reading ``value`` (or a view of it, or integers computed from it) otherwise
    than as the indices of a Gather (or GatherElements), or None. ``is_int(v)``: whether ONNX value
    ``v`` is of an integer or boolean type."""
    readers = [(n, i) for n in nodes for i, v in enumerate(n.inputs) if v == value]
    for n, i in readers:
        if n.op in ("Gather", "GatherElements") and i == 1:
            continue
        integers = n.op in INDEX_ARITHMETIC and all(is_int(v) for v in n.inputs if v)
        if n.op in INDEX_VIEWS and i == 0 or integers:
            if n.op == "Cast" and not is_int(n.outputs[0]):
                continue  # whole numbers in the float type: ordinary data from here on
            below = _not_an_index(n.outputs[0], nodes, is_int)
            if below is not None:
                return below
        else:
            return n
    return None


def _is_int(consts: Mapping[str, np.ndarray], types: Mapping[str, Any], value: str) -> bool:
    """Whether ONNX value ``value`` (a constant, or typed in ``types``) is of an integer or boolean type."""
    if value in consts:
        return consts[value].dtype.kind in "iub"
    t = types.get(value)
    elem = t.tensor_type.elem_type if t is not None and t.HasField("tensor_type") else 0
    return bool(elem) and _type_name(elem) in (*INDEX_TYPES, "int8", "int16", "uint8", "bool")


def _graph_dtype(proto: Any, consts: Mapping[str, np.ndarray], nodes: Sequence[OnnxNode],
                 types: Mapping[str, Any]) -> str:
    """The type the graph computes in (its float inputs' and outputs'); GraphError naming the input
    or output, its node and its type where one is of another type or of one networks do not run
    (an int64/int32 input read only as Gather indices is allowed)."""
    from onnx import TensorProto  # optional dependency; _load said what to install

    reader = {v: n for n in reversed(nodes) for v in n.inputs}
    writer = {v: n.name for n in nodes for v in n.outputs}
    values = [("input", v) for v in proto.graph.input if v.name not in consts]
    dtype = None
    for kind, value in values + [("output", v) for v in proto.graph.output]:
        elem = value.type.tensor_type.elem_type
        if elem == TensorProto.UNDEFINED:
            continue
        name = _type_name(elem)
        if kind == "input" and name in INDEX_TYPES:
            first = _not_an_index(value.name, nodes, functools.partial(_is_int, consts, types))
            if first is None:
                continue
            raise GraphError(f"input {value.name!r} of node {first.name!r} is {name}: {FLOATS} (an integer "
                             "input may only end as Gather indices: viewed, or through integer arithmetic)")
        if elem not in (TensorProto.FLOAT, TensorProto.DOUBLE) or name != (dtype or name):
            nodes_of = {v: n.name for v, n in reader.items()} if kind == "input" else writer
            node = f" of node {nodes_of[value.name]!r}" if value.name in nodes_of else ""
            raise GraphError(f"{kind} {value.name!r}{node} is {name}: {FLOATS}")
        dtype = name
    return dtype or "float32"


def _nodes(proto: Any) -> list[OnnxNode]:
    from onnx import helper  # optional dependency; _load said what to install

    return [
        OnnxNode(n.op_type, n.name or f"{n.op_type}#{i}", list(n.input), list(n.output),
                 {a.name: helper.get_attribute_value(a) for a in n.attribute}, n)
        for i, n in enumerate(proto.graph.node)
    ]


def _inputs(proto: Any, consts: Mapping[str, np.ndarray], shapes: Mapping[str, Sequence[int]]
            ) -> dict[str, tuple[tuple[int, ...], int]]:
    """Each graph input (not an initializer): its static shape and ONNX element type, checked to fit
    in memory."""
    from onnx import helper  # optional dependency; _load said what to install

    inputs = {v.name: v for v in proto.graph.input if v.name not in consts}
    unknown = sorted(set(shapes) - set(inputs))
    if unknown:
        raise GraphError(f"shapes names {unknown[0]!r}, which is not an input of the model "
                         f"(inputs: {', '.join(inputs)})")
    out = {}
    for name, v in inputs.items():
        shape, elem = _input_shape(v, shapes), v.type.tensor_type.elem_type
        try:
            itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(elem)).itemsize
        except (KeyError, TypeError, ValueError):
            itemsize = 4
        check_size(f"input {name!r}", shape, itemsize)
        out[name] = (shape, elem)
    return out


def from_onnx(model: Any, shapes: Mapping[str, Sequence[int]] | None = None) -> Graph:
    """The graph of an ONNX model (a path or an ``onnx.ModelProto``); ``shapes`` gives values to
    dynamic input dimensions, by input name. Raises :class:`~.ir.GraphError` with one clear line."""
    proto = _load(model)
    from onnx import TypeProto, helper  # optional dependency; _load said what to install

    where = str(model) if isinstance(model, (str, os.PathLike)) else (proto.graph.name or "model")
    opset = _opset(proto, where)
    check_structure(proto.graph)
    consts = load_initializers(proto.graph)
    inputs = _inputs(proto, consts, shapes or {})
    types = {name: helper.make_tensor_type_proto(elem, shape) if elem else TypeProto()
             for name, (shape, elem) in inputs.items()}
    outputs = [o.name for o in proto.graph.output]
    nodes = prune(fold(_nodes(proto), consts, types, opset), outputs)
    dtype = _graph_dtype(proto, consts, nodes, types)
    nodes = fold_batch_norm(find_gelu(nodes, consts), consts, frozenset(outputs))
    nodes = fold_pad(nodes, consts, set(outputs))
    b = GraphBuilder(proto.graph.name or "model", dtype)
    values = {}
    for name, (shape, elem) in inputs.items():
        kind = _type_name(elem) if elem else dtype
        values[name] = b.input(name, shape, kind if kind in INDEX_TYPES else None)
    elems = {name: _type_name(t.tensor_type.elem_type) for name, t in types.items()
             if t.HasField("tensor_type") and t.tensor_type.elem_type}
    importer = Importer(b, values, consts, elems, opset)
    importer.needed = {v for n in nodes for v in n.inputs} | set(outputs)
    for n in nodes:
        importer.convert(n)
    b.output(*(importer.value(o) for o in outputs))
    return b.build()  # (the builder refused any value this machine's memory cannot hold)
