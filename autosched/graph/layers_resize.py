"""``resize``: ONNX Resize to given sizes, nearest or (multi)linear, with ONNX's coordinate
transformations (half_pixel, asymmetric, align_corners, pytorch_half_pixel) and nearest modes.

Each resized axis maps output coordinate x to the input coordinate of the chosen transformation,
computed in the data's float type as onnxruntime does (scale = out / in): half_pixel
``(x + 0.5) / scale - 0.5``, asymmetric ``x / scale``, align_corners ``x * (in - 1) / (out - 1)``,
pytorch_half_pixel half_pixel's but 0 where out is 1. Nearest rounds it by the nearest mode and
clamps it into the axis; linear clamps it into [0, in - 1] and blends the two elements around it.
The per-axis input indices (and linear weights) are small stages (``index<a>``, ``lower<a>``,
``weight<a>``) that the output stage ``resize`` reads. Axes that keep their size are copied.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np

from .. import expr as te
from ..dtypes import numpy_dtype
from ..expr import Expr, Tensor
from ..ops.registry import workload
from ..ops.schedules import SCHEDULES
from ..schedule import Schedule, create_schedule
from ..target import Target
from .builder_nn import COORDINATE_MODES, NEAREST_MODES, RESIZE_MODES
from .layers import dims
from .layers_tensor import vectorize_rows


def _geometry(shape: str, out_shape: str, mode: str, coordinates: str, nearest_mode: str,
              ) -> tuple[tuple[int, ...], tuple[int, ...], list[int]]:
    src, dst = dims(shape), dims(out_shape)
    for what, value, allowed in (("mode", mode, RESIZE_MODES), ("coordinates", coordinates, COORDINATE_MODES),
                                 ("nearest_mode", nearest_mode, NEAREST_MODES)):
        if value not in allowed:
            raise ValueError(f"resize: {what} {value!r} is not one of {', '.join(allowed)}")
    changed = [a for a, (i, o) in enumerate(zip(src, dst, strict=False)) if i != o]
    if len(src) != len(dst) or (mode == "linear" and len(changed) > 3):
        raise ValueError(f"resize: {shape!r} -> {out_shape!r} must keep the rank (linear: resize at most "
                         "3 axes)")
    return src, dst, changed


def _source(o: Expr, n_in: int, n_out: int, coordinates: str, dtype: str) -> Expr:
    """The input coordinate (a float of ``dtype``) of output coordinate ``o`` along one axis."""
    x = te.cast(o, dtype)
    if coordinates == "align_corners":
        if n_out == 1:
            return te.const(0.0, dtype)
        return x * te.const(n_in - 1, dtype) / te.const(n_out - 1, dtype)
    if coordinates == "pytorch_half_pixel" and n_out == 1:
        return te.const(0.0, dtype)
    scale = te.const(n_out / n_in, dtype)
    if coordinates == "asymmetric":
        return x / scale
    half = te.const(0.5, dtype)
    return (x + half) / scale - half


def _clamp(v: Expr, n: int) -> Expr:
    return te.min(te.max(v, te.const(0, "int32")), te.const(n - 1, "int32"))


def _nearest(c: Expr, nearest_mode: str) -> Expr:
    if nearest_mode == "round_prefer_floor":  # ties down: ceil(c - 0.5)
        return te.ceil(c - te.const(0.5, c.dtype))
    if nearest_mode == "round_prefer_ceil":  # ties up: floor(c + 0.5)
        return te.floor(c + te.const(0.5, c.dtype))
    return te.floor(c) if nearest_mode == "floor" else te.ceil(c)


def _ref_coordinates(n_in: int, n_out: int, coordinates: str, dt: type) -> np.ndarray:
    x: np.ndarray = np.arange(n_out).astype(dt)
    scale = dt(n_out) / dt(n_in)
    if coordinates == "align_corners":
        return np.zeros(n_out, dt) if n_out == 1 else x * dt(n_in - 1) / dt(n_out - 1)
    if coordinates == "asymmetric":
        return x / scale
    if coordinates == "pytorch_half_pixel" and n_out == 1:
        return np.zeros(1, dt)
    return (x + dt(0.5)) / scale - dt(0.5)


def _resize_ref(
    data: np.ndarray, *, out_shape: str, mode: str, coordinates: str, nearest_mode: str
) -> np.ndarray:
    dt = numpy_dtype(data.dtype.name).type
    out = data.astype(np.float64)
    for a, n_out in enumerate(dims(out_shape)):
        n_in = data.shape[a]
        if n_in == n_out:
            continue
        x = _ref_coordinates(n_in, n_out, coordinates, dt).astype(np.float64)
        if mode == "nearest":
            away = np.sign(x) * np.floor(np.abs(x) + 0.5)  # rounds halves away from zero
            pick = {"round_prefer_floor": np.where(x - np.floor(x) == 0.5, np.floor(x), away),
                    "round_prefer_ceil": away, "floor": np.floor(x), "ceil": np.ceil(x)}[nearest_mode]
            out = np.take(out, np.clip(pick.astype(np.int64), 0, n_in - 1), axis=a)
            continue
        x = np.clip(x, 0, n_in - 1)
        lo = np.minimum(x.astype(np.int64), n_in - 1)
        hi = np.minimum(lo + 1, n_in - 1)
        w_lo, w_hi = np.abs(x - hi), np.abs(x - lo)  # each side weighs the distance to the other
        w_lo, w_hi = np.where(lo == hi, 0.5, w_lo), np.where(lo == hi, 0.5, w_hi)
        trailing = (slice(None),) + (None,) * (data.ndim - a - 1)
        out = np.take(out, lo, axis=a) * w_lo[trailing] + np.take(out, hi, axis=a) * w_hi[trailing]
    return out


def _resize_flops(
    shape: str, out_shape: str, mode: str, coordinates: str, nearest_mode: str, *_: object
) -> int:
    _, dst, changed = _geometry(shape, out_shape, mode, coordinates, nearest_mode)
    return 0 if mode == "nearest" else 2 * math.prod(dst) * 2 ** len(changed)


@workload("resize", reference=_resize_ref, flops=_resize_flops)
def resize(
    shape: str, out_shape: str, mode: str = "nearest", coordinates: str = "half_pixel",
    nearest_mode: str = "round_prefer_floor", dtype: str = "float32",
) -> list[Tensor]:
    """out(out_shape) = data(shape) resized (ONNX Resize to sizes): ``mode`` nearest or linear,
    ``coordinates`` the coordinate transformation, ``nearest_mode`` the rounding of nearest."""
    src, dst, changed = _geometry(shape, out_shape, mode, coordinates, nearest_mode)
    data = te.placeholder(src, dtype, name="data")
    def per_axis(a: int, name: str, value: Callable[[Expr, int], Expr]) -> Tensor:
        return te.compute((dst[a],), lambda o: value(o, a), name=f"{name}{a}")

    if mode == "nearest":
        def nearest(o: Expr, a: int) -> Expr:
            c = _source(o, src[a], dst[a], coordinates, dtype)
            return _clamp(te.cast(_nearest(c, nearest_mode), "int32"), src[a])

        index = {a: per_axis(a, "index", nearest) for a in changed}

        def pick(*ix: Expr) -> Expr:
            return data[tuple(index[a][i] if a in index else i for a, i in enumerate(ix))]

        return [data, te.compute(dst, pick, name="resize")]

    def clamped(o: Expr, a: int) -> Expr:
        c = _source(o, src[a], dst[a], coordinates, dtype)
        return te.min(te.max(c, te.const(0.0, dtype)), te.const(src[a] - 1, dtype))

    lower = {a: per_axis(a, "lower", lambda o, a: te.cast(clamped(o, a), "int32")) for a in changed}
    weight = {a: per_axis(a, "weight", lambda o, a: clamped(o, a) - te.cast(lower[a][o], dtype))
              for a in changed}
    one = te.const(1.0, dtype)

    def blend(*ix: Expr) -> Expr:
        total: Expr | None = None
        for corner in itertools.product((0, 1), repeat=len(changed)):
            at, coef = list(ix), None
            for a, up in zip(changed, corner, strict=True):
                lo = lower[a][ix[a]]
                at[a] = te.min(lo + 1, te.const(src[a] - 1, "int32")) if up else lo
                w = weight[a][ix[a]] if up else one - weight[a][ix[a]]
                coef = w if coef is None else coef * w
            term = data[tuple(at)] if coef is None else coef * data[tuple(at)]
            total = term if total is None else total + term
        assert total is not None
        return total

    return [data, te.compute(dst, blend, name="resize")]


def resize_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """The default schedule of ``resize``: the per-axis indices and weights computed once, the
    output's rows parallel and vectorized (:func:`.layers_tensor.vectorize_rows`)."""
    s = create_schedule(tensors[-1])
    vectorize_rows(s, tensors[-1], target)
    return s


SCHEDULES["resize"] = resize_cpu
