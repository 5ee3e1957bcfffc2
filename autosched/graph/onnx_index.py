"""ONNX converters of arithmetic on integer values computed from an integer input: RoBERTa's
position ids, ``cumsum(ids != pad) * (ids != pad) + pad``, then a Gather.

The graph computes in one float type, so such values are whole numbers in it (an integer input
converted once by ``index_to_float``; exact below 2^24 in float32, far above any table's rows), and
a Gather reads them rounded. Equal and Not give 1 or 0; Cast between integer types (and to the
float type) keeps the value; CumSum of any float value is a product by a triangular matrix of ones
(exact on whole numbers); Add, Sub and Mul of integers go through the ordinary converters.
"""

from __future__ import annotations

import numpy as np

from .ir import GraphError
from .onnx_context import Importer
from .onnx_matmul import dense_const
from .onnx_rewrite import OnnxNode
from .onnx_table import Result, converter


@converter("Equal", doc="of a computed value and a scalar constant: 1 or 0 (masks of token ids); "
           "of constants: computed at import")
def _equal(cx: Importer, n: OnnxNode) -> list[Result]:
    a, b = n.inputs
    computed, other = (a, b) if cx.is_const(b) else (b, a)
    if cx.is_const(computed) or not cx.is_const(other) or cx.consts[other].size != 1:
        raise GraphError("needs one computed operand and one scalar constant")
    value = cx.index_value(computed) if cx.is_index(computed) else cx.value(computed)
    return [cx.b.unary(value, "equal", alpha=float(cx.consts[other].reshape(())), name=n.name)]


@converter("Not", doc="of a computed mask: 1 where it is 0")
def _not(cx: Importer, n: OnnxNode) -> list[Result]:
    return [cx.b.unary(cx.index_value(n.inputs[0]), "logical_not", name=n.name)]


@converter("CumSum", attrs=("exclusive", "reverse"),
           doc="a constant axis, exclusive and reverse; a product by a triangular matrix of ones")
def _cumsum(cx: Importer, n: OnnxNode) -> list[Result]:
    x = cx.index_value(n.inputs[0]) if cx.is_index(n.inputs[0]) else cx.value(n.inputs[0])
    shape = cx.b.shape(x)
    axis = int(cx.const(n, 1, "axis").reshape(()))
    if not -len(shape) <= axis < len(shape):
        raise GraphError(f"axis {axis} is out of range for an input of {len(shape)} axes")
    axis %= len(shape)
    length = shape[axis]
    k, j = np.indices((length, length))  # out[j] = sum of x[k] over the k this mask keeps
    exclusive, reverse = bool(n.attrs.get("exclusive", 0)), bool(n.attrs.get("reverse", 0))
    keep = (k > j if exclusive else k >= j) if reverse else (k < j if exclusive else k <= j)
    order = [a for a in range(len(shape)) if a != axis] + [axis]
    last = x if axis == len(shape) - 1 else cx.b.transpose(x, order)
    summed = dense_const(cx, last, keep.astype(cx.b.dtype), f"{n.name}.ones.{len(cx.consts)}", None)
    if axis == len(shape) - 1:
        return [summed]
    return [cx.b.transpose(summed, list(np.argsort(order)), name=n.name)]


@converter("GatherElements", attrs=("axis",),
           doc="of a constant whose elements are all equal (RoBERTa's token type ids): that constant")
def _gather_elements(cx: Importer, n: OnnxNode) -> list[Result]:
    data = cx.const(n, 0, "data")
    if data.size == 0 or not (data == data.reshape(-1)[0]).all():
        raise GraphError("the data must be a constant whose elements are all equal")
    return [np.full(cx.shape(n.inputs[1]), data.reshape(-1)[0], data.dtype)]
