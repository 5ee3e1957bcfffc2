"""ONNX converters of convolutions (Conv and ConvTranspose of 1 to 3 spatial axes) and pooling
(MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool)."""

from __future__ import annotations

from collections.abc import Sequence

from .ir import GraphError
from .onnx_context import Importer, unsupported
from .onnx_rewrite import OnnxNode
from .onnx_table import Result, converter

AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")


def _same(total: int, upper: bool) -> tuple[int, int]:
    """(begin, end) padding of ``total`` elements: the odd one at the end (SAME_UPPER) or begin."""
    small, big = total // 2, total - total // 2
    return (small, big) if upper else (big, small)


def window_pads(n: OnnxNode, sizes: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                dilations: Sequence[int]) -> list[int]:
    """A Conv's or a pool's pads (begins, then ends) from ``pads`` or ``auto_pad``."""
    rank = len(sizes)
    mode = Importer.text(n, "auto_pad", "NOTSET")
    if mode not in AUTO_PADS:
        raise unsupported("auto_pad", mode, f"one of {', '.join(AUTO_PADS)}")
    if mode == "NOTSET":
        pads = Importer.ints(n, "pads", [0] * 2 * rank)
        if len(pads) != 2 * rank:
            raise GraphError(f"pads {pads} must be {2 * rank} ints (begins, then ends)")
        return pads
    if mode == "VALID":
        return [0] * 2 * rank
    begins, ends = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
        out = -(-size // s)
        b, e = _same(max(0, (out - 1) * s + (k - 1) * d + 1 - size), mode == "SAME_UPPER")
        begins.append(b)
        ends.append(e)
    return begins + ends


def _window(n: OnnxNode, rank: int, kernel: Sequence[int]) -> tuple[list[int], list[int]]:
    """A node's (strides, dilations), checked against its ``kernel_shape`` attribute."""
    given = Importer.ints(n, "kernel_shape", kernel)
    if given != list(kernel):
        raise GraphError(f"kernel_shape {given} does not match the weight's kernel {list(kernel)}")
    strides = Importer.ints(n, "strides", [1] * rank)
    dilations = Importer.ints(n, "dilations", [1] * rank)
    if len(strides) != rank or len(dilations) != rank:
        raise GraphError(f"strides {strides} and dilations {dilations} must have {rank} ints each")
    return strides, dilations


def _operands(cx: Importer, n: OnnxNode) -> tuple[str, str, tuple[int, ...], tuple[int, ...], int]:
    """A convolution's input and weight, their shapes and its spatial rank (both of one rank, 3 to 5)."""
    x, w = cx.value(n.inputs[0]), cx.value(n.inputs[1])
    xs, ws = cx.b.shape(x), cx.b.shape(w)
    if len(xs) != len(ws) or len(ws) < 3:
        raise GraphError(f"input {xs} and weight {ws} must have the same rank, 3 to 5")
    return x, w, tuple(xs), tuple(ws), len(ws) - 2


def _bias(cx: Importer, n: OnnxNode) -> str | None:
    return cx.value(n.inputs[2]) if cx.has(n, 2) else None


#: the attributes of Conv (and of ConvInteger, QLinearConv)
CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


@converter("Conv", attrs=CONV_ATTRS,
           doc="1-D to 3-D, per-axis strides, dilations and asymmetric pads; a BatchNormalization "
           "after it is folded into its weights")
def _conv(cx: Importer, n: OnnxNode) -> list[Result]:
    x, w, xs, ws, rank = _operands(cx, n)
    strides, dilations = _window(n, rank, ws[2:])
    pads = window_pads(n, xs[2:], ws[2:], strides, dilations)
    return [cx.b.conv(x, w, _bias(cx, n), strides=strides, pads=pads, dilations=dilations,
                      groups=int(n.attrs.get("group", 1)), name=n.name)]


@converter("ConvTranspose", attrs=("auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                                   "output_shape", "pads", "strides"),
           doc="1-D to 3-D, strides, pads, output_padding, output_shape, auto_pad, dilations, groups; a "
           "BatchNormalization after it is folded into its weights")
def _conv_transpose(cx: Importer, n: OnnxNode) -> list[Result]:
    x, w, xs, ws, rank = _operands(cx, n)
    strides, dilations = _window(n, rank, ws[2:])
    extra = cx.ints(n, "output_padding", [0] * rank)
    mode = cx.text(n, "auto_pad", "NOTSET")
    if mode not in AUTO_PADS:
        raise unsupported("auto_pad", mode, f"one of {', '.join(AUTO_PADS)}")
    wanted = cx.ints(n, "output_shape", [])
    if not wanted and mode in ("SAME_UPPER", "SAME_LOWER"):
        wanted = [size * s for size, s in zip(xs[2:], strides, strict=True)]
    if wanted:
        wanted = wanted[-rank:]
        begins, ends = [], []
        for i in range(rank):
            full = strides[i] * (xs[2 + i] - 1) + extra[i] + (ws[2 + i] - 1) * dilations[i] + 1
            if full < wanted[i]:
                raise unsupported("output_shape", wanted, f"axis {2 + i} can reach {full} at most")
            b, e = _same(full - wanted[i], mode == "SAME_UPPER")
            begins.append(b)
            ends.append(e)
        pads = begins + ends
    else:
        pads = [0] * 2 * rank if mode == "VALID" else cx.ints(n, "pads", [0] * 2 * rank)
    return [cx.b.conv_transpose(x, w, _bias(cx, n), strides=strides, pads=pads, output_padding=extra,
                                dilations=dilations, groups=int(n.attrs.get("group", 1)), name=n.name)]


@converter("MaxPool",
           attrs=("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"),
           doc="1-D to 3-D, ceil_mode, asymmetric pads, dilations (not the Indices output)")
@converter("AveragePool",
           attrs=("auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads",
                  "strides"),
           doc="1-D to 3-D, ceil_mode, count_include_pad, asymmetric pads")
def _pool(cx: Importer, n: OnnxNode) -> list[Result]:
    x = cx.value(n.inputs[0])
    xs = cx.b.shape(x)
    kernel = cx.ints(n, "kernel_shape", [])
    rank = len(kernel)
    if rank != len(xs) - 2:
        raise GraphError(f"kernel_shape {kernel} does not fit input {xs} (one size per axis after N, C)")
    strides, dilations = _window(n, rank, kernel)
    pads = window_pads(n, xs[2:], kernel, strides, dilations)
    kind = "max" if n.op == "MaxPool" else "avg"
    return [cx.b.pool(x, kind, kernel, strides, pads, ceil_mode=bool(n.attrs.get("ceil_mode", 0)),
                      count_include_pad=bool(n.attrs.get("count_include_pad", 0)), dilations=dilations,
                      name=n.name)]


@converter("GlobalAveragePool", "GlobalMaxPool", doc="any rank >= 3")
def _global_pool(cx: Importer, n: OnnxNode) -> list[Result]:
    kind = "avg" if n.op == "GlobalAveragePool" else "max"
    return [cx.b.global_pool(cx.value(n.inputs[0]), kind, name=n.name)]
