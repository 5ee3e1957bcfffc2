"""Graph-builder methods of the convolution-network operators: convolutions (any rank, transposed),
pooling (any rank, ceil mode), global pooling, instance norm and resize.

Window attributes follow ONNX: per-axis lists, pads as every axis' begin then every axis' end.
Where a case is one the older 2-D nodes cover (``conv2d``, ``max_pool2d``, ``avg_pool2d``,
``global_avg_pool2d``), it becomes that node, so tuned logs, weight layouts and hand-written
schedules of those apply unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ops.common import conv_out_size
from .ir_core import BuilderBase

POOL_KINDS = ("max", "avg")
RESIZE_MODES = ("nearest", "linear")
COORDINATE_MODES = ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def window_out(size: int, kernel: int, stride: int, begin: int, end: int, dilation: int, ceil: bool) -> int:
    """Outputs of a window sliding over ``size`` padded by ``begin``/``end``: ONNX's rule, with
    ``ceil`` dropping a last window that would start in the end padding; 0 if none fits."""
    span = size + begin + end - dilation * (kernel - 1) - 1
    if span < 0:
        return 0
    if not ceil:
        return span // stride + 1
    out = -(-span // stride) + 1
    return out - 1 if (out - 1) * stride >= size + begin else out


def _ints(what: str, values: Sequence[int], count: int, low: int) -> tuple[int, ...]:
    out = tuple(int(v) for v in values)
    if len(out) != count or min(out, default=low) < low:
        raise ValueError(f"{what} {list(values)} must be {count} ints >= {low}")
    return out


class NNBuilder(BuilderBase):
    """Convolutions, pooling, instance norm and resize (NCHW-style layouts: channels on axis 1)."""

    def conv2d(
        self, x: str, w: str, bias: str | None = None, *, stride: int = 1, pad: int = 0, groups: int = 1,
        name: str | None = None,
    ) -> str:
        """NCHW convolution of x (N, C, H, W) with w (K, C/groups, R, S), square stride and padding."""
        (n, c, h, wd), (k, cg, r, s) = self._ranks("conv2d", name, (x, 4), (w, 4))
        if cg * groups != c or k % groups:
            fit = f"weight {self.shape(w)} does not fit input {self.shape(x)} with {groups} groups"
            raise self._fail("conv2d", name, fit)
        try:
            p, q = (conv_out_size("conv2d", d, kk, stride, pad, 1) for d, kk in ((h, r), (wd, s)))
        except ValueError as e:
            raise self._fail("conv2d", name, str(e)) from None
        out = self._add("conv2d", (x, w), (n, k, p, q), name, stride=stride, pad=pad, groups=groups)
        return out if bias is None else self.bias_add(out, bias, axis=1)

    def _window(
        self, op: str, x: str, kernel: Sequence[int], strides: Sequence[int], pads: Sequence[int],
        dilations: Sequence[int] | None, name: str | None,
    ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """The checked (kernel, strides, pads, dilations) of a window over x's axes after the second."""
        rank = len(self.shape(x)) - 2
        if not 1 <= rank <= 3 or len(kernel) != rank:
            need = f"input {self.shape(x)} needs 1 to 3 axes after (N, C) and a {rank}-D window"
            raise self._fail(op, name, need)
        try:
            k = _ints("kernel", kernel, rank, 1)
            s = _ints("strides", strides, rank, 1)
            p = _ints("pads", pads, 2 * rank, 0)
            d = _ints("dilations", dilations if dilations is not None else (1,) * rank, rank, 1)
        except ValueError as e:
            raise self._fail(op, name, str(e)) from None
        return k, s, p, d

    def conv(
        self, x: str, w: str, bias: str | None = None, *, strides: Sequence[int], pads: Sequence[int],
        dilations: Sequence[int], groups: int = 1, name: str | None = None,
    ) -> str:
        """Convolution of x (N, C, *spatial: 1 to 3 axes) with w (K, C/groups, *kernel) (+ bias (K,)):
        per-axis strides and dilations, pads in ONNX order (begins, then ends)."""
        xs, ws = self.shape(x), self.shape(w)
        if len(ws) != len(xs):
            raise self._fail("conv", name, f"weight {ws} and input {xs} must have the same rank")
        k, s, p, d = self._window("conv", x, ws[2:], strides, pads, dilations, name)
        rank = len(k)
        if ws[1] * groups != xs[1] or ws[0] % groups:
            raise self._fail("conv", name, f"weight {ws} does not fit input {xs} with {groups} groups")
        if rank == 2 and len(set(s)) == 1 and len(set(p)) == 1 and d == (1, 1):
            return self.conv2d(x, w, bias, stride=s[0], pad=p[0], groups=groups, name=name)
        out = [window_out(xs[2 + i], k[i], s[i], p[i], p[rank + i], d[i], False) for i in range(rank)]
        if min(out) < 1:
            fit = f"kernel {k} (dilations {d}) does not fit input {xs} padded by {p}"
            raise self._fail("conv", name, fit)
        attrs = {"strides": s, "pads": p, "dilations": d, "groups": groups}
        y = self._add("conv", (x, w), (xs[0], ws[0], *out), name, **attrs)
        return y if bias is None else self.bias_add(y, bias, axis=1)

    def conv_transpose(
        self, x: str, w: str, bias: str | None = None, *, strides: Sequence[int], pads: Sequence[int],
        output_padding: Sequence[int], dilations: Sequence[int], groups: int = 1, name: str | None = None,
    ) -> str:
        """Transposed convolution (ONNX ConvTranspose) of x (N, C, *spatial: 1 to 3 axes) with
        w (C, K/groups, *kernel) (+ bias (K,)): output axis = stride * (in - 1) + output_padding
        + dilation * (kernel - 1) + 1 - pad_begin - pad_end."""
        xs, ws = self.shape(x), self.shape(w)
        if len(ws) != len(xs):
            raise self._fail("conv_transpose", name, f"weight {ws} and input {xs} must have the same rank")
        k, s, p, d = self._window("conv_transpose", x, ws[2:], strides, pads, dilations, name)
        rank = len(k)
        try:
            extra = _ints("output_padding", output_padding, rank, 0)
        except ValueError as e:
            raise self._fail("conv_transpose", name, str(e)) from None
        if ws[0] != xs[1] or xs[1] % groups:
            fit = f"weight {ws} does not fit input {xs} with {groups} groups"
            raise self._fail("conv_transpose", name, fit)
        out = [s[i] * (xs[2 + i] - 1) + extra[i] + d[i] * (k[i] - 1) + 1 - p[i] - p[rank + i]
               for i in range(rank)]
        if min(out) < 1:
            raise self._fail("conv_transpose", name, f"pads {list(p)} leave no output of input {xs}")
        shape = (xs[0], ws[1] * groups, *out)
        attrs = {"strides": s, "pads": p, "output_padding": extra, "dilations": d, "groups": groups}
        y = self._add("conv_transpose", (x, w), shape, name, **attrs)
        return y if bias is None else self.bias_add(y, bias, axis=1)

    def _pool(self, op: str, x: str, kernel: int, stride: int, pad: int, name: str | None) -> str:
        (n, c, h, w), = self._ranks(op, name, (x, 4))
        if pad >= kernel:
            raise self._fail(op, name, f"pad ({pad}) must be smaller than kernel ({kernel})")
        try:
            p, q = (conv_out_size(op, d, kernel, stride, pad, 1) for d in (h, w))
        except ValueError as e:
            raise self._fail(op, name, str(e)) from None
        return self._add(op, (x,), (n, c, p, q), name, kernel=kernel, stride=stride, pad=pad)

    def max_pool2d(self, x: str, kernel: int, stride: int, pad: int = 0, *, name: str | None = None) -> str:
        """Max over square windows (padding never wins)."""
        return self._pool("max_pool2d", x, kernel, stride, pad, name)

    def avg_pool2d(self, x: str, kernel: int, stride: int, pad: int = 0, *, name: str | None = None) -> str:
        """Mean over square windows, padded zeros counted."""
        return self._pool("avg_pool2d", x, kernel, stride, pad, name)

    def global_avg_pool2d(self, x: str, *, name: str | None = None) -> str:
        """The mean of each channel: (N, C, H, W) -> (N, C, 1, 1)."""
        (n, c, _, _), = self._ranks("global_avg_pool2d", name, (x, 4))
        return self._add("global_avg_pool2d", (x,), (n, c, 1, 1), name)

    def pool(
        self, x: str, kind: str, kernel: Sequence[int], strides: Sequence[int], pads: Sequence[int], *,
        ceil_mode: bool = False, count_include_pad: bool = False, dilations: Sequence[int] | None = None,
        name: str | None = None,
    ) -> str:
        """Max or average pooling (ONNX MaxPool/AveragePool) over the 1 to 3 axes after (N, C):
        padding never wins a max; an average divides by the window's elements inside the data, or
        inside the padded data with ``count_include_pad``; ``ceil_mode`` keeps a last partial window."""
        if kind not in POOL_KINDS:
            raise self._fail("pool", name, f"kind {kind!r} is not one of {', '.join(POOL_KINDS)}")
        xs = self.shape(x)
        k, s, p, d = self._window("pool", x, kernel, strides, pads, dilations, name)
        rank = len(k)
        if any(p[i] >= d[i] * (k[i] - 1) + 1 or p[rank + i] >= d[i] * (k[i] - 1) + 1 for i in range(rank)):
            raise self._fail("pool", name, f"pads {list(p)} must be smaller than the window {list(k)}")
        out = [window_out(xs[2 + i], k[i], s[i], p[i], p[rank + i], d[i], ceil_mode) for i in range(rank)]
        if min(out) < 1:
            fit = f"window {k} (dilations {d}) does not fit input {xs} padded by {p}"
            raise self._fail("pool", name, fit)
        floor = [window_out(xs[2 + i], k[i], s[i], p[i], p[rank + i], d[i], False) for i in range(rank)]
        square = rank == 2 and len(set(k)) == 1 and len(set(s)) == 1 and len(set(p)) == 1 and d == (1, 1)
        if square and out == floor and (kind == "max" or count_include_pad or p[0] == 0):
            return self._pool(f"{kind}_pool2d", x, k[0], s[0], p[0], name)
        attrs = {"kind": kind, "kernel": k, "strides": s, "pads": p, "dilations": d,
                 "ceil_mode": bool(ceil_mode), "count_include_pad": bool(count_include_pad)}
        return self._add("pool", (x,), (*xs[:2], *out), name, **attrs)

    def global_pool(self, x: str, kind: str, *, name: str | None = None) -> str:
        """The mean or max of each channel over every axis after (N, C), kept as axes of size 1."""
        rank = len(self.shape(x))
        if kind not in POOL_KINDS or rank < 3:
            raise self._fail("global_pool", name, f"needs kind max or avg (got {kind!r}) and 3 or more axes")
        if kind == "avg" and rank == 4:
            return self.global_avg_pool2d(x, name=name)
        out = self.shape(x)[:2] + (1,) * (rank - 2)
        reduce = "mean" if kind == "avg" else "max"
        return self._add("global_pool", (x,), out, name, kind=reduce, axes=tuple(range(2, rank)))

    def instance_norm(
        self, x: str, scale: str, bias: str, eps: float = 1e-5, *, name: str | None = None
    ) -> str:
        """Each (image, channel) of x (N, C, ...) normalized over its other axes, then * scale[c]
        + bias[c] (ONNX InstanceNormalization)."""
        xs = self.shape(x)
        if len(xs) < 3:
            raise self._fail("instance_norm", name, f"input {xs} needs 3 or more axes (N, C, ...)")
        for v in (scale, bias):
            if self.shape(v) != (xs[1],):
                fit = f"{v!r} {self.shape(v)} must be a vector of the {xs[1]} channels"
                raise self._fail("instance_norm", name, fit)
        return self._add("instance_norm", (x, scale, bias), xs, name, eps=float(eps))

    def resize(
        self, x: str, out_shape: Sequence[int], *, mode: str,
        coordinate_transformation_mode: str = "half_pixel", nearest_mode: str = "round_prefer_floor",
        name: str | None = None,
    ) -> str:
        """x resized to ``out_shape`` (ONNX Resize with sizes): ``nearest`` on any axes, ``linear``
        on at most 3 (the others unchanged), each output coordinate mapped to the input by
        ``coordinate_transformation_mode`` (half_pixel, asymmetric, align_corners, pytorch_half_pixel)."""
        xs, out = self.shape(x), tuple(int(d) for d in out_shape)
        choices = (("mode", mode, RESIZE_MODES), ("nearest_mode", nearest_mode, NEAREST_MODES),
                   ("coordinate_transformation_mode", coordinate_transformation_mode, COORDINATE_MODES))
        for what, value, allowed in choices:
            if value not in allowed:
                raise self._fail("resize", name, f"{what} {value!r} is not one of {', '.join(allowed)}")
        if len(out) != len(xs) or min(out) < 1:
            raise self._fail("resize", name, f"out_shape {list(out_shape)} must be {len(xs)} positive ints")
        if mode == "linear" and sum(a != b for a, b in zip(xs, out, strict=True)) > 3:
            raise self._fail("resize", name, f"linear resizes at most 3 axes: {xs} -> {out}")
        attrs = {"mode": mode, "coordinates": coordinate_transformation_mode, "nearest_mode": nearest_mode}
        return self._add("resize", (x,), out, name, **attrs)
