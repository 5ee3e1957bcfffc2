"""Shapes are static once the inputs are known: every ONNX node that computes on constants only, and
every ``Shape``/``Size`` of a value whose shape is known, is computed at import.

:func:`fold` walks the nodes in order, with onnx's per-node shape inference giving the shape of each
value it keeps, so that a ``Shape -> Gather -> Unsqueeze -> Concat -> Reshape`` chain becomes one
constant shape. :func:`evaluate` computes one node: numpy for the operators shape arithmetic uses,
onnx's reference evaluator for any other.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .ir import GraphError
from .onnx_checks import check_size
from .onnx_rewrite import OnnxNode

#: operators whose result is not a function of their inputs: never computed at import
RANDOM = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                    "Bernoulli"})
#: operators with subgraphs (evaluated, if at all, by their converter)
CONTROL = frozenset({"If", "Loop", "Scan"})
#: operators that read only the shape of their (first) input
SHAPE_ONLY = frozenset({"Shape", "Size"})


def shape_result(n: OnnxNode, shape: Sequence[int]) -> np.ndarray:
    """The constant a ``Shape`` (with ``start``/``end``) or ``Size`` node gives for an input of ``shape``."""
    if n.op == "Size":
        return np.array(math.prod(shape), np.int64)
    rank = len(shape)
    start, end = int(n.attrs.get("start", 0)), int(n.attrs.get("end", rank))
    start, end = (min(max(v + rank if v < 0 else v, 0), rank) for v in (start, end))
    return np.array(shape[start:end], np.int64)


def slice_bounds(dim: int, start: int, end: int, step: int) -> tuple[int, int]:
    """ONNX Slice's start and end on an axis of extent ``dim``: negative values counted from the
    end, then clamped to [0, dim] (a positive step) or [-1, dim - 1] (a negative one)."""
    if step == 0:
        raise GraphError("a step of 0 is not allowed")
    start, end = (v + dim if v < 0 else v for v in (start, end))
    if step > 0:
        return min(max(start, 0), dim), min(max(end, 0), dim)
    return min(max(start, -1), dim - 1), min(max(end, -1), dim - 1)


def slice_args(n: OnnxNode, rank: int, arrays: Sequence[np.ndarray | None]) -> list[tuple[int, int, int]]:
    """(axis, start, end, step) are read from a Slice node's inputs 1-4 (``arrays``, None where
    absent): per axis of a ``rank``-axis input, its (start, end, step) before clamping."""
    starts, ends = (np.asarray(a).reshape(-1) for a in arrays[:2])
    axes = arrays[2] if len(arrays) > 2 and arrays[2] is not None else np.arange(len(starts))
    steps = arrays[3] if len(arrays) > 3 and arrays[3] is not None else np.ones(len(starts), np.int64)
    out = [(0, int(2**62), 1)] * rank
    seen = set()
    for axis, s, e, st in zip(np.asarray(axes).reshape(-1), starts, ends, np.asarray(steps).reshape(-1),
                              strict=True):
        a = int(axis) + rank if axis < 0 else int(axis)
        if not 0 <= a < rank or a in seen:
            raise GraphError(f"axis {int(axis)} is out of range or repeated for an input of {rank} axes")
        seen.add(a)
        out[a] = (int(s), int(e), int(st))
    return out


def _slice(n: OnnxNode, x: np.ndarray, *rest: np.ndarray | None) -> np.ndarray:
    index = []
    for dim, (s, e, st) in zip(x.shape, slice_args(n, x.ndim, rest), strict=True):
        start, end = slice_bounds(dim, s, e, st)
        index.append(slice(start, None if end < 0 else end, st))
    return x[tuple(index)]


def axes_of(n: OnnxNode, arrays: Sequence[np.ndarray | None], index: int = 1) -> list[int] | None:
    """A node's ``axes``: its input ``index`` (opset >= 13 forms) or its attribute; None if neither."""
    if len(arrays) > index and arrays[index] is not None:
        return [int(a) for a in np.asarray(arrays[index]).reshape(-1)]
    return [int(a) for a in n.attrs["axes"]] if "axes" in n.attrs else None


def _unsqueeze(n: OnnxNode, x: np.ndarray, *rest: np.ndarray | None) -> np.ndarray:
    axes = axes_of(n, (x, *rest)) or []
    rank = x.ndim + len(axes)
    return x.reshape(unsqueezed(x.shape, sorted(a + rank if a < 0 else a for a in axes)))


def unsqueezed(shape: Sequence[int], axes: Sequence[int]) -> tuple[int, ...]:
    """``shape`` with a 1 inserted at each of ``axes`` (normalized, sorted, of the output's rank)."""
    out = list(shape)
    for a in axes:
        out.insert(a, 1)
    return tuple(out)


def squeezed(shape: Sequence[int], axes: Sequence[int] | None) -> tuple[int, ...]:
    """``shape`` without ``axes`` (each of extent 1; None: every axis of extent 1)."""
    rank = len(shape)
    if axes is None:
        return tuple(d for d in shape if d != 1)
    drop = {a + rank if a < 0 else a for a in axes}
    bad = [a for a in drop if not 0 <= a < rank or shape[a] != 1]
    if bad:
        raise GraphError(f"axis {bad[0]} of shape {tuple(shape)} cannot be squeezed (not of extent 1)")
    return tuple(d for i, d in enumerate(shape) if i not in drop)


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer):
        q, r = np.floor_divide(a, b), np.remainder(a, b)
        return (q + ((r != 0) & ((a < 0) ^ (b < 0)))).astype(a.dtype)
    return np.divide(a, b).astype(a.dtype)


def _expand(n: OnnxNode, x: np.ndarray, shape: np.ndarray) -> np.ndarray:
    target = np.broadcast_shapes(x.shape, tuple(int(d) for d in shape))
    check_size(f"{n.op} node {n.name!r}", target, x.dtype.itemsize)
    return np.array(np.broadcast_to(x, target))


def _constant_of_shape(n: OnnxNode, shape: np.ndarray) -> np.ndarray:
    from onnx import numpy_helper  # optional dependency; from_onnx said what to install

    given = "value" in n.attrs
    fill = numpy_helper.to_array(n.attrs["value"]).reshape(-1) if given else np.zeros(1, np.float32)
    dims = tuple(int(d) for d in shape)
    check_size(f"{n.op} node {n.name!r}", dims, fill.dtype.itemsize)
    return np.full(dims, fill[0], fill.dtype)


def _reshape(n: OnnxNode, x: np.ndarray, shape: np.ndarray) -> np.ndarray:
    keep = not n.attrs.get("allowzero", 0)
    dims = [x.shape[i] if d == 0 and keep else int(d) for i, d in enumerate(shape)]
    return x.reshape(dims)


def _gather_elements(n: OnnxNode, x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    axis = int(n.attrs.get("axis", 0)) % max(x.ndim, 1)
    return np.take_along_axis(x, np.where(indices < 0, indices + x.shape[axis], indices), axis=axis)


def _cast(n: OnnxNode, x: np.ndarray) -> np.ndarray:
    from onnx import helper  # optional dependency; from_onnx said what to install

    return x.astype(helper.tensor_dtype_to_np_dtype(int(n.attrs["to"])))


#: numpy for the operators of shape arithmetic (the others go to onnx's reference evaluator)
def _dequantize(n: OnnxNode, x: np.ndarray, scale: np.ndarray, zero: np.ndarray | None = None) -> np.ndarray:
    """DequantizeLinear of constants (quantized weights): per tensor or along ``axis``."""
    if "block_size" in n.attrs:
        raise GraphError("DequantizeLinear by blocks (block_size) is not supported")
    axis = int(n.attrs.get("axis", 1)) % max(1, x.ndim)

    def along(v: np.ndarray) -> np.ndarray:
        return v if v.size == 1 else v.reshape([-1 if i == axis else 1 for i in range(x.ndim)])

    shifted = x.astype(np.int64) - (along(zero).astype(np.int64) if zero is not None else 0)
    return (shifted * along(scale).astype(np.float64)).astype(scale.dtype)


NUMPY: dict[str, Callable[..., np.ndarray]] = {
    "DequantizeLinear": _dequantize,
    "Identity": lambda n, x: x,
    "Cast": _cast,
    "Gather": lambda n, x, i: np.take(x, i, axis=int(n.attrs.get("axis", 0))),
    "GatherElements": _gather_elements,  # onnx's reference evaluator fails on some shapes
    "Unsqueeze": _unsqueeze,
    "Squeeze": lambda n, x, *rest: x.reshape(squeezed(x.shape, axes_of(n, (x, *rest)))),
    "Concat": lambda n, *xs: np.concatenate(xs, axis=int(n.attrs["axis"])),
    "Slice": _slice,
    "Add": lambda n, a, b: np.add(a, b).astype(np.result_type(a, b)),
    "Sub": lambda n, a, b: np.subtract(a, b).astype(np.result_type(a, b)),
    "Mul": lambda n, a, b: np.multiply(a, b).astype(np.result_type(a, b)),
    "Div": lambda n, a, b: _int_div(a, b),
    "Mod": lambda n, a, b: (np.fmod if n.attrs.get("fmod", 0) else np.mod)(a, b),
    "Equal": lambda n, a, b: np.equal(a, b),
    "Where": lambda n, c, a, b: np.asarray(np.where(c, a, b)),
    "Expand": _expand,
    "ConstantOfShape": _constant_of_shape,
    "Range": lambda n, s, e, d: np.arange(s, e, d, dtype=np.asarray(s).dtype),
    "Reshape": _reshape,
    "Transpose": lambda n, x: np.transpose(x, n.attrs.get("perm")),
}


def _reference(n: OnnxNode, arrays: Sequence[np.ndarray | None], opset: int) -> list[np.ndarray]:
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    names = [f"in{i}" if a is not None else "" for i, a in enumerate(arrays)]
    node = helper.make_node(n.op, names, [f"out{i}" for i in range(len(n.outputs))], **n.attrs)
    inputs = [helper.make_tensor_value_info(v, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
              for v, a in zip(names, arrays, strict=True) if a is not None]
    outputs = [helper.make_empty_tensor_value_info(o) for o in node.output]
    model = helper.make_model(helper.make_graph([node], "fold", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", opset)])
    feeds = {v: a for v, a in zip(names, arrays, strict=True) if a is not None}
    return [np.asarray(r) for r in ReferenceEvaluator(model).run(None, feeds)]


def evaluate(n: OnnxNode, arrays: Sequence[np.ndarray | None], opset: int) -> list[np.ndarray]:
    """The outputs of node ``n`` on the constant inputs ``arrays`` (None for an absent optional one);
    GraphError with the node named when it cannot be computed."""
    try:
        fast = NUMPY.get(n.op)
        if fast is not None and (n.op != "Slice" or len(arrays) > 1):
            return [np.asarray(fast(n, *arrays))]
        return _reference(n, arrays, opset)
    except GraphError as e:
        raise GraphError(f"{n.op} node {n.name!r}: {e}") from None
    except Exception as e:  # numpy's and the reference evaluator's errors: the node cannot run
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise GraphError(f"{n.op} node {n.name!r}: cannot be computed at import ({first})") from None


def constant_value(n: OnnxNode) -> np.ndarray:
    """The value of a ``Constant`` node (any of its value attributes)."""
    from onnx import numpy_helper  # optional dependency; from_onnx said what to install

    a = n.attrs
    if "value" in a:
        return numpy_helper.to_array(a["value"])
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                       ("value_ints", np.int64)):
        if key in a:
            return np.array(a[key], dtype)
    got = ", ".join(a) or "none"
    raise GraphError(f"Constant node {n.name!r}: attribute {got} is not supported (value, value_float(s), "
                     "value_int(s) are)")


def foldable(n: OnnxNode, consts: Mapping[str, np.ndarray]) -> bool:
    """Whether node ``n`` computes on constants only (and gives the same result every time)."""
    ins = [v for v in n.inputs if v]
    return n.op not in RANDOM | CONTROL and bool(ins) and all(v in consts for v in ins)


def _shape(t: Any) -> tuple[int, ...] | None:
    """The static shape of an onnx TypeProto, or None."""
    if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    dims = t.tensor_type.shape.dim
    return tuple(int(d.dim_value) for d in dims) if all(d.HasField("dim_value") for d in dims) else None


def _infer(n: OnnxNode, consts: Mapping[str, np.ndarray], types: dict[str, Any], opset: int) -> None:
    """Record in ``types`` the types onnx's shape inference gives ``n``'s outputs (nothing where it
    cannot: that value's Shape is then computed from the builder's shapes during conversion)."""
    from onnx import defs, helper, numpy_helper, shape_inference

    if n.proto is None:
        return
    try:
        schema = defs.get_schema(n.op, opset, n.proto.domain)
    except Exception:  # SchemaError: a custom operator; conversion says whether it is supported
        return
    input_types, data = {}, {}
    for v in n.inputs:
        if v in consts:
            array = consts[v]
            elem = helper.np_dtype_to_tensor_dtype(array.dtype)
            input_types[v] = helper.make_tensor_type_proto(elem, array.shape)
            if array.size <= 64:
                data[v] = numpy_helper.from_array(array, v)
        elif v in types:
            input_types[v] = types[v]
        elif v:
            return
    try:
        out = shape_inference.infer_node_outputs(schema, n.proto, input_types, data,
                                                 opset_imports=[helper.make_opsetid("", opset)])
    except Exception:  # an inconsistent node: its converter says what is wrong with it
        return
    types.update(out)


def fold(
    nodes: Iterable[OnnxNode], consts: dict[str, np.ndarray], types: dict[str, Any], opset: int
) -> list[OnnxNode]:
    """The nodes still to convert: each Constant, each node on constants only and each Shape/Size of
    a value of known shape is computed now (its outputs added to ``consts``); ``types`` (value ->
    onnx TypeProto, the inputs' given) gains the inferred type of every value kept."""
    kept = []
    for n in nodes:
        if n.op == "Constant":
            consts[n.outputs[0]] = constant_value(n)
        elif n.op in SHAPE_ONLY and n.inputs and n.inputs[0] not in consts and n.inputs[0] in types \
                and _shape(types[n.inputs[0]]) is not None:
            consts[n.outputs[0]] = shape_result(n, _shape(types[n.inputs[0]]) or ())
        elif foldable(n, consts):
            results = evaluate(n, [consts[v] if v else None for v in n.inputs], opset)
            consts.update((o, r) for o, r in zip(n.outputs, results, strict=False) if o)
        else:
            kept.append(n)
            _infer(n, consts, types, opset)
    return kept


def prune(nodes: list[OnnxNode], outputs: Iterable[str]) -> list[OnnxNode]:
    """``nodes`` without those whose outputs nothing reads (e.g. read only by a folded Shape)."""
    needed = set(outputs)
    kept = []
    for n in reversed(nodes):
        if any(o in needed for o in n.outputs if o):
            kept.append(n)
            needed.update(v for v in n.inputs if v)
    return kept[::-1]
