"""ONNX converters of the operators that move data without arithmetic (Reshape, Flatten, Transpose,
Concat, Squeeze/Unsqueeze, Expand, Tile, Slice, Split, Gather) and of those that only compute
shapes (Shape, Size, and operators computed at import on constants only)."""

from __future__ import annotations

import math

import numpy as np

from .ir import GraphError
from .onnx_context import Importer, unsupported
from .onnx_fold import axes_of, constant_value, shape_result, slice_args, slice_bounds, squeezed, unsqueezed
from .onnx_rewrite import OnnxNode
from .onnx_table import Result, converter


@converter("Reshape", attrs=("allowzero",), doc="a constant (or folded) shape; 0 and -1 entries")
def _reshape(cx: Importer, n: OnnxNode) -> list[Result]:
    x = cx.value(n.inputs[0])
    target = [int(d) for d in cx.const(n, 1, "shape").reshape(-1)]
    shape = cx.b.shape(x)
    keep = not n.attrs.get("allowzero", 0)
    new = [shape[i] if d == 0 and keep else d for i, d in enumerate(target)]
    return [cx.b.reshape(x, new, name=n.name)]


@converter("Flatten", attrs=("axis",), doc="any axis (negative too)")
def _flatten(cx: Importer, n: OnnxNode) -> list[Result]:
    x = cx.value(n.inputs[0])
    rank = len(cx.b.shape(x))
    axis = int(n.attrs.get("axis", 1))
    if not -rank <= axis <= rank:
        raise GraphError(f"axis {axis} is out of range for an input of {rank} axes")
    return [cx.b.flatten(x, axis + rank if axis < 0 else axis, name=n.name)]


@converter("Transpose", attrs=("perm",), doc="any rank and permutation")
def _transpose(cx: Importer, n: OnnxNode) -> list[Result]:
    x = cx.value(n.inputs[0])
    rank = len(cx.b.shape(x))
    perm = cx.ints(n, "perm", range(rank - 1, -1, -1))
    return [x if perm == list(range(rank)) else cx.b.transpose(x, perm, name=n.name)]


@converter("DepthToSpace", "SpaceToDepth", attrs=("blocksize", "mode"),
           doc="4-D, modes DCR and CRD: a reshape, a transpose and a reshape")
def _depth_space(cx: Importer, n: OnnxNode) -> list[Result]:
    x = cx.value(n.inputs[0])
    shape = cx.b.shape(x)
    b, mode = int(n.attrs["blocksize"]), cx.text(n, "mode", "DCR")
    if len(shape) != 4 or b < 1:
        raise GraphError(f"needs a 4-D input and a blocksize >= 1, got {shape} and {b}")
    if mode not in ("DCR", "CRD") or (n.op == "SpaceToDepth" and "mode" in n.attrs):
        raise unsupported("mode", mode, "DepthToSpace takes DCR or CRD, SpaceToDepth none")
    (batch, c, h, w) = shape
    if n.op == "SpaceToDepth":
        if h % b or w % b:
            raise GraphError(f"blocksize {b} does not divide the spatial axes of {shape}")
        blocks = cx.b.reshape(x, (batch, c, h // b, b, w // b, b))
        moved = cx.b.transpose(blocks, (0, 3, 5, 1, 2, 4))
        return [cx.b.reshape(moved, (batch, c * b * b, h // b, w // b), name=n.name)]
    if c % (b * b):
        raise GraphError(f"blocksize {b}: {b * b} does not divide the {c} channels")
    if mode == "DCR":
        blocks, perm = cx.b.reshape(x, (batch, b, b, c // (b * b), h, w)), (0, 3, 4, 1, 5, 2)
    else:
        blocks, perm = cx.b.reshape(x, (batch, c // (b * b), b, b, h, w)), (0, 1, 4, 2, 5, 3)
    return [cx.b.reshape(cx.b.transpose(blocks, perm), (batch, c // (b * b), h * b, w * b), name=n.name)]


@converter("Concat", attrs=("axis",), doc="any axis; constant inputs too")
def _concat(cx: Importer, n: OnnxNode) -> list[Result]:
    parts = [cx.value(v) for v in n.inputs if v and math.prod(cx.shape(v)) > 0]
    return [cx.b.concat(parts, int(n.attrs["axis"]), name=n.name) if len(parts) > 1 else parts[0]]


def _axes(cx: Importer, n: OnnxNode) -> list[int] | None:
    given = cx.optional_const(n, 1, "axes")
    return axes_of(n, [None, given])


@converter("Squeeze", "Unsqueeze", attrs=("axes",), doc="axes as input (opset >= 13) or attribute")
def _squeeze(cx: Importer, n: OnnxNode) -> list[Result]:
    x = cx.value(n.inputs[0])
    shape, axes = cx.b.shape(x), _axes(cx, n)
    if n.op == "Squeeze":
        new = squeezed(shape, axes)
    else:
        if not axes:
            raise GraphError("Unsqueeze needs axes")
        rank = len(shape) + len(axes)
        new = unsqueezed(shape, sorted(a + rank if a < 0 else a for a in axes))
    return [cx.b.reshape(x, new, name=n.name)]


@converter("Expand", doc="a constant (or folded) shape, numpy broadcasting")
def _expand(cx: Importer, n: OnnxNode) -> list[Result]:
    target = tuple(int(d) for d in cx.const(n, 1, "shape").reshape(-1))
    try:
        shape = tuple(np.broadcast_shapes(cx.shape(n.inputs[0]), target))
    except ValueError:
        raise GraphError(f"shape {cx.shape(n.inputs[0])} does not broadcast to {target}") from None
    return [cx.expanded(n.inputs[0], shape)]


@converter("Tile", doc="constant repeats (copies joined)")
def _tile(cx: Importer, n: OnnxNode) -> list[Result]:
    out = cx.value(n.inputs[0])
    repeats = [int(r) for r in cx.const(n, 1, "repeats").reshape(-1)]
    if len(repeats) != len(cx.b.shape(out)) or min(repeats, default=1) < 1:
        raise GraphError(f"repeats {repeats} must be one positive int per axis of {cx.b.shape(out)}")
    for axis, r in enumerate(repeats):
        if r > 1:
            out = cx.b.concat([out] * r, axis)
    return [out]


def reverse(cx: Importer, x: str, axis: int) -> str:
    """``x`` reversed along ``axis``: a product with the exchange matrix along that axis (exact)."""
    shape = cx.b.shape(x)
    rank, d = len(shape), shape[axis]
    perm = [i for i in range(rank) if i != axis] + [axis]
    moved = x if axis == rank - 1 else cx.b.transpose(x, perm)
    moved_shape = cx.b.shape(moved)
    rows = cx.b.reshape(moved, (-1, d))
    flipped = cx.b.reshape(cx.b.dense(rows, cx.constant(np.eye(d)[::-1])), moved_shape)
    return flipped if axis == rank - 1 else cx.b.transpose(flipped, list(np.argsort(perm)))


@converter("Slice", doc="constant starts, ends, axes, steps: negative and clamped bounds, negative steps "
           "(a slice, then a reversal)")
def _slice(cx: Importer, n: OnnxNode) -> list[Result]:
    x = cx.value(n.inputs[0])
    shape = cx.b.shape(x)
    given = [cx.const(n, 1, "starts"), cx.const(n, 2, "ends"), cx.optional_const(n, 3, "axes"),
             cx.optional_const(n, 4, "steps")]
    starts, ends, steps, flips = [], [], [], []
    for axis, (dim, (s, e, st)) in enumerate(zip(shape, slice_args(n, len(shape), given), strict=True)):
        first, stop = slice_bounds(dim, s, e, st)
        count = max(0, -(-(stop - first) // st))
        if count == 0:
            raise GraphError(f"the slice of axis {axis} (size {dim}) is empty: start {s}, end {e}, step {st}")
        last = first + (count - 1) * st
        lo, hi = (first, last) if st > 0 else (last, first)
        starts.append(lo)
        ends.append(hi + 1)
        steps.append(abs(st))
        if st < 0 and count > 1:
            flips.append(axis)
    whole = starts == [0] * len(shape) and ends == list(shape) and steps == [1] * len(shape)
    out = x if whole else cx.b.slice(x, starts, ends, steps, name=None if flips else n.name)
    for axis in flips:
        out = reverse(cx, out, axis)
    return [out]


def take(cx: Importer, x: str, axis: int, start: int, stop: int, name: str | None = None) -> str:
    """``x[..., start:stop, ...]`` on ``axis`` (the whole of ``x`` when that is all of it)."""
    shape = cx.b.shape(x)
    if start == 0 and stop == shape[axis]:
        return x
    starts, ends = [0] * len(shape), list(shape)
    starts[axis], ends[axis] = start, stop
    return cx.b.slice(x, starts, ends, [1] * len(shape), name=name)


@converter("Split", attrs=("axis", "num_outputs", "split"),
           doc="sizes as a constant input or attribute, or equal parts (`num_outputs` or one per output)")
def _split(cx: Importer, n: OnnxNode) -> list[Result]:
    x = cx.value(n.inputs[0])
    shape = cx.b.shape(x)
    axis = int(n.attrs.get("axis", 0)) % len(shape)
    given = cx.optional_const(n, 1, "split")
    if given is not None or "split" in n.attrs:
        sizes = [int(v) for v in (given.reshape(-1) if given is not None else n.attrs["split"])]
    else:
        parts = int(n.attrs.get("num_outputs", len(n.outputs)))
        each = -(-shape[axis] // parts)
        sizes = [min(each, shape[axis] - i * each) for i in range(parts)]
    if sum(sizes) != shape[axis] or min(sizes) < 1:
        raise GraphError(f"sizes {sizes} do not split axis {axis} of {shape} into non-empty parts")
    bounds = np.cumsum([0, *sizes])
    return [take(cx, x, axis, int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _runs(indices: np.ndarray) -> list[tuple[int, int]]:
    """Consecutive runs of ``indices``, as (start, stop) pairs."""
    runs: list[tuple[int, int]] = []
    for i in (int(v) for v in indices):
        if runs and runs[-1][1] == i:
            runs[-1] = (runs[-1][0], i + 1)
        else:
            runs.append((i, i + 1))
    return runs


@converter("Gather", attrs=("axis",), doc="computed int indices (embeddings: a table at token ids; an "
           "integer table, quantized, as whole numbers), or constant indices on a computed value (slices)")
def _gather(cx: Importer, n: OnnxNode) -> list[Result]:
    data, index = n.inputs
    table = cx.index_value(data) if cx.is_const(data) and cx.is_index(data) else cx.value(data)
    shape = cx.shape(data)
    axis = int(n.attrs.get("axis", 0))
    if not -len(shape) <= axis < len(shape):
        raise GraphError(f"axis {axis} is out of range for data of {len(shape)} axes")
    axis %= len(shape)
    if index in cx.index_views:  # gather at the integer input itself, then view the result
        source, view = cx.index_views[index]
        got = cx.b.gather(table, cx.value(source), axis)
        return [cx.b.reshape(got, shape[:axis] + view + shape[axis + 1 :], name=n.name)]
    if not cx.is_const(index):
        return [cx.b.gather(table, cx.value(index), axis, name=n.name)]
    indices = cx.consts[index].astype(np.int64)
    if indices.size and (indices.min() < -shape[axis] or indices.max() >= shape[axis]):
        listed = indices.reshape(-1).tolist()
        raise GraphError(f"indices {listed} are out of range for axis {axis} of {shape}")
    indices = np.where(indices < 0, indices + shape[axis], indices)
    pieces = [take(cx, table, axis, a, b) for a, b in _runs(indices.reshape(-1))]
    joined = pieces[0] if len(pieces) == 1 else cx.b.concat(pieces, axis)
    out = shape[:axis] + indices.shape + shape[axis + 1 :]
    return [joined if cx.b.shape(joined) == out else cx.b.reshape(joined, out, name=n.name)]


@converter("Shape", "Size", attrs=("end", "start"), doc="computed at import from the known shapes")
def _shape(cx: Importer, n: OnnxNode) -> list[Result]:
    return [shape_result(n, cx.shape(n.inputs[0]))]


#: operators computed at import, only on constant inputs (shape arithmetic, masks), and the
#: attributes they take
FOLD_ONLY = {
    "Constant": ("value", "value_float", "value_floats", "value_int", "value_ints"),
    "ConstantOfShape": ("value",), "Range": (), "Less": (), "Greater": (), "LessOrEqual": (),
    "GreaterOrEqual": (), "And": (), "Or": (), "Xor": (), "Mod": ("fmod",), "Floor": (),
    "Ceil": (), "Sign": (), "NonZero": (),
    "ReduceProd": ("axes", "keepdims", "noop_with_empty_axes"),
    "ArgMax": ("axis", "keepdims", "select_last_index"), "ArgMin": ("axis", "keepdims", "select_last_index"),
    "Trilu": ("upper",), "OneHot": ("axis",), "EyeLike": ("dtype", "k"),
}


def _fold_only(cx: Importer, n: OnnxNode) -> list[Result]:
    if n.op == "Constant":
        return [constant_value(n)]
    computed = next(v for v in n.inputs if v and not cx.is_const(v))
    raise GraphError(f"input {computed!r} is computed from the graph's inputs: {n.op} is computed at import, "
                     "on constants only")


for _op, _attrs in FOLD_ONLY.items():
    _doc = "its value" if _op == "Constant" else "computed at import (its inputs must be constants)"
    converter(_op, attrs=_attrs, doc=_doc)(_fold_only)
