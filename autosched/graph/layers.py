"""The workloads of the network operators that are not a fused chain: data movement (transpose,
broadcast, constant padding) and row-wise normalizations (layer norm, softmax on any axis).

Shapes and permutations are JSON scalars, written as text: ``transpose('2x3x4', '0,2,1')``. Data
movement is a kernel like any other task, so ``build_network`` and the exported C library run it
the same way. Every reference is plain numpy, written apart from the te DAG.
"""

from __future__ import annotations

import math

import numpy as np

from .. import expr as te
from ..expr import Expr, Tensor
from ..ops.common import accumulator, check_positive
from ..ops.registry import workload


def dims(text: str) -> tuple[int, ...]:
    """The shape written as ``'2x3x4'``; raise ``ValueError`` for anything but positive ints."""
    try:
        shape = tuple(int(d) for d in text.split("x"))
    except ValueError:
        raise ValueError(f"shape {text!r} must be positive ints joined by 'x', like '2x3x4'") from None
    if not shape or min(shape) < 1:
        raise ValueError(f"shape {text!r} must be positive ints joined by 'x', like '2x3x4'")
    return shape


def shape_text(shape: tuple[int, ...]) -> str:
    """``(2, 3, 4)`` as ``'2x3x4'``."""
    return "x".join(str(d) for d in shape)


def int_list(text: str, what: str) -> tuple[int, ...]:
    """The ints written as ``'0,2,1'`` (``''``: none); ``ValueError`` naming ``what`` otherwise."""
    try:
        return tuple(int(v) for v in text.split(",")) if text else ()
    except ValueError:
        raise ValueError(f"{what} {text!r} must be ints joined by ',', like '0,2,1'") from None


def _perm(shape: str, perm: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    src, order = dims(shape), int_list(perm, "transpose: permutation")
    if sorted(order) != list(range(len(src))):
        raise ValueError(f"transpose: {perm!r} is not a permutation of the {len(src)} axes of {shape!r}")
    return src, order


def _transpose_ref(data: np.ndarray, *, perm: str) -> np.ndarray:
    return np.transpose(data, int_list(perm, "permutation")).copy()


def _no_flops(*_: object) -> int:
    return 0


@workload("transpose", reference=_transpose_ref, flops=_no_flops)
def transpose(shape: str, perm: str, dtype: str = "float32") -> list[Tensor]:
    """out = data(shape) with its axes permuted: out axis i is data axis perm[i] (numpy's rule)."""
    src, order = _perm(shape, perm)
    data = te.placeholder(src, dtype, name="data")
    where = [order.index(a) for a in range(len(src))]

    def body(*ix: Expr) -> Expr:
        return data[tuple(ix[w] for w in where)]

    return [data, te.compute(tuple(src[a] for a in order), body, name="transpose")]


def _broadcast_ref(data: np.ndarray, *, out_shape: str) -> np.ndarray:
    return np.broadcast_to(data, dims(out_shape)).copy()


@workload("broadcast_to", reference=_broadcast_ref, flops=_no_flops)
def broadcast_to(shape: str, out_shape: str, dtype: str = "float32") -> list[Tensor]:
    """out(out_shape) = data(shape) repeated along its size-1 axes (same rank)."""
    src, dst = dims(shape), dims(out_shape)
    if len(src) != len(dst) or any(s not in (1, d) for s, d in zip(src, dst, strict=True)):
        raise ValueError(f"broadcast_to: shape {shape!r} does not broadcast to {out_shape!r}")
    data = te.placeholder(src, dtype, name="data")

    def body(*ix: Expr) -> Expr:
        return data[tuple(0 if s == 1 else i for s, i in zip(src, ix, strict=True))]

    return [data, te.compute(dst, body, name="broadcast")]


#: the padding modes of :func:`pad` (numpy's and ONNX's names)
PAD_MODES = ("constant", "reflect", "edge")


def pad_edges(shape: str, pads: str, mode: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(the shape, the begins, the ends) of a :func:`pad`; ``ValueError`` for what it cannot do."""
    src, widths = dims(shape), int_list(pads, "pad: pads")
    if len(widths) != 2 * len(src) or min(widths) < 0:
        raise ValueError(f"pad: pads {pads!r} must be {2 * len(src)} non-negative ints (begins, then ends)")
    begin, end = widths[: len(src)], widths[len(src) :]
    if mode not in PAD_MODES:
        raise ValueError(f"pad: mode {mode!r} is not one of {', '.join(PAD_MODES)}")
    if mode == "reflect" and any(max(b, e) >= d for b, e, d in zip(begin, end, src, strict=True) if b or e):
        raise ValueError(f"pad: reflect pads {pads!r} must be smaller than the padded axes of {shape!r}")
    return src, begin, end


def _pad_ref(data: np.ndarray, *, pads: str, value: float, mode: str) -> np.ndarray:
    rank = data.ndim
    widths = int_list(pads, "pads")
    edges = list(zip(widths[:rank], widths[rank:], strict=True))
    if mode == "edge":
        return np.pad(data, edges, mode="edge")
    if mode == "reflect":
        return np.pad(data, edges, mode="reflect")
    return np.pad(data, edges, constant_values=value)


def _source_index(i: Expr, begin: int, size: int, mode: str) -> Expr:
    """The input index output index ``i`` reads along an axis padded by ``begin`` in front:
    clamped into the axis (``edge``) or mirrored at its ends without repeating them (``reflect``)."""
    moved = i - begin
    last = te.const(size - 1, "int32")
    if mode == "edge":
        return te.min(te.max(moved, te.const(0, "int32")), last)
    inside = te.max(moved, -moved)  # |moved|: mirrored at the front
    return last - te.max(last - inside, inside - last)  # and at the back: last - |last - inside|


@workload("pad", reference=_pad_ref, flops=_no_flops)
def pad(
    shape: str, pads: str, value: float = 0.0, mode: str = "constant", dtype: str = "float32"
) -> list[Tensor]:
    """out = data(shape) with ``pads`` (ONNX order: every axis's begin, then every axis's end)
    elements around it: ``value`` (mode ``constant``), the nearest element (``edge``), or the
    elements mirrored at the edge, which is not repeated (``reflect``; pads smaller than the axis)."""
    src, begin, end = pad_edges(shape, pads, mode)
    data = te.placeholder(src, dtype, name="data")
    fill = te.const(value, dtype)

    def body(*ix: Expr) -> Expr:
        edges = list(zip(ix, begin, src, end, strict=True))
        if mode != "constant":
            return data[tuple(_source_index(i, b, s, mode) if b or e else i for i, b, s, e in edges)]
        bounds = [c for i, b, s, e in edges if b or e for c in (i >= b, i < b + s)]
        moved = data[tuple(i - b if b else i for i, b in zip(ix, begin, strict=True))]
        return te.if_then_else(te.all(*bounds), moved, fill) if bounds else moved

    out = tuple(s + b + e for s, b, e in zip(src, begin, end, strict=True))
    return [data, te.compute(out, body, name="pad")]


def _layer_norm_ref(data: np.ndarray, gamma: np.ndarray, beta: np.ndarray, *, eps: float) -> np.ndarray:
    x: np.ndarray = data.astype(accumulator(data.dtype.name))
    centered = x - x.mean(axis=1, keepdims=True)
    return centered / np.sqrt((centered**2).mean(axis=1, keepdims=True) + eps) * gamma + beta


def _layer_norm_flops(rows: int, cols: int, *_: object) -> int:
    return 8 * rows * cols


@workload("layer_norm", reference=_layer_norm_ref, flops=_layer_norm_flops)
def layer_norm(rows: int, cols: int, eps: float = 1e-5, dtype: str = "float32") -> list[Tensor]:
    """out(rows, cols) = (data - mean) / sqrt(var + eps) * gamma(cols) + beta(cols), the mean and
    (biased) variance taken over each row; stages row_sum, square_sum, layer_norm."""
    check_positive("layer_norm", rows=rows, cols=cols)
    data = te.placeholder((rows, cols), dtype, name="data")
    gamma = te.placeholder((cols,), dtype, name="gamma")
    beta = te.placeholder((cols,), dtype, name="beta")
    k1, k2 = te.reduce_axis(cols, "k"), te.reduce_axis(cols, "k")
    inv = te.const(1.0 / cols, dtype)
    total = te.compute((rows,), lambda i: te.sum(data[i, k1], axis=k1), name="row_sum")

    def centered(i: Expr, j: Expr) -> Expr:
        return data[i, j] - total[i] * inv

    squares = te.compute(
        (rows,), lambda i: te.sum(centered(i, k2.var) * centered(i, k2.var), axis=k2), name="square_sum"
    )
    out = te.compute(
        (rows, cols),
        lambda i, j: centered(i, j) / te.sqrt(squares[i] * inv + te.const(eps, dtype)) * gamma[j] + beta[j],
        name="layer_norm",
    )
    return [data, gamma, beta, out]


def _softmax_axis_ref(data: np.ndarray) -> np.ndarray:
    x = data.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _softmax_axis_flops(outer: int, n: int, inner: int, *_: object) -> int:
    return 5 * outer * n * inner


@workload("softmax_axis", reference=_softmax_axis_ref, flops=_softmax_axis_flops)
def softmax_axis(outer: int, n: int, inner: int, dtype: str = "float32") -> list[Tensor]:
    """Softmax of data(outer, n, inner) over its middle axis (a softmax on any axis of a tensor,
    viewed in 3-D); stages maxelem, expval, expsum, softmax."""
    check_positive("softmax_axis", outer=outer, n=n, inner=inner)
    data = te.placeholder((outer, n, inner), dtype, name="data")
    k1, k2 = te.reduce_axis(n, "k"), te.reduce_axis(n, "k")
    top = te.compute((outer, inner), lambda o, i: te.max(data[o, k1, i], axis=k1), name="maxelem")
    expval = te.compute((outer, n, inner), lambda o, j, i: te.exp(data[o, j, i] - top[o, i]), name="expval")
    total = te.compute((outer, inner), lambda o, i: te.sum(expval[o, k2, i], axis=k2), name="expsum")
    out = te.compute((outer, n, inner), lambda o, j, i: expval[o, j, i] / total[o, i], name="softmax")
    return [data, out]


def view3(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    """(outer, shape[axis], inner): a tensor seen in 3-D around ``axis``."""
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])
