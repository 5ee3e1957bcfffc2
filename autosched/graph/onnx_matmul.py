"""ONNX converters of MatMul (any rank, numpy broadcasting) and Gemm (transposes, alpha, beta)."""

from __future__ import annotations

import math

import numpy as np

from .ir import GraphError, Shape
from .onnx_context import Importer
from .onnx_elementwise import broadcast_shape
from .onnx_rewrite import OnnxNode
from .onnx_table import Result, converter


def dense_const(cx: Importer, x: str, w: np.ndarray, wname: str, name: str | None) -> str:
    """x (..., K) @ w (K, N), a constant (kept as ``wname``, transposed): one dense over the rows
    of x, then x's leading axes back."""
    shape = cx.b.shape(x)
    k, n = w.shape
    cx.consts.setdefault(wname, np.ascontiguousarray(w.T))
    rows = x if len(shape) == 2 else cx.b.reshape(x, (-1, k))
    out = cx.b.dense(rows, cx.value(wname), name=name if len(shape) == 2 else None)
    return out if len(shape) == 2 else cx.b.reshape(out, (*shape[:-1], n), name=name)


def _batched(cx: Importer, name: str, shape: Shape) -> str:
    """ONNX value ``name`` broadcast to ``shape`` (batch axes, then a matrix) and viewed as 3-D."""
    return cx.b.reshape(cx.expanded(name, shape), (-1, *shape[-2:]))


def matmul(cx: Importer, a: str, b: str, name: str | None) -> str:
    """``a @ b`` with numpy's rules (1-D operands, broadcast batch axes) on the builder's dense
    (a constant right matrix) or batch_matmul."""
    cx.check_float(a, b)
    sa, sb = cx.shape(a), cx.shape(b)
    if not sa or not sb:
        raise GraphError(f"MatMul needs operands of 1 or more axes, got {sa} and {sb}")
    a2 = (1, *sa) if len(sa) == 1 else sa
    b2 = (*sb, 1) if len(sb) == 1 else sb
    (m, k), (k2, n) = a2[-2:], b2[-2:]
    if k != k2:
        raise GraphError(f"shapes {sa} and {sb} do not multiply ({k} != {k2})")
    try:
        batch = tuple(np.broadcast_shapes(a2[:-2], b2[:-2]))
    except ValueError:
        raise GraphError(f"the batch axes of {sa} and {sb} do not broadcast") from None
    out = (*batch, *(() if len(sa) == 1 else (m,)), *(() if len(sb) == 1 else (n,)))
    if cx.is_const(b) and math.prod(b2[:-2]) == 1 and not cx.is_const(a):
        x = cx.value(a) if len(sa) > 1 else cx.b.reshape(cx.value(a), (1, k))
        if len(batch) > len(a2) - 2:  # b's (unit) batch axes add leading axes
            x = cx.b.reshape(x, (*batch, m, k))
        y = dense_const(cx, x, cx.consts[b].reshape(k, n), f"{name}.weight_t", None)
        return cx.b.reshape(y, out, name=name)
    if math.prod(b2[:-2]) == 1 and math.prod(batch) > 1 and len(sb) >= 2:
        # one right matrix for every batch: the batch axes join the rows of a single product
        x = cx.b.reshape(cx.expanded(a, (*batch, m, k)), (1, -1, k))
        y = cx.b.batch_matmul(x, cx.b.reshape(cx.value(b), (1, k, n)))
        return cx.b.reshape(y, out, name=name)
    x = _batched(cx, a, (*batch, m, k)) if len(sa) > 1 else cx.b.reshape(
        cx.expanded(a, (*batch, k)) if batch else cx.value(a), (-1, 1, k))
    y = _batched(cx, b, (*batch, k, n)) if len(sb) > 1 else cx.b.reshape(
        cx.expanded(b, (*batch, k)) if batch else cx.value(b), (-1, k, 1))
    return cx.b.reshape(cx.b.batch_matmul(x, y), out, name=name)


def _row(c: np.ndarray, n: int) -> np.ndarray | None:
    """Gemm's C as a vector of the n output columns (a scalar, (n,), (1, n)...), or None."""
    if c.ndim > 2 or (c.ndim == 2 and c.shape[0] != 1) or c.size not in (1, n):
        return None
    return np.broadcast_to(c.reshape(-1), (n,)).astype(np.float64)


@converter("MatMul",
           doc="any rank, numpy broadcasting (4-D attention); a constant right matrix becomes a dense layer")
def _matmul(cx: Importer, n: OnnxNode) -> list[Result]:
    return [matmul(cx, n.inputs[0], n.inputs[1], n.name)]


@converter("Gemm", attrs=("alpha", "beta", "transA", "transB"),
           doc="transA, transB, alpha, beta; C broadcast (a vector becomes the dense layer's bias)")
def _gemm(cx: Importer, n: OnnxNode) -> list[Result]:
    alpha, beta = float(n.attrs.get("alpha", 1.0)), float(n.attrs.get("beta", 1.0))
    a, b = n.inputs[:2]
    x = cx.b.transpose(cx.value(a), (1, 0)) if n.attrs.get("transA", 0) else cx.value(a)
    m, k = cx.b.shape(x)
    c = n.inputs[2] if cx.has(n, 2) and beta != 0.0 else None
    cx.check_float(*n.inputs)
    if cx.is_const(b):
        w = cx.consts[b] if n.attrs.get("transB", 0) else cx.consts[b].T
        wname = b if n.attrs.get("transB", 0) and alpha == 1.0 else f"{n.name}.weight"
        cx.consts.setdefault(wname, np.ascontiguousarray(w * alpha if alpha != 1.0 else w))
        nn = cx.consts[wname].shape[0]
        bias = None
        if c is not None and cx.is_const(c):
            row = _row(cx.consts[c], nn)
            if row is not None:
                bias, c = cx.constant(row * beta), None
        y = cx.b.dense(x, cx.value(wname), bias, name=None if c else n.name)
    else:
        other = cx.value(b)
        right = cx.b.transpose(other, (1, 0)) if n.attrs.get("transB", 0) else other
        nn = cx.b.shape(right)[1]
        product = cx.b.batch_matmul(cx.b.reshape(x, (1, m, k)), cx.b.reshape(right, (1, k, nn)))
        y = cx.b.reshape(product, (m, nn))
        if alpha != 1.0:
            y = cx.b.scale(y, cx.constant(np.full(nn, alpha)), axis=1)
    if c is None:
        return [y]
    if cx.is_const(c):
        return [cx.b.add(y, cx.constant(np.broadcast_to(cx.consts[c] * beta, (m, nn))), name=n.name)]
    shape = broadcast_shape(cx, (c,))
    term = cx.expanded(c, (m, nn)) if shape != (m, nn) else cx.value(c)
    if beta != 1.0:
        term = cx.b.scale(term, cx.constant(np.full(nn, beta)), axis=1)
    return [cx.b.add(y, term, name=n.name)]
