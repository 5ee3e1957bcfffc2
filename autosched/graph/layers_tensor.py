"""The workloads of reductions, slices and gathers, and the default schedule of a data-movement
stage (parallel outer loops, the innermost vectorized).

``reduce('64x49', '1', 'mean')`` is a global average pool: a shape as text, the reduced axes,
the kind; a network gives it the shape with adjacent axes of one kind merged and axes of size 1
dropped (:func:`canonical_reduce`), so that equal reductions are one task. ``gather`` reads its
indices as int64 (negative ones count from the end, as ONNX's; out-of-range ones are clamped to
the axis so that no kernel reads outside its data). Every reference is plain numpy, written apart
from the te DAG.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import expr as te
from ..expr import Expr, Tensor, as_int
from ..ops.common import accumulator, check_positive
from ..ops.registry import workload
from ..ops.schedules import SCHEDULES
from ..schedule import Schedule, create_schedule
from ..target import Target
from .layers import dims, int_list

REDUCERS = ("sum", "mean", "max", "min")
#: each reduction's te combiner and numpy reference function
_TE: dict[str, Callable[..., Expr]] = {"sum": te.sum, "mean": te.sum, "max": te.max, "min": te.min}
_NUMPY: dict[str, Callable[..., Any]] = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}


def vectorize_rows(s: Schedule, out: Tensor, target: Target | str = "c") -> None:
    """``out``'s loops: every axis but the last fused and parallel (when the target has threads),
    the last split by the vector width and vectorized (a 1-D stage: its vector blocks parallel)."""
    tgt = Target.parse(target)
    *lead, last = s[out].op.axis
    outer = s[out].fuse(*lead) if len(lead) > 1 else lead[0] if lead else None
    xo, xi = s[out].split(last, tgt.vector_lanes(out.dtype))
    s[out].vectorize(xi)
    if (tgt.num_threads or 1) > 1:
        s[out].parallel(outer if outer is not None else xo)


def rows_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """The default schedule of a one-stage data-movement workload (slice, gather): :func:`vectorize_rows`."""
    s = create_schedule(tensors[-1])
    vectorize_rows(s, tensors[-1], target)
    return s


def canonical_reduce(
    shape: tuple[int, ...], axes: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(shape, reduced axes) of the same reduction with adjacent axes of one kind merged and axes
    of size 1 dropped (one reduced axis of size 1 kept where nothing else is reduced)."""
    groups: list[tuple[int, bool]] = []
    for i, d in enumerate(shape):
        reduced = i in axes
        if d == 1:
            continue
        if groups and groups[-1][1] == reduced:
            groups[-1] = (groups[-1][0] * d, reduced)
        else:
            groups.append((d, reduced))
    if not any(r for _, r in groups):
        groups.append((1, True))
    return tuple(d for d, _ in groups), tuple(i for i, (_, r) in enumerate(groups) if r)


def _reduce_geometry(shape: str, axes: str, kind: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    src, picked = dims(shape), int_list(axes, "reduce: axes")
    if kind not in REDUCERS:
        raise ValueError(f"reduce: kind {kind!r} is not one of {', '.join(REDUCERS)}")
    if not picked or sorted(set(picked)) != list(picked) or not all(0 <= a < len(src) for a in picked):
        raise ValueError(f"reduce: axes {axes!r} must be sorted distinct axes of {shape!r}, at least one")
    return src, picked


def _reduce_ref(data: np.ndarray, *, axes: str, kind: str) -> np.ndarray:
    return _NUMPY[kind](data.astype(accumulator(data.dtype.name)), axis=int_list(axes, "axes"), keepdims=True)


def _reduce_flops(shape: str, axes: str, kind: str, *_: object) -> int:
    src, picked = _reduce_geometry(shape, axes, kind)
    return math.prod(src) + (math.prod(src) // math.prod(src[a] for a in picked) if kind == "mean" else 0)


@workload("reduce", reference=_reduce_ref, flops=_reduce_flops)
def reduce(shape: str, axes: str, kind: str = "sum", dtype: str = "float32") -> list[Tensor]:
    """out = the sum, mean, max or min of data(shape) over ``axes`` (kept as axes of size 1);
    stages reduce (reduce_sum, then reduce, for the mean)."""
    src, picked = _reduce_geometry(shape, axes, kind)
    data = te.placeholder(src, dtype, name="data")
    rs = [te.reduce_axis(src[a], f"r{a}") for a in picked]
    out_shape = tuple(1 if i in picked else d for i, d in enumerate(src))
    where = {a: r for a, r in zip(picked, rs, strict=True)}
    combine = _TE[kind]

    def body(*ix: Expr) -> Expr:
        return combine(data[tuple(where[i].var if i in where else v for i, v in enumerate(ix))], axis=rs)

    if kind != "mean":
        return [data, te.compute(out_shape, body, name="reduce")]
    total = te.compute(out_shape, body, name="reduce_sum")
    inv = te.const(1.0 / math.prod(src[a] for a in picked), dtype)
    return [data, te.compute(out_shape, lambda *ix: total[ix] * inv, name="reduce")]


def reduce_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """The default schedule of ``reduce``: where the last axis is kept, a vector of outputs
    accumulated in a local tile with the reduction loops outside it (parallel over the other kept
    axes, or over the vector blocks); where it is reduced, parallel rows, each reduced into one
    vector of partial results (rfactor) where it holds two vectors or more, then across its lanes."""
    tgt = Target.parse(target)
    out = tensors[-1]
    s = create_schedule(out)
    threads = (tgt.num_threads or 1) > 1
    red = s.stages["reduce_sum"].op.output(0) if "reduce_sum" in s.stages else out
    if as_int(out.shape[-1]) == 1:  # the last axis is reduced: rows
        rf = None
        if as_int(s[red].op.reduce_axis[-1].extent) >= 2 * tgt.vector_lanes(out.dtype):
            _, ki = s[red].split(s[red].op.reduce_axis[-1], tgt.vector_lanes(out.dtype))
            rf = s.rfactor(red, ki, factor_axis=len(red.shape))
            *data, lane = s[rf].op.axis
            s[rf].reorder(*data, *s[rf].op.reduce_axis, lane)
            s[rf].vectorize(lane)
        *lead, last = s[out].op.axis
        row = s[out].fuse(*lead) if len(lead) > 1 else lead[0] if lead else last
        if threads and any(as_int(d) > 1 for d in out.shape[:-1]):
            s[out].parallel(row)
        if red is not out:
            s[red].compute_at(s[out], last)
        if rf is not None:
            s[rf].compute_at(s[out], row)
        return s
    *lead, last = s[out].op.axis
    acc = red if red is not out else s.cache_write(out, "local")
    outer = s[out].fuse(*lead) if len(lead) > 1 else lead[0] if lead else None
    xo, xi = s[out].split(last, tgt.vector_lanes(out.dtype))
    s[out].vectorize(xi)
    if threads:
        s[out].parallel(outer if outer is not None and any(as_int(d) > 1 for d in out.shape[:-1]) else xo)
    s[acc].compute_at(s[out], xo)
    *alead, alast = s[acc].op.axis
    s[acc].reorder(*alead, *s[acc].op.reduce_axis, alast)
    s[acc].vectorize(alast)
    return s


def _slice_geometry(shape: str, starts: str, ends: str, steps: str) -> tuple[tuple[int, ...], ...]:
    src = dims(shape)
    b, e, st = (int_list(t, f"slice: {w}") for t, w in ((starts, "starts"), (ends, "ends"), (steps, "steps")))
    if not len(b) == len(e) == len(st) == len(src) or not all(
        0 <= bi < ei <= d and si >= 1 for bi, ei, si, d in zip(b, e, st, src, strict=True)
    ):
        raise ValueError(f"slice: starts {starts!r}, ends {ends!r}, steps {steps!r} must give each axis of "
                         f"{shape!r} 0 <= start < end <= size, step >= 1")
    return src, b, st, tuple((ei - bi + si - 1) // si for bi, ei, si in zip(b, e, st, strict=True))


def _slice_ref(data: np.ndarray, *, starts: str, ends: str, steps: str) -> np.ndarray:
    parts = zip(int_list(starts, "starts"), int_list(ends, "ends"), int_list(steps, "steps"), strict=True)
    return data[tuple(slice(b, e, s) for b, e, s in parts)].copy()


def _no_flops(*_: object) -> int:
    return 0


@workload("slice", reference=_slice_ref, flops=_no_flops)
def slice_(shape: str, starts: str, ends: str, steps: str, dtype: str = "float32") -> list[Tensor]:
    """out = data(shape)[starts:ends:steps] along every axis (0 <= start < end <= size, step >= 1)."""
    src, begin, step, out = _slice_geometry(shape, starts, ends, steps)
    data = te.placeholder(src, dtype, name="data")

    def at(i: Expr, b: int, s: int) -> Expr:
        moved = i if s == 1 else i * s
        return moved + b if b else moved

    def body(*ix: Expr) -> Expr:
        return data[tuple(at(i, b, s) for i, b, s in zip(ix, begin, step, strict=True))]

    return [data, te.compute(out, body, name="slice")]


def _gather_ref(data: np.ndarray, indices: np.ndarray) -> np.ndarray:
    n = data.shape[1]
    whole = np.floor(indices + 0.5).astype(np.int64) if indices.dtype.kind == "f" else indices
    picked = np.clip(np.where(whole < 0, whole + n, whole), 0, n - 1)
    return np.take(data, picked, axis=1)


@workload("gather", reference=_gather_ref, flops=_no_flops)
def gather(
    outer: int, n: int, inner: int, m: int, dtype: str = "float32", index_dtype: str = "int64"
) -> list[Tensor]:
    """out(outer, m, inner) = data(outer, n, inner)[:, indices(m), :]: indices int64 (an input), or
    whole numbers in the graph's float type (computed from one: position ids), rounded; negative
    ones counting from the end, out-of-range ones clamped to [0, n)."""
    check_positive("gather", outer=outer, n=n, inner=inner, m=m)
    if index_dtype not in ("int64", dtype):
        raise ValueError(f"gather: index_dtype must be int64 or {dtype}, got {index_dtype!r}")
    data = te.placeholder((outer, n, inner), dtype, name="data")
    indices = te.placeholder((m,), index_dtype, name="indices")

    def body(o: Expr, j: Expr, i: Expr) -> Expr:
        v = indices[j] if index_dtype == "int64" else te.floor(indices[j] + 0.5).astype("int64")
        wrapped = te.if_then_else(v < 0, v + n, v)
        return data[o, te.min(te.max(wrapped, te.const(0, "int64")), te.const(n - 1, "int64")), i]

    return [data, indices, te.compute((outer, m, inner), body, name="gather")]


def _to_float_ref(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64)


@workload("index_to_float", reference=_to_float_ref, flops=_no_flops)
def index_to_float(m: int, dtype: str = "float32") -> list[Tensor]:
    """An integer input's m values in the graph's float type, for arithmetic on them (exact below
    2^24 in float32)."""
    check_positive("index_to_float", m=m)
    x = te.placeholder((m,), "int64", name="x")
    return [x, te.compute((m,), lambda i: x[i].astype(dtype), name="as_float")]


SCHEDULES.update(reduce=reduce_cpu, slice=rows_cpu, gather=rows_cpu, index_to_float=rows_cpu)
