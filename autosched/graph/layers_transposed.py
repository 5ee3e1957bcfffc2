"""Transposed convolutions (ONNX ConvTranspose, weight (C, K/groups, *taps)) of 1 to 3 spatial
axes, with an epilogue: ``fused_conv_transpose``.

Output o along an axis receives input i through tap r where o + pad_begin = i * stride + r *
dilation. Without dilation the outputs split into ``stride`` phases per axis, o + pad_begin =
q * stride + phase, and each phase is an ordinary convolution over the input: output q of phase
ph reads input q - m through tap ph + m * stride (m < ceil(taps / stride)). So the kernel computes
every phase as one stage ``conv`` (N, K, *phases, *q) over the input padded in front (stage
``pad``), vectorizable along q like any convolution and multiplying no inserted zeros, then
interleaves the phases into the output (stage ``interleave``). With dilation it spreads the input
out with stride - 1 zeros between elements (stage ``pad``) and convolves that with the flipped
kernel at stride 1 (stage ``conv``). The reference is plain numpy written apart from the te DAG:
it scatters each input element's products into the output, as the operator is defined.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np

from .. import expr as te
from ..expr import Expr, Tensor, as_int, static_shape
from ..ops.common import accumulator
from ..ops.registry import workload
from ..ops.schedules import SCHEDULES
from ..schedule import Schedule
from ..target import Target
from . import epilogue as epi
from .conv_packed import (
    blocked,
    blocked_conv_stage,
    is_packed,
    logical_kernel,
    tile_blocked_root,
    unpack_weight,
)
from .layers import dims, int_list
from .layers_conv import conv_geometry, conv_nd_cpu, conv_stage, pad_spatial, tile_conv_nd
from .layers_tensor import vectorize_rows

Ints = tuple[int, ...]


def _transposed_out(x: tuple[int, ...], w: tuple[int, ...], s: tuple[int, ...], p: tuple[int, ...],
                    extra: tuple[int, ...], d: tuple[int, ...], groups: int) -> tuple[int, ...]:
    rank = len(s)
    if w[0] != x[1] or x[1] % groups or len(extra) != rank or min(extra, default=0) < 0:
        raise ValueError(f"fused_conv_transpose: weight {w} does not fit data {x} with {groups} groups "
                         f"(or output_padding {extra} is not {rank} ints >= 0)")
    out = tuple(s[i] * (x[2 + i] - 1) + extra[i] + d[i] * (w[2 + i] - 1) + 1 - p[i] - p[rank + i]
                for i in range(rank))
    if min(out) < 1:
        raise ValueError(f"fused_conv_transpose: pads {p} leave no output of data {x}")
    return (x[0], w[1] * groups, *out)


def _transposed_ref(data: np.ndarray, kernel: np.ndarray, *extras: np.ndarray, strides: str, pads: str,
                    output_padding: str, dilations: str, groups: int, epilogue: str) -> np.ndarray:
    s, p, d = int_list(strides, "strides"), int_list(pads, "pads"), int_list(dilations, "dilations")
    extra = int_list(output_padding, "output_padding")
    rank = data.ndim - 2
    if is_packed(data.shape, kernel.shape):
        kernel = unpack_weight(kernel, transposed=True)
    acc = accumulator(data.dtype.name)
    sizes, taps = data.shape[2:], kernel.shape[2:]
    cg, kg = data.shape[1] // groups, kernel.shape[1]
    full = [s[i] * (sizes[i] - 1) + d[i] * (taps[i] - 1) + 1 + extra[i] for i in range(rank)]
    out = np.zeros((data.shape[0], kg * groups, *full), acc)
    x: np.ndarray = data.astype(acc)
    for g in range(groups):
        for tap in itertools.product(*(range(t) for t in taps)):  # input i lands on i * s + tap * d
            taken: tuple[slice | int, ...] = (slice(g * cg, (g + 1) * cg), slice(None), *tap)
            part = np.einsum("nc...,ck->nk...", x[:, g * cg : (g + 1) * cg], kernel[taken].astype(acc))
            where = tuple(slice(t * d[i], t * d[i] + s[i] * (sizes[i] - 1) + 1, s[i])
                          for i, t in enumerate(tap))
            out[(slice(None), slice(g * kg, (g + 1) * kg), *where)] += part
    kept = tuple(slice(p[i], full[i] - p[rank + i]) for i in range(rank))
    return epi.reference(out[(slice(None), slice(None), *kept)], epilogue, 1, extras)


def _transposed_flops(shape: str, kernel: str, strides: str, pads: str, output_padding: str, dilations: str,
                      groups: int, epilogue: str, *_: object) -> int:
    x, w, s, p, d = conv_geometry("fused_conv_transpose", shape, kernel, strides, pads, dilations, True)
    out = _transposed_out(x, w, s, p, int_list(output_padding, "output_padding"), d, groups)
    return 2 * math.prod(x) * math.prod(w[1:]) + math.prod(out) * len(epi.parse(epilogue))


def _kernel_shape(data: Tensor, weight: Tensor) -> Ints:
    """The (C, K/groups, *taps) shape of ``weight``, packed or not."""
    given = static_shape(weight.shape)
    return logical_kernel(given, True) if is_packed(static_shape(data.shape), given) else given


def _spread(data: Tensor, weight: Tensor, out: Ints, s: Ints, p: Ints, d: Ints, groups: int) -> Tensor:
    """Stage ``conv`` of any transposed convolution: the stride-1 convolution of the input spread
    out by the strides (stage ``pad``) with the flipped kernel (packed: stages ``conv_blk``, ``conv``)."""
    x, w = static_shape(data.shape), _kernel_shape(data, weight)
    rank, taps = len(s), w[2:]
    # output o reads spread element o + r * d (r the flipped tap); input i sits at i * s + offset
    offset = tuple(d[i] * (taps[i] - 1) - p[i] for i in range(rank))
    extent = tuple(out[2 + i] + d[i] * (taps[i] - 1) for i in range(rank))
    zero = te.const(0.0, data.dtype)

    def spread(n: Expr, c: Expr, *j: Expr) -> Expr:
        at, conds = [], []
        for i, ji in enumerate(j):
            moved = ji - offset[i] if offset[i] else ji
            at.append(moved if s[i] == 1 else moved // s[i])
            if offset[i] > 0:
                conds.append(ji >= offset[i])
            if s[i] > 1:
                conds.append(te.equal(moved % s[i], 0))
            if extent[i] - 1 - offset[i] > s[i] * (x[2 + i] - 1):
                conds.append(moved < s[i] * (x[2 + i] - 1) + 1)
        value = data[(n, c, *at)]
        return te.if_then_else(te.all(*conds), value, zero) if conds else value

    needs_stage = any(offset) or any(v > 1 for v in s) or extent != x[2:]
    src = te.compute((*x[:2], *extent), spread, name="pad") if needs_stage else data
    kg, cg = w[1], x[1] // groups
    if is_packed(x, static_shape(weight.shape)):
        def packed(fo: Expr, fi: Expr, c: Expr, rs: list[Expr]) -> Expr:
            return weight[(fo, c, *(t - 1 - r for t, r in zip(taps, rs, strict=True)), fi)]

        return blocked_conv_stage(src, out, taps, (1,) * rank, d, as_int(weight.shape[-1]), packed)

    def flipped(f: Expr, c: Expr, rs: list[Expr]) -> Expr:
        ch = c if groups == 1 else (f // kg) * cg + c
        return weight[(ch, f if groups == 1 else f % kg, *(t - 1 - r for t, r in zip(taps, rs, strict=True)))]

    return conv_stage(src, weight, out, (1,) * rank, d, groups, flipped)


def _phased(data: Tensor, weight: Tensor, out: Ints, s: Ints, p: Ints, groups: int) -> Tensor:
    """Stages ``pad``, ``conv`` (every phase's convolution) and ``interleave`` (the output) of a
    transposed convolution without dilation (see the module)."""
    x, w = static_shape(data.shape), _kernel_shape(data, weight)
    rank, taps = len(s), w[2:]
    many = tuple(-(-taps[i] // s[i]) for i in range(rank))  # taps per phase, at most
    first = tuple(p[i] // s[i] for i in range(rank))  # the first q an output has
    count = tuple((p[i] + out[2 + i] - 1) // s[i] - first[i] + 1 for i in range(rank))
    extent = tuple(first[i] + count[i] + many[i] - 1 for i in range(rank))
    front = tuple(m - 1 for m in many)
    needs_pad = any(front) or extent != x[2:]
    src = pad_spatial(data, front, extent, 0.0) if needs_pad else data
    kg, cg = w[1], x[1] // groups
    rc = te.reduce_axis(cg, "rc")
    ms = [te.reduce_axis(m, f"m{i}") for i, m in enumerate(many)]
    zero = te.const(0.0, data.dtype)

    def summed(n: Expr, ch: Expr, ix: Sequence[Expr], read: Callable[[list[Expr]], Expr]) -> Expr:
        phases, qs = ix[:rank], ix[rank:]
        tap = [ph + m.var * si for ph, m, si in zip(phases, ms, s, strict=True)]
        partial = [i for i in range(rank) if taps[i] % s[i]]  # some phases have fewer taps
        safe = [te.min(t, te.const(taps[i] - 1, "int32")) if i in partial else t for i, t in enumerate(tap)]
        at = [q + (first[i] + front[i]) - ms[i].var for i, q in enumerate(qs)]
        value = src[(n, ch, *at)] * read(safe)
        if partial:
            value = te.if_then_else(te.all(*(tap[i] < taps[i] for i in partial)), value, zero)
        return te.sum(value, axis=[rc, *ms])

    def phase(n: Expr, f: Expr, *ix: Expr) -> Expr:
        ch = rc.var if groups == 1 else (f // kg) * cg + rc.var
        return summed(n, ch, ix, lambda t: weight[(ch, f if groups == 1 else f % kg, *t)])

    shape = (*out[:2], *s, *count)
    if is_packed(x, static_shape(weight.shape)):  # (K/b, C, *taps, b): vectors of output channels
        conv = blocked(shape, as_int(weight.shape[-1]), lambda n, fo, fi, ix: summed(
            n, rc.var, ix, lambda t: weight[(fo, rc.var, *t, fi)]))
    else:
        conv = te.compute(shape, phase, name="conv")

    def interleave(n: Expr, f: Expr, *o: Expr) -> Expr:
        moved = [oi + p[i] if p[i] else oi for i, oi in enumerate(o)]
        qs = [m // si - q0 if q0 else m // si for m, si, q0 in zip(moved, s, first, strict=True)]
        return conv[(n, f, *(m % si for m, si in zip(moved, s, strict=True)), *qs)]

    return te.compute(out, interleave, name="interleave")


@workload("fused_conv_transpose", reference=_transposed_ref, flops=_transposed_flops)
def fused_conv_transpose(
    shape: str, kernel: str, strides: str, pads: str, output_padding: str, dilations: str, groups: int = 1,
    epilogue: str = "", dtype: str = "float32",
) -> list[Tensor]:
    """Transposed convolution (ONNX ConvTranspose) of data(shape: N, C, *spatial) with
    kernel(C, K/groups, *taps), then the epilogue; stages pad, conv and (strided, no dilation)
    interleave, then one per epilogue step (see the module). A kernel of one axis more is packed,
    (K/b, C, *taps, b), one group only: conv is then read from stage conv_blk (:mod:`.conv_packed`)."""
    x, w, s, p, d = conv_geometry("fused_conv_transpose", shape, kernel, strides, pads, dilations, True)
    extra = int_list(output_padding, "fused_conv_transpose: output_padding")
    out = _transposed_out(x, w, s, p, extra, d, groups)
    given = dims(kernel)
    if is_packed(x, given) and groups != 1:
        raise ValueError(f"fused_conv_transpose: a packed kernel {kernel!r} needs groups 1, got {groups}")
    data = te.placeholder(x, dtype, name="data")
    weight = te.placeholder(given, dtype, name="kernel")
    phased = max(s) > 1 and max(d) == 1
    conv = _phased(data, weight, out, s, p, groups) if phased else _spread(data, weight, out, s, p, d, groups)
    extras, result = epi.build(conv, epilogue, 1)
    return [data, weight, *extras, result]


def conv_transpose_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """The default schedule of ``fused_conv_transpose``: with phases, :func:`.layers_conv.tile_conv_nd`
    over the phases' convolution (its accumulator tile in registers, computed once; with a packed
    kernel :func:`.conv_packed.tile_blocked_root`), then the output's rows parallel and vectorized
    with the interleaving and the epilogue inlined into them; else :func:`.layers_conv.conv_nd_cpu`."""
    s = epi.inline_default(tensors, target)
    out = tensors[-1]
    if "interleave" not in s.stages:
        return conv_nd_cpu(tensors, target)
    conv = s.stages["conv"].op.output(0)
    if "conv_blk" in s.stages:  # a packed kernel: the phases' blocked stage in register tiles
        s[conv].compute_inline()
        tile_blocked_root(s, s.stages["conv_blk"].op.output(0), target)
    else:
        tile_conv_nd(s, conv, s.cache_write(conv, "local"), target)
    if out.op.name != "interleave":
        s[s.stages["interleave"].op.output(0)].compute_inline()
    vectorize_rows(s, out, target)
    return s


SCHEDULES["fused_conv_transpose"] = conv_transpose_cpu
