"""Pooling over 1 to 3 spatial axes (ONNX MaxPool / AveragePool with every attribute) and
instance normalization.

``pool('1x64x55x55', 'max', '3,3', '2,2', '0,0,0,0', '1,1', True, False)`` is SqueezeNet's
ceil-mode max pool. The data is padded (stage ``pad``: the lowest finite value for a max, zeros
for an average) as far as the last window reaches; an average divides by the number of the
window's elements inside the data (or inside the padded data with ``count_include_pad``),
counted in stage ``pool_count`` where windows differ, and 0 / 0 is 0 as onnxruntime has it.
Every reference is plain numpy, written apart from the te DAG.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .. import expr as te
from ..expr import Expr, Tensor
from ..ops.common import accumulator, check_positive, lowest
from ..ops.registry import workload
from ..ops.schedules import SCHEDULES
from ..schedule import Schedule, create_schedule
from ..target import Target
from .builder_nn import POOL_KINDS, window_out
from .layers import dims, int_list
from .layers_conv import pad_spatial
from .layers_tensor import vectorize_rows

Ints = tuple[int, ...]


def _geometry(shape: str, kind: str, kernel: str, strides: str, pads: str, dilations: str,
              ceil_mode: bool) -> tuple[Ints, Ints, Ints, Ints, Ints, Ints]:
    """(data shape, kernel, strides, pads, dilations, output spatial shape), checked."""
    x, k = dims(shape), int_list(kernel, "pool: kernel")
    s, p = int_list(strides, "pool: strides"), int_list(pads, "pool: pads")
    d = int_list(dilations, "pool: dilations")
    rank = len(k)
    if kind not in POOL_KINDS or not 1 <= rank <= 3 or len(x) != rank + 2:
        raise ValueError(f"pool: kind {kind!r} must be max or avg, data {shape!r} have 1 to 3 axes after "
                         f"(N, C) and kernel {kernel!r} one value per axis")
    if len(s) != rank or len(d) != rank or len(p) != 2 * rank or min(k + s + d) < 1 or min(p) < 0:
        raise ValueError(f"pool: {rank} strides and dilations >= 1 and {2 * rank} pads >= 0 needed")
    out = tuple(window_out(x[2 + i], k[i], s[i], p[i], p[rank + i], d[i], ceil_mode) for i in range(rank))
    if min(out) < 1:
        raise ValueError(f"pool: window {k} (dilations {d}) does not fit data {shape!r} padded by {p}")
    return x, k, s, p, d, out


def _counts(k: int, s: int, begin: int, d: int, out: int, lo: int, hi: int) -> np.ndarray:
    """Per output along one axis: how many of its window's taps fall in [lo, hi)."""
    return np.array([sum(lo <= o * s - begin + r * d < hi for r in range(k)) for o in range(out)], np.float64)


def _pool_ref(data: np.ndarray, *, kind: str, kernel: str, strides: str, pads: str, dilations: str,
              ceil_mode: bool, count_include_pad: bool) -> np.ndarray:
    shape = "x".join(map(str, data.shape))
    x, k, s, p, d, out = _geometry(shape, kind, kernel, strides, pads, dilations, ceil_mode)
    rank = len(k)
    reach = [(out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 for i in range(rank)]
    edges = [(p[i], max(0, reach[i] - x[2 + i] - p[i])) for i in range(rank)]
    fill = lowest(data.dtype.name) if kind == "max" else 0
    padded: np.ndarray = np.pad(data.astype(accumulator(data.dtype.name)), [(0, 0), (0, 0), *edges],
                                constant_values=fill)
    taps = []
    for tap in itertools.product(*(range(v) for v in k)):
        window = tuple(slice(t * d[i], t * d[i] + s[i] * (out[i] - 1) + 1, s[i]) for i, t in enumerate(tap))
        taps.append(padded[(slice(None), slice(None), *window)])
    if kind == "max":
        return np.maximum.reduce(taps)
    count = np.ones(())
    for i in range(rank):
        lo, hi = (-p[i], x[2 + i] + p[rank + i]) if count_include_pad else (0, x[2 + i])
        axis = _counts(k[i], s[i], p[i], d[i], out[i], lo, hi)
        count = np.multiply.outer(count, axis)
    return np.add.reduce(taps) / np.maximum(count, 1.0)


def _pool_flops(shape: str, kind: str, kernel: str, strides: str, pads: str, dilations: str, ceil_mode: bool,
                *_: object) -> int:
    x, k, _, _, _, out = _geometry(shape, kind, kernel, strides, pads, dilations, ceil_mode)
    size = math.prod(x[:2]) * math.prod(out)
    return size * math.prod(k) + (size if kind == "avg" else 0)


@workload("pool", reference=_pool_ref, flops=_pool_flops)
def pool(
    shape: str, kind: str, kernel: str, strides: str, pads: str, dilations: str, ceil_mode: bool = False,
    count_include_pad: bool = False, dtype: str = "float32",
) -> list[Tensor]:
    """Max or average pooling of data(shape: N, C, *spatial) over windows ``kernel`` (ONNX's
    strides, pads and dilations, ceil mode, count_include_pad); stages pad, then pool (max) or
    pool_sum, pool_count (where windows count different elements) and pool (average)."""
    x, k, s, p, d, out = _geometry(shape, kind, kernel, strides, pads, dilations, ceil_mode)
    rank = len(k)
    data = te.placeholder(x, dtype, name="data")
    reach = tuple((out[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 for i in range(rank))
    padded = any(p[:rank]) or any(reach[i] > x[2 + i] for i in range(rank))
    fill = lowest(dtype) if kind == "max" else 0.0
    src = pad_spatial(data, p[:rank], reach, fill) if padded else data
    rs = [te.reduce_axis(v, f"r{i}") for i, v in enumerate(k)]

    def at(o: tuple[Expr, ...]) -> list[Expr]:
        return [(oi if si == 1 else oi * si) + (r.var if di == 1 else r.var * di)
                for oi, r, si, di in zip(o, rs, s, d, strict=True)]

    combine = te.max if kind == "max" else te.sum
    name = "pool" if kind == "max" else "pool_sum"
    total = te.compute((*x[:2], *out), lambda n, c, *o: combine(src[(n, c, *at(o))], axis=rs), name=name)
    if kind == "max":
        return [data, total]
    bounds = [(-p[i], x[2 + i] + p[rank + i]) if count_include_pad else (0, x[2 + i]) for i in range(rank)]
    whole = all(bounds[i][0] <= -p[i] and reach[i] - p[i] <= bounds[i][1] for i in range(rank))
    if whole:  # every window counts all of its taps
        inv = te.const(1.0 / math.prod(k), dtype)
        return [data, te.compute(total.shape, lambda *ix: total[ix] * inv, name="pool")]
    one, zero = te.const(1.0, dtype), te.const(0.0, dtype)
    cs = [te.reduce_axis(v, f"c{i}") for i, v in enumerate(k)]

    def inside(*o: Expr) -> Expr:
        at_ = [oi * si + c.var * di - p[i] for i, (oi, c, si, di) in enumerate(zip(o, cs, s, d, strict=True))]
        conds = [cond for a, (lo, hi) in zip(at_, bounds, strict=True) for cond in (a >= lo, a < hi)]
        return te.sum(te.if_then_else(te.all(*conds), one, zero), axis=cs)

    count = te.compute(out, inside, name="pool_count")
    def mean(n: Expr, c: Expr, *o: Expr) -> Expr:
        return total[(n, c, *o)] / te.max(count[o], one)

    return [data, te.compute(total.shape, mean, name="pool")]


def pool_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """The default schedule of ``pool``: :func:`~autosched.ops.schedules.max_pool2d_cpu`'s for
    any rank: parallel over (image, channel), a vector of outputs along the last axis accumulated
    in a local tile per window tap (the last window axis unrolled), the padding inlined as a bounds
    check, the counts of an average computed once."""
    tgt = Target.parse(target)
    out = tensors[-1]
    s = create_schedule(out)
    acc = s.stages["pool_sum"].op.output(0) if "pool_sum" in s.stages else s.cache_write(out, "local")
    n, c, *space = s[out].op.axis
    planes = s[out].fuse(n, c)
    xo, xi = s[out].split(space[-1], tgt.vector_lanes(out.dtype))
    s[out].vectorize(xi)
    if (tgt.num_threads or 1) > 1:
        s[out].parallel(planes)
    s[acc].compute_at(s[out], xo)
    *lead, last = s[acc].op.axis
    s[acc].reorder(*lead, *s[acc].op.reduce_axis, last)
    s[acc].unroll(s[acc].op.reduce_axis[-1])
    s[acc].vectorize(last)
    if "pad" in s.stages:
        s[s.stages["pad"].op.output(0)].compute_inline()
    return s


def _instance_norm_ref(data: np.ndarray, scale: np.ndarray, bias: np.ndarray, *, eps: float) -> np.ndarray:
    x: np.ndarray = data.astype(accumulator(data.dtype.name))
    mean = x.mean(axis=2, keepdims=True)
    var = x.var(axis=2, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * scale[None, :, None] + bias[None, :, None]


def _instance_norm_flops(N: int, C: int, inner: int, *_: object) -> int:
    return 8 * N * C * inner


@workload("instance_norm", reference=_instance_norm_ref, flops=_instance_norm_flops)
def instance_norm(N: int, C: int, inner: int, eps: float = 1e-5, dtype: str = "float32") -> list[Tensor]:
    """out(N, C, inner) = (data - mean) / sqrt(var + eps) * scale(C) + bias(C), the mean and
    (biased) variance over each (n, c)'s inner elements; stages row_sum, square_sum, instance_norm."""
    check_positive("instance_norm", N=N, C=C, inner=inner)
    data = te.placeholder((N, C, inner), dtype, name="data")
    scale = te.placeholder((C,), dtype, name="scale")
    bias = te.placeholder((C,), dtype, name="bias")
    k1, k2 = te.reduce_axis(inner, "k"), te.reduce_axis(inner, "k")
    inv = te.const(1.0 / inner, dtype)
    total = te.compute((N, C), lambda n, c: te.sum(data[n, c, k1], axis=k1), name="row_sum")

    def centered(n: Expr, c: Expr, i: Expr) -> Expr:
        return data[n, c, i] - total[n, c] * inv

    def square(n: Expr, c: Expr) -> Expr:
        return te.sum(centered(n, c, k2.var) * centered(n, c, k2.var), axis=k2)

    squares = te.compute((N, C), square, name="square_sum")

    def body(n: Expr, c: Expr, i: Expr) -> Expr:
        norm = centered(n, c, i) / te.sqrt(squares[n, c] * inv + te.const(eps, dtype))
        return norm * scale[c] + bias[c]

    return [data, scale, bias, te.compute((N, C, inner), body, name="instance_norm")]


def instance_norm_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """The default schedule of ``instance_norm``: each (image, channel)'s two sums computed
    in its iteration of the output's parallel loop, the output row vectorized."""
    s = create_schedule(tensors[-1])
    out = tensors[-1]
    vectorize_rows(s, out, target)
    outer = s[out].leaf_itervars()[0]
    for name in ("row_sum", "square_sum"):
        s[s.stages[name].op.output(0)].compute_at(s[out], outer)
    return s


SCHEDULES.update(pool=pool_cpu, instance_norm=instance_norm_cpu)
