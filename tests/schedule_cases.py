"""Hand-written schedules for every built-in operator, shared by the schedule and replay tests.

A :class:`Recipe` is a function ``apply(s, wl)`` that schedules a fresh ``create_schedule`` of the
workload's outputs with the te-style primitives, plus the target it is meant for and a predicate
on the workload arguments (e.g. "has a ``pad`` stage"). :data:`CASES` crosses every recipe with the
shapes of its operator in :data:`SHAPES`: shapes that divide the tile sizes and shapes that do not
(primes, 1, extents smaller than the split factors).

:func:`check_against_reference` builds a schedule, runs it on random inputs and compares every
output with the workload's independent numpy reference.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from graph_schedule_cases import NETWORK_RECIPES, NETWORK_SHAPES
from lowp_schedule_cases import LOWP_RECIPES, LOWP_SHAPES
from repro import reproducible

import autosched as asc
from autosched.space.templates import instantiate, template_space

Apply = Callable[[asc.Schedule, asc.Workload], None]
Args = tuple[Any, ...]


def _always(args: Args) -> bool:
    return True


@dataclass(frozen=True)
class Recipe:
    op: str
    name: str
    apply: Apply
    target: str = "c"
    when: Callable[[Args], bool] = _always


RECIPES: list[Recipe] = []


def recipe(op: str, name: str, target: str = "c",
           when: Callable[[Args], bool] = _always) -> Callable[[Apply], Apply]:
    def register(fn: Apply) -> Apply:
        RECIPES.append(Recipe(op, name, fn, target, when))
        return fn

    return register


# Shapes per operator: (id, args). "even" shapes divide the tile sizes used below; the others do
# not (primes, 1, extents smaller than a split factor, strides, dilation).
SHAPES: dict[str, list[tuple[str, Args]]] = {
    "matmul": [
        ("even", (32, 32, 16)),
        ("odd", (127, 255, 63)),
        ("thin", (1, 33, 17)),
        ("f64", (17, 20, 9, "float64")),
        ("tb", (20, 12, 10, "float32", True)),
        ("i32", (9, 7, 5, "int32")),
    ],
    "batch_matmul": [("even", (2, 16, 16, 8)), ("odd", (3, 13, 17, 7))],
    "dense": [("even", (16, 32, 16)), ("odd", (7, 13, 19))],
    # (N, C, H, W, K, R, S, stride, pad, dilation)
    "conv2d_nchw": [
        ("even", (1, 4, 8, 8, 8, 3, 3, 1, 1, 1)),
        ("odd", (1, 3, 13, 13, 5, 3, 3, 2, 1, 2)),
        ("nopad", (2, 3, 9, 7, 4, 3, 2, 1, 0, 1)),
        ("i32", (1, 3, 9, 9, 4, 3, 3, 2, 2, 1, "int32")),
    ],
    # (N, H, W, C, K, R, S, stride, pad, dilation)
    "conv2d_nhwc": [
        ("even", (1, 8, 8, 4, 8, 3, 3, 1, 1, 1)),
        ("odd", (1, 13, 13, 3, 5, 3, 3, 2, 1, 2)),
        ("nopad", (2, 7, 9, 3, 4, 2, 3, 1, 0, 1)),
    ],
    # (N, C, H, W, R, S, stride, pad, dilation)
    "depthwise_conv2d_nchw": [
        ("even", (1, 4, 8, 8, 3, 3, 1, 1, 1)),
        ("odd", (1, 5, 13, 13, 3, 3, 2, 1, 2)),
        ("nopad", (2, 3, 7, 9, 3, 2, 1, 0, 1)),
    ],
    # (N, C, H, W, kernel, stride, pad)
    "max_pool2d": [
        ("even", (1, 4, 8, 8, 2, 2, 0)),
        ("odd", (2, 3, 13, 13, 3, 2, 1)),
        ("i32", (1, 2, 9, 9, 3, 2, 1, "int32")),
    ],
    "avg_pool2d": [("even", (1, 4, 8, 8, 2, 2, 0)), ("odd", (2, 3, 13, 11, 3, 2, 1))],
    "softmax": [("even", (8, 16)), ("odd", (7, 13)), ("row", (1, 33))],
    "relu": [("even", (16, 32)), ("odd", (7, 13)), ("i32", (5, 19, "int32")), ("f64", (9, 10, "float64"))],
    "add": [("even", (16, 32)), ("odd", (7, 13)), ("i32", (5, 19, "int32")), ("f64", (9, 10, "float64"))],
}

PAD_INDEX = {"conv2d_nchw": 8, "conv2d_nhwc": 8, "depthwise_conv2d_nchw": 7, "max_pool2d": 6, "avg_pool2d": 6}


def has_pad(op: str) -> Callable[[Args], bool]:
    return lambda args: args[PAD_INDEX[op]] > 0


def out_stage(s: asc.Schedule, wl: asc.Workload) -> asc.Stage:
    return s[wl.outputs[0]]


# ------------------------------------------------------------------------------ matmul


@recipe("matmul", "default")
def _mm_default(s: asc.Schedule, wl: asc.Workload) -> None:
    pass


@recipe("matmul", "tile_reorder")
def _mm_tile(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    io, jo, ii, ji = C.tile(i, j, 8, 8)
    C.reorder(io, jo, k, ii, ji)


@recipe("matmul", "vectorize_inner")
def _mm_vec(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    jo, ji = C.split(j, factor=8)
    C.reorder(i, jo, k, ji)
    C.vectorize(ji)


@recipe("matmul", "unroll_k")
def _mm_unroll(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    (k,) = C.op.reduce_axis
    ko, ki = C.split(k, factor=4)
    C.unroll(ki)


@recipe("matmul", "parallel_fused", target="c -num-threads=2")
def _mm_parallel(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    io, jo, ii, ji = C.tile(i, j, 8, 8)
    C.reorder(io, jo, k, ii, ji)
    fused = C.fuse(io, jo)
    C.parallel(fused)
    C.vectorize(ji)


@recipe("matmul", "nparts")
def _mm_nparts(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    io, ii = C.split(i, nparts=3)
    jo, ji = C.split(j, nparts=4)
    C.reorder(io, jo, ii, k, ji)


@recipe("matmul", "auto_unroll")
def _mm_pragma(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    io, jo, ii, ji = C.tile(i, j, 4, 4)
    ko, ki = C.split(k, factor=2)
    C.reorder(io, jo, ko, ki, ii, ji)
    C.pragma(jo, "auto_unroll_max_step", 32)


@recipe("matmul", "cache_write")
def _mm_cache_write(s: asc.Schedule, wl: asc.Workload) -> None:
    (Ct,) = wl.outputs
    CC = s.cache_write(Ct, "local")
    C = s[Ct]
    i, j = C.op.axis
    io, jo, ii, ji = C.tile(i, j, 8, 8)
    s[CC].compute_at(C, jo)
    ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(ck, factor=4)
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].unroll(ki)
    s[CC].vectorize(cj)


@recipe("matmul", "cache_read_pack")
def _mm_cache_read(s: asc.Schedule, wl: asc.Workload) -> None:
    A, B, Ct = wl.tensors()
    BL = s.cache_read(B, "local", [Ct])
    C = s[Ct]
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    io, jo, ii, ji = C.tile(i, j, 8, 8)
    C.reorder(io, jo, k, ii, ji)
    s[BL].compute_at(C, jo)
    C.vectorize(ji)


@recipe("matmul", "cache_write_and_pack")
def _mm_cache_both(s: asc.Schedule, wl: asc.Workload) -> None:
    A, B, Ct = wl.tensors()
    CC = s.cache_write(Ct, "local")
    BL = s.cache_read(B, "local", [CC])
    C = s[Ct]
    i, j = C.op.axis
    io, jo, ii, ji = C.tile(i, j, 4, 8)
    s[CC].compute_at(C, jo)
    s[BL].compute_at(C, jo)
    ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    s[CC].reorder(ck, ci, cj)
    s[CC].vectorize(cj)
    C.parallel(io)


@recipe("matmul", "pack_b_at_k")
def _mm_pack_at_k(s: asc.Schedule, wl: asc.Workload) -> None:
    A, B, Ct = wl.tensors()
    BL = s.cache_read(B, "local", [Ct])
    C = s[Ct]
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    jo, ji = C.split(j, factor=8)
    C.reorder(jo, k, i, ji)
    s[BL].compute_at(C, k)


@recipe("matmul", "pack_a_at_row_tile")
def _mm_pack_a(s: asc.Schedule, wl: asc.Workload) -> None:
    A, B, Ct = wl.tensors()
    AL = s.cache_read(A, "local", [Ct])
    C = s[Ct]
    i, j = C.op.axis
    io, jo, ii, ji = C.tile(i, j, 4, 4)
    s[AL].compute_at(C, io)


@recipe("matmul", "cache_write_at_fused_parallel", target="c -num-threads=2")
def _mm_cw_fused(s: asc.Schedule, wl: asc.Workload) -> None:
    (Ct,) = wl.outputs
    CC = s.cache_write(Ct, "local")
    C = s[Ct]
    i, j = C.op.axis
    io, jo, ii, ji = C.tile(i, j, 4, 8)
    fused = C.fuse(io, jo)
    C.parallel(fused)
    s[CC].compute_at(C, fused)


@recipe("matmul", "cache_write_at_inner")
def _mm_cw_inner(s: asc.Schedule, wl: asc.Workload) -> None:
    (Ct,) = wl.outputs
    CC = s.cache_write(Ct, "local")
    C = s[Ct]
    i, j = C.op.axis
    io, jo, ii, ji = C.tile(i, j, 4, 8)
    s[CC].compute_at(C, ii)


@recipe("matmul", "vectorize_strided_i")
def _mm_vec_i(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    io, ii = C.split(i, factor=4)
    C.reorder(io, j, k, ii)
    C.vectorize(ii)


@recipe("matmul", "unroll_whole_loops")
def _mm_unroll_all(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    jo, ji = C.split(j, factor=4)
    C.reorder(i, jo, k, ji)
    C.unroll(k)
    C.unroll(ji)


@recipe("matmul", "rfactor_split")
def _mm_rfactor(s: asc.Schedule, wl: asc.Workload) -> None:
    (Ct,) = wl.outputs
    (k,) = s[Ct].op.reduce_axis
    ko, ki = s[Ct].split(k, factor=4)
    s.rfactor(Ct, ki)


@recipe("matmul", "rfactor_outer_at")
def _mm_rfactor_at(s: asc.Schedule, wl: asc.Workload) -> None:
    (Ct,) = wl.outputs
    (k,) = s[Ct].op.reduce_axis
    ko, ki = s[Ct].split(k, nparts=4)
    CF = s.rfactor(Ct, ko, factor_axis=2)
    C = s[Ct]
    i, j = C.op.axis
    s[CF].compute_at(C, j)


@recipe("matmul", "rfactor_vectorize_partials")
def _mm_rfactor_vec(s: asc.Schedule, wl: asc.Workload) -> None:
    (Ct,) = wl.outputs
    (k,) = s[Ct].op.reduce_axis
    ko, ki = s[Ct].split(k, factor=8)
    CF = s.rfactor(Ct, ki)
    C = s[Ct]
    ci, cj = C.op.axis
    s[CF].compute_at(C, cj)
    kv, fi, fj = s[CF].op.axis
    s[CF].vectorize(kv)


@recipe("matmul", "rfactor_root")
def _mm_rfactor_root(s: asc.Schedule, wl: asc.Workload) -> None:
    (Ct,) = wl.outputs
    (k,) = s[Ct].op.reduce_axis
    CF = s.rfactor(Ct, k)
    kv, i, j = s[CF].op.axis
    s[CF].vectorize(j)


@recipe("matmul", "factor_exceeds_extent")
def _mm_big_factor(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    io, ii = C.split(i, factor=300)
    ko, ki = C.split(k, nparts=100)
    jo, ji = C.split(j, nparts=1)
    C.reorder(io, jo, ko, ii, ki, ji)


for _vb in (16, 32, 64):

    @recipe("matmul", f"vector_bytes{_vb}", target=f"c -vector-bytes={_vb}")
    def _mm_vector_bytes(s: asc.Schedule, wl: asc.Workload) -> None:
        C = out_stage(s, wl)
        i, j = C.op.axis
        (k,) = C.op.reduce_axis
        jo, ji = C.split(j, factor=16)
        C.reorder(jo, i, k, ji)
        C.vectorize(ji)


# ------------------------------------------------------------------------------ batch_matmul


@recipe("batch_matmul", "default")
def _bmm_default(s: asc.Schedule, wl: asc.Workload) -> None:
    pass


@recipe("batch_matmul", "tile_reorder")
def _bmm_tile(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    b, i, j = C.op.axis
    (k,) = C.op.reduce_axis
    io, jo, ii, ji = C.tile(i, j, 4, 8)
    C.reorder(b, io, jo, k, ii, ji)


@recipe("batch_matmul", "parallel_vectorize", target="c -num-threads=2")
def _bmm_parallel(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    b, i, j = C.op.axis
    (k,) = C.op.reduce_axis
    io, jo, ii, ji = C.tile(i, j, 4, 8)
    C.reorder(b, io, jo, k, ii, ji)
    C.parallel(C.fuse(b, io))
    C.vectorize(ji)


@recipe("batch_matmul", "unroll")
def _bmm_unroll(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    b, i, j = C.op.axis
    (k,) = C.op.reduce_axis
    ko, ki = C.split(k, factor=2)
    C.unroll(ki)
    C.unroll(b)


@recipe("batch_matmul", "cache_write")
def _bmm_cache_write(s: asc.Schedule, wl: asc.Workload) -> None:
    (Ct,) = wl.outputs
    CC = s.cache_write(Ct, "local")
    C = s[Ct]
    b, i, j = C.op.axis
    io, jo, ii, ji = C.tile(i, j, 4, 8)
    s[CC].compute_at(C, jo)
    cb, ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    s[CC].reorder(cb, ck, ci, cj)
    s[CC].vectorize(cj)


@recipe("batch_matmul", "rfactor")
def _bmm_rfactor(s: asc.Schedule, wl: asc.Workload) -> None:
    (Ct,) = wl.outputs
    (k,) = s[Ct].op.reduce_axis
    ko, ki = s[Ct].split(k, factor=3)
    s.rfactor(Ct, ki, factor_axis=1)


@recipe("batch_matmul", "nparts_pragma")
def _bmm_nparts(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    b, i, j = C.op.axis
    io, ii = C.split(i, nparts=2)
    C.pragma(io, "auto_unroll_max_step", 64)


# ------------------------------------------------------------------------------ dense


@recipe("dense", "default")
def _dense_default(s: asc.Schedule, wl: asc.Workload) -> None:
    pass


@recipe("dense", "dense_at_out_tile")
def _dense_at_tile(s: asc.Schedule, wl: asc.Workload) -> None:
    OUT = out_stage(s, wl)
    D = s.stages["dense"]
    i, j = OUT.op.axis
    io, jo, ii, ji = OUT.tile(i, j, 4, 8)
    D.compute_at(OUT, jo)
    di, dj = D.op.axis
    (dk,) = D.op.reduce_axis
    D.reorder(dk, di, dj)
    D.vectorize(dj)
    OUT.vectorize(ji)


@recipe("dense", "dense_at_out_row_parallel", target="c -num-threads=2")
def _dense_at_row(s: asc.Schedule, wl: asc.Workload) -> None:
    OUT = out_stage(s, wl)
    D = s.stages["dense"]
    i, j = OUT.op.axis
    D.compute_at(OUT, i)
    OUT.parallel(i)
    jo, ji = OUT.split(j, factor=4)
    OUT.vectorize(ji)


@recipe("dense", "dense_tiled_root")
def _dense_root_tiled(s: asc.Schedule, wl: asc.Workload) -> None:
    D = s.stages["dense"]
    OUT = out_stage(s, wl)
    i, j = D.op.axis
    (k,) = D.op.reduce_axis
    io, jo, ii, ji = D.tile(i, j, 4, 4)
    D.reorder(io, jo, k, ii, ji)
    D.unroll(ii)
    D.vectorize(ji)
    oi, oj = OUT.op.axis
    OUT.fuse(oi, oj)


@recipe("dense", "cache_write_dense")
def _dense_cache_write(s: asc.Schedule, wl: asc.Workload) -> None:
    D = s.stages["dense"]
    DL = s.cache_write(D.op.output(0), "local")
    D = s.stages["dense"]
    i, j = D.op.axis
    io, jo, ii, ji = D.tile(i, j, 4, 8)
    s[DL].compute_at(D, jo)
    li, lj = s[DL].op.axis
    (lk,) = s[DL].op.reduce_axis
    s[DL].reorder(lk, li, lj)
    s[DL].vectorize(lj)


@recipe("dense", "cache_write_then_inline_copy")
def _dense_cw_inline(s: asc.Schedule, wl: asc.Workload) -> None:
    DL = s.cache_write(s.stages["dense"].op.output(0), "local")
    s.stages["dense"].compute_inline()
    OUT = out_stage(s, wl)
    i, j = OUT.op.axis
    io, jo, ii, ji = OUT.tile(i, j, 4, 4)
    s[DL].compute_at(OUT, jo)


@recipe("dense", "rfactor")
def _dense_rfactor(s: asc.Schedule, wl: asc.Workload) -> None:
    D = s.stages["dense"]
    (k,) = D.op.reduce_axis
    ko, ki = D.split(k, factor=4)
    s.rfactor(D.op.output(0), ki)


@recipe("dense", "unroll_pragma")
def _dense_unroll(s: asc.Schedule, wl: asc.Workload) -> None:
    D = s.stages["dense"]
    i, j = D.op.axis
    (k,) = D.op.reduce_axis
    ko, ki = D.split(k, factor=4)
    D.unroll(ki)
    OUT = out_stage(s, wl)
    oi, oj = OUT.op.axis
    OUT.pragma(oi, "auto_unroll_max_step", 16)


# ------------------------------------------------------------------------------ conv2d_nchw


@recipe("conv2d_nchw", "default")
def _cn_default(s: asc.Schedule, wl: asc.Workload) -> None:
    pass


@recipe("conv2d_nchw", "tile_reorder")
def _cn_tile(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    n, f, y, x = C.op.axis
    rc, ry, rx = C.op.reduce_axis
    yo, xo, yi, xi = C.tile(y, x, 4, 4)
    C.reorder(n, f, yo, xo, rc, ry, rx, yi, xi)


@recipe("conv2d_nchw", "vectorize_x")
def _cn_vec(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    n, f, y, x = C.op.axis
    rc, ry, rx = C.op.reduce_axis
    xo, xi = C.split(x, factor=4)
    C.reorder(n, f, y, xo, rc, ry, rx, xi)
    C.vectorize(xi)


@recipe("conv2d_nchw", "unroll_taps")
def _cn_unroll(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    rc, ry, rx = C.op.reduce_axis
    C.unroll(ry)
    C.unroll(rx)


@recipe("conv2d_nchw", "parallel_fused", target="c -num-threads=2")
def _cn_parallel(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    n, f, y, x = C.op.axis
    C.parallel(C.fuse(n, f, y))


@recipe("conv2d_nchw", "pad_inline", when=has_pad("conv2d_nchw"))
def _cn_pad_inline(s: asc.Schedule, wl: asc.Workload) -> None:
    s.stages["pad"].compute_inline()
    C = out_stage(s, wl)
    n, f, y, x = C.op.axis
    xo, xi = C.split(x, factor=4)
    C.vectorize(xi)


@recipe("conv2d_nchw", "pad_at_row", when=has_pad("conv2d_nchw"))
def _cn_pad_at_row(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    n, f, y, x = C.op.axis
    C.reorder(n, y, f, x)
    s.stages["pad"].compute_at(C, y)


@recipe("conv2d_nchw", "pad_at_tile", when=has_pad("conv2d_nchw"))
def _cn_pad_at_tile(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    n, f, y, x = C.op.axis
    yo, xo, yi, xi = C.tile(y, x, 4, 4)
    C.reorder(n, yo, xo, f, yi, xi)
    P = s.stages["pad"]
    P.compute_at(C, xo)
    pn, pc, ph, pw = P.op.axis
    P.vectorize(pw)


@recipe("conv2d_nchw", "pad_at_reduce_rc", when=has_pad("conv2d_nchw"))
def _cn_pad_at_rc(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    n, f, y, x = C.op.axis
    rc, ry, rx = C.op.reduce_axis
    C.reorder(n, f, rc, y, x, ry, rx)
    s.stages["pad"].compute_at(C, rc)


@recipe("conv2d_nchw", "pad_at_reduce_ry", when=has_pad("conv2d_nchw"))
def _cn_pad_at_ry(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    rc, ry, rx = C.op.reduce_axis
    s.stages["pad"].compute_at(C, ry)


@recipe("conv2d_nchw", "pad_at_fused", when=has_pad("conv2d_nchw"))
def _cn_pad_at_fused(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    n, f, y, x = C.op.axis
    C.reorder(n, y, x, f)
    s.stages["pad"].compute_at(C, C.fuse(y, x))


@recipe("conv2d_nchw", "pad_at_cache_write_stage", when=has_pad("conv2d_nchw"))
def _cn_pad_at_local(s: asc.Schedule, wl: asc.Workload) -> None:
    (Ct,) = wl.outputs
    CL = s.cache_write(Ct, "local")
    C = s[Ct]
    n, f, y, x = C.op.axis
    yo, xo, yi, xi = C.tile(y, x, 2, 4)
    s[CL].compute_at(C, xo)
    ln, lf, ly, lx = s[CL].op.axis
    rc, ry, rx = s[CL].op.reduce_axis
    s[CL].reorder(ln, rc, lf, ly, lx, ry, rx)
    s.stages["pad"].compute_at(s[CL], rc)


@recipe("conv2d_nchw", "split_and_fuse_reductions")
def _cn_split_reduce(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    n, f, y, x = C.op.axis
    rc, ry, rx = C.op.reduce_axis
    rco, rci = C.split(rc, factor=2)
    fo, fi = C.split(C.fuse(ry, rx), nparts=2)
    C.reorder(n, rco, fo, f, y, rci, fi, x)


@recipe("conv2d_nchw", "cache_write")
def _cn_cache_write(s: asc.Schedule, wl: asc.Workload) -> None:
    (Ct,) = wl.outputs
    CL = s.cache_write(Ct, "local")
    C = s[Ct]
    n, f, y, x = C.op.axis
    fo, fi = C.split(f, factor=4)
    xo, xi = C.split(x, factor=4)
    C.reorder(n, fo, y, xo, fi, xi)
    s[CL].compute_at(C, xo)
    ln, lf, ly, lx = s[CL].op.axis
    rc, ry, rx = s[CL].op.reduce_axis
    s[CL].reorder(ln, ly, rc, ry, rx, lf, lx)
    s[CL].vectorize(lx)


@recipe("conv2d_nchw", "pad_inline_cache_write", target="c -num-threads=2", when=has_pad("conv2d_nchw"))
def _cn_inline_cache_write(s: asc.Schedule, wl: asc.Workload) -> None:
    (Ct,) = wl.outputs
    s.stages["pad"].compute_inline()
    CL = s.cache_write(Ct, "local")
    C = s[Ct]
    n, f, y, x = C.op.axis
    yo, xo, yi, xi = C.tile(y, x, 2, 4)
    s[CL].compute_at(C, xo)
    C.parallel(C.fuse(n, f))
    rc, ry, rx = s[CL].op.reduce_axis
    s[CL].unroll(rx)


@recipe("conv2d_nchw", "rfactor_rc")
def _cn_rfactor(s: asc.Schedule, wl: asc.Workload) -> None:
    (Ct,) = wl.outputs
    rc, ry, rx = s[Ct].op.reduce_axis
    s.rfactor(Ct, rc)


@recipe("conv2d_nchw", "nparts_pragma")
def _cn_nparts(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    n, f, y, x = C.op.axis
    yo, yi = C.split(y, nparts=3)
    fo, fi = C.split(f, nparts=2)
    C.pragma(yo, "auto_unroll_max_step", 8)


# ------------------------------------------------------------------------------ conv2d_nhwc


@recipe("conv2d_nhwc", "default")
def _ch_default(s: asc.Schedule, wl: asc.Workload) -> None:
    pass


@recipe("conv2d_nhwc", "tile_reorder")
def _ch_tile(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    n, y, x, f = C.op.axis
    ry, rx, rc = C.op.reduce_axis
    yo, xo, yi, xi = C.tile(y, x, 4, 4)
    C.reorder(n, yo, xo, ry, rx, rc, yi, xi, f)


@recipe("conv2d_nhwc", "vectorize_f")
def _ch_vec(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    n, y, x, f = C.op.axis
    ry, rx, rc = C.op.reduce_axis
    C.reorder(n, y, x, ry, rx, rc, f)
    C.vectorize(f)


@recipe("conv2d_nhwc", "parallel_unroll", target="c -num-threads=2")
def _ch_parallel(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    n, y, x, f = C.op.axis
    ry, rx, rc = C.op.reduce_axis
    C.parallel(C.fuse(n, y))
    C.unroll(rx)


@recipe("conv2d_nhwc", "pad_inline", when=has_pad("conv2d_nhwc"))
def _ch_pad_inline(s: asc.Schedule, wl: asc.Workload) -> None:
    s.stages["pad"].compute_inline()


@recipe("conv2d_nhwc", "pad_at_row", when=has_pad("conv2d_nhwc"))
def _ch_pad_at_row(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    n, y, x, f = C.op.axis
    P = s.stages["pad"]
    P.compute_at(C, y)
    pn, ph, pw, pc = P.op.axis
    P.vectorize(pc)


@recipe("conv2d_nhwc", "cache_write")
def _ch_cache_write(s: asc.Schedule, wl: asc.Workload) -> None:
    (Ct,) = wl.outputs
    CL = s.cache_write(Ct, "local")
    C = s[Ct]
    n, y, x, f = C.op.axis
    xo, xi = C.split(x, factor=2)
    fo, fi = C.split(f, factor=4)
    C.reorder(n, y, xo, fo, xi, fi)
    s[CL].compute_at(C, fo)
    ln, ly, lx, lf = s[CL].op.axis
    ry, rx, rc = s[CL].op.reduce_axis
    s[CL].reorder(ln, ly, ry, rx, rc, lx, lf)
    s[CL].vectorize(lf)


@recipe("conv2d_nhwc", "nparts_pragma")
def _ch_nparts(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    n, y, x, f = C.op.axis
    xo, xi = C.split(x, nparts=2)
    C.pragma(xo, "auto_unroll_max_step", 16)


# ------------------------------------------------------------------------------ depthwise


@recipe("depthwise_conv2d_nchw", "default")
def _dw_default(s: asc.Schedule, wl: asc.Workload) -> None:
    pass


@recipe("depthwise_conv2d_nchw", "tile_vectorize")
def _dw_tile(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    n, c, y, x = C.op.axis
    ry, rx = C.op.reduce_axis
    yo, xo, yi, xi = C.tile(y, x, 2, 4)
    C.reorder(n, c, yo, xo, ry, rx, yi, xi)
    C.vectorize(xi)


@recipe("depthwise_conv2d_nchw", "parallel_unroll", target="c -num-threads=2")
def _dw_parallel(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    n, c, y, x = C.op.axis
    ry, rx = C.op.reduce_axis
    C.parallel(C.fuse(n, c))
    C.unroll(ry)
    C.unroll(rx)


@recipe("depthwise_conv2d_nchw", "pad_inline", when=has_pad("depthwise_conv2d_nchw"))
def _dw_pad_inline(s: asc.Schedule, wl: asc.Workload) -> None:
    s.stages["pad"].compute_inline()


@recipe("depthwise_conv2d_nchw", "pad_at_row", when=has_pad("depthwise_conv2d_nchw"))
def _dw_pad_at_row(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    n, c, y, x = C.op.axis
    s.stages["pad"].compute_at(C, y)


@recipe("depthwise_conv2d_nchw", "cache_write")
def _dw_cache_write(s: asc.Schedule, wl: asc.Workload) -> None:
    (Ct,) = wl.outputs
    CL = s.cache_write(Ct, "local")
    C = s[Ct]
    n, c, y, x = C.op.axis
    yo, xo, yi, xi = C.tile(y, x, 2, 4)
    s[CL].compute_at(C, xo)
    ln, lc, ly, lx = s[CL].op.axis
    ry, rx = s[CL].op.reduce_axis
    s[CL].reorder(ln, lc, ry, rx, ly, lx)
    s[CL].vectorize(lx)


@recipe("depthwise_conv2d_nchw", "nparts_pragma")
def _dw_nparts(s: asc.Schedule, wl: asc.Workload) -> None:
    C = out_stage(s, wl)
    n, c, y, x = C.op.axis
    co, ci = C.split(c, nparts=2)
    C.pragma(co, "auto_unroll_max_step", 64)


# ------------------------------------------------------------------------------ pooling


for _pool in ("max_pool2d", "avg_pool2d"):
    _red = "pool" if _pool == "max_pool2d" else "pool_sum"

    @recipe(_pool, "default")
    def _pool_default(s: asc.Schedule, wl: asc.Workload) -> None:
        pass

    @recipe(_pool, "tile_vectorize")
    def _pool_tile(s: asc.Schedule, wl: asc.Workload, _red: str = _red) -> None:
        P = s.stages[_red]
        n, c, y, x = P.op.axis
        ry, rx = P.op.reduce_axis
        yo, xo, yi, xi = P.tile(y, x, 2, 4)
        P.reorder(n, c, yo, xo, ry, rx, yi, xi)
        P.vectorize(xi)

    @recipe(_pool, "parallel_unroll", target="c -num-threads=2")
    def _pool_parallel(s: asc.Schedule, wl: asc.Workload, _red: str = _red) -> None:
        P = s.stages[_red]
        n, c, y, x = P.op.axis
        ry, rx = P.op.reduce_axis
        P.parallel(P.fuse(n, c))
        P.unroll(rx)

    @recipe(_pool, "pad_inline", when=has_pad(_pool))
    def _pool_pad_inline(s: asc.Schedule, wl: asc.Workload) -> None:
        s.stages["pad"].compute_inline()

    @recipe(_pool, "pad_at_row", when=has_pad(_pool))
    def _pool_pad_at_row(s: asc.Schedule, wl: asc.Workload, _red: str = _red) -> None:
        P = s.stages[_red]
        n, c, y, x = P.op.axis
        s.stages["pad"].compute_at(P, y)

    @recipe(_pool, "nparts_pragma")
    def _pool_nparts(s: asc.Schedule, wl: asc.Workload, _red: str = _red) -> None:
        P = s.stages[_red]
        n, c, y, x = P.op.axis
        yo, yi = P.split(y, nparts=3)
        P.pragma(yo, "auto_unroll_max_step", 16)


@recipe("max_pool2d", "vectorize_x_inside_taps")
def _maxpool_vec(s: asc.Schedule, wl: asc.Workload) -> None:
    P = s.stages["pool"]
    n, c, y, x = P.op.axis
    ry, rx = P.op.reduce_axis
    P.reorder(n, c, ry, rx, y, x)
    P.vectorize(x)


@recipe("avg_pool2d", "sum_at_out")
def _avg_sum_at(s: asc.Schedule, wl: asc.Workload) -> None:
    OUT = out_stage(s, wl)
    n, c, y, x = OUT.op.axis
    xo, xi = OUT.split(x, factor=4)
    s.stages["pool_sum"].compute_at(OUT, xo)
    OUT.vectorize(xi)


@recipe("avg_pool2d", "pad_and_sum_at_out", when=has_pad("avg_pool2d"))
def _avg_pad_sum_at(s: asc.Schedule, wl: asc.Workload) -> None:
    OUT = out_stage(s, wl)
    n, c, y, x = OUT.op.axis
    s.stages["pool_sum"].compute_at(OUT, y)
    s.stages["pad"].compute_at(OUT, y)


# ------------------------------------------------------------------------------ softmax


@recipe("softmax", "default")
def _sm_default(s: asc.Schedule, wl: asc.Workload) -> None:
    pass


@recipe("softmax", "reductions_at_rows")
def _sm_at_row(s: asc.Schedule, wl: asc.Workload) -> None:
    # expval has two consumers (expsum, softmax), so it stays at the root here
    E = s.stages["expval"]
    ei, ej = E.op.axis
    s.stages["maxelem"].compute_at(E, ei)
    OUT = out_stage(s, wl)
    i, j = OUT.op.axis
    s.stages["expsum"].compute_at(OUT, i)


@recipe("softmax", "maxelem_at_row")
def _sm_max_at_row(s: asc.Schedule, wl: asc.Workload) -> None:
    E = s.stages["expval"]
    i, j = E.op.axis
    s.stages["maxelem"].compute_at(E, i)


@recipe("softmax", "inline_expval")
def _sm_inline(s: asc.Schedule, wl: asc.Workload) -> None:
    # with expval inlined, maxelem is read by expsum and softmax: it stays at the root
    OUT = out_stage(s, wl)
    i, j = OUT.op.axis
    s.stages["expval"].compute_inline()
    s.stages["expsum"].compute_at(OUT, i)


@recipe("softmax", "vectorize")
def _sm_vec(s: asc.Schedule, wl: asc.Workload) -> None:
    OUT = out_stage(s, wl)
    i, j = OUT.op.axis
    jo, ji = OUT.split(j, factor=8)
    OUT.vectorize(ji)
    E = s.stages["expval"]
    ei, ej = E.op.axis
    ejo, eji = E.split(ej, factor=4)
    E.vectorize(eji)


@recipe("softmax", "parallel_rows", target="c -num-threads=2")
def _sm_parallel(s: asc.Schedule, wl: asc.Workload) -> None:
    OUT = out_stage(s, wl)
    i, j = OUT.op.axis
    s.stages["expval"].compute_inline()
    s.stages["expsum"].compute_at(OUT, i)
    OUT.parallel(i)
    jo, ji = OUT.split(j, factor=4)
    OUT.vectorize(ji)


@recipe("softmax", "rfactor")
def _sm_rfactor(s: asc.Schedule, wl: asc.Workload) -> None:
    for name in ("maxelem", "expsum"):
        st = s.stages[name]
        (k,) = st.op.reduce_axis
        ko, ki = st.split(k, factor=4)
        s.rfactor(st.op.output(0), ki)


@recipe("softmax", "rfactor_at_rows")
def _sm_rfactor_at(s: asc.Schedule, wl: asc.Workload) -> None:
    E = s.stages["expsum"]
    (k,) = E.op.reduce_axis
    ko, ki = E.split(k, factor=4)
    EF = s.rfactor(E.op.output(0), ki)
    E = s.stages["expsum"]
    s[EF].compute_at(E, E.op.axis[0])
    OUT = out_stage(s, wl)
    i, j = OUT.op.axis
    E.compute_at(OUT, i)


@recipe("softmax", "unroll_pragma")
def _sm_unroll(s: asc.Schedule, wl: asc.Workload) -> None:
    M = s.stages["maxelem"]
    (k,) = M.op.reduce_axis
    ko, ki = M.split(k, factor=4)
    M.unroll(ki)
    OUT = out_stage(s, wl)
    i, j = OUT.op.axis
    OUT.pragma(i, "auto_unroll_max_step", 16)


# ------------------------------------------------------------------------------ elementwise


for _ew in ("relu", "add"):

    @recipe(_ew, "default")
    def _ew_default(s: asc.Schedule, wl: asc.Workload) -> None:
        pass

    @recipe(_ew, "tile_reorder")
    def _ew_tile(s: asc.Schedule, wl: asc.Workload) -> None:
        OUT = out_stage(s, wl)
        i, j = OUT.op.axis
        io, jo, ii, ji = OUT.tile(i, j, 4, 8)
        OUT.reorder(jo, io, ii, ji)

    @recipe(_ew, "vectorize")
    def _ew_vec(s: asc.Schedule, wl: asc.Workload) -> None:
        OUT = out_stage(s, wl)
        i, j = OUT.op.axis
        jo, ji = OUT.split(j, factor=8)
        OUT.vectorize(ji)

    @recipe(_ew, "vectorize_whole_row")
    def _ew_vec_row(s: asc.Schedule, wl: asc.Workload) -> None:
        OUT = out_stage(s, wl)
        i, j = OUT.op.axis
        OUT.vectorize(j)

    @recipe(_ew, "vectorize_strided")
    def _ew_vec_strided(s: asc.Schedule, wl: asc.Workload) -> None:
        OUT = out_stage(s, wl)
        i, j = OUT.op.axis
        OUT.reorder(j, i)
        OUT.vectorize(i)

    @recipe(_ew, "unroll")
    def _ew_unroll(s: asc.Schedule, wl: asc.Workload) -> None:
        OUT = out_stage(s, wl)
        i, j = OUT.op.axis
        jo, ji = OUT.split(j, factor=4)
        OUT.unroll(ji)

    @recipe(_ew, "parallel_fused", target="c -num-threads=2")
    def _ew_parallel(s: asc.Schedule, wl: asc.Workload) -> None:
        OUT = out_stage(s, wl)
        i, j = OUT.op.axis
        fused = OUT.fuse(i, j)
        fo, fi = OUT.split(fused, factor=16)
        OUT.parallel(fo)
        OUT.vectorize(fi)

    @recipe(_ew, "nparts_pragma")
    def _ew_nparts(s: asc.Schedule, wl: asc.Workload) -> None:
        OUT = out_stage(s, wl)
        i, j = OUT.op.axis
        io, ii = OUT.split(i, nparts=3)
        OUT.pragma(io, "auto_unroll_max_step", 64)

    for _vb in (16, 32, 64):

        @recipe(_ew, f"vector_bytes{_vb}", target=f"c -vector-bytes={_vb}")
        def _ew_vector_bytes(s: asc.Schedule, wl: asc.Workload) -> None:
            OUT = out_stage(s, wl)
            i, j = OUT.op.axis
            jo, ji = OUT.split(j, factor=16)
            OUT.vectorize(ji)


# ------------------------------------------------------------------------------ cases and checks


@dataclass(frozen=True)
class Case:
    op: str
    shape_id: str
    args: Args
    recipe: Recipe

    @property
    def id(self) -> str:
        return f"{self.op}-{self.shape_id}-{self.recipe.name}"

    def workload(self) -> asc.Workload:
        return asc.get_workload(self.op, self.args)

    def schedule(self, wl: asc.Workload | None = None) -> tuple[asc.Workload, asc.Schedule]:
        wl = wl or self.workload()
        s = asc.create_schedule(wl.outputs)
        self.recipe.apply(s, wl)
        return wl, s


# the network workloads (autosched.graph): generic recipes, see graph_schedule_cases
RECIPES.extend(Recipe(op, name, fn) for op, name, fn in NETWORK_RECIPES)
SHAPES.update(NETWORK_SHAPES)
RECIPES.extend(Recipe(op, name, fn) for op, name, fn in LOWP_RECIPES)  # int8 / bf16 (lowp_schedule_cases)
SHAPES.update(LOWP_SHAPES)

CASES: list[Case] = [
    Case(r.op, sid, args, r)
    for r in RECIPES
    for sid, args in SHAPES[r.op]
    if r.when(args)
]


def reduction_size(wl: asc.Workload) -> int:
    """The largest number of terms any reduction of the workload's DAG combines."""
    s = asc.create_schedule(wl.outputs)
    size = 1
    for stage in s.stages.values():
        n = 1
        for iv in getattr(stage.op, "reduce_axis", ()):
            n *= iv.extent
        size = max(size, n)
    return size


def tolerances(wl: asc.Workload) -> dict[str, float]:
    dtype = wl.outputs[0].dtype
    red = reduction_size(wl)
    if dtype == "float64":
        return {"rtol": 1e-10, "atol": 1e-12 * red + 1e-12}
    if dtype.startswith("float"):
        return {"rtol": 1e-4, "atol": 1e-4 + 2e-6 * red}
    return {"rtol": 0.0, "atol": 0.0}


def fresh_outputs(wl: asc.Workload) -> list[np.ndarray]:
    """Output arrays filled with garbage, so that elements a kernel never writes are caught."""
    outs = []
    for t in wl.outputs:
        dt = np.dtype(t.dtype if t.dtype != "bool" else "uint8")
        fill = np.nan if dt.kind == "f" else 77
        outs.append(np.full(t.shape, fill, dtype=dt))
    return outs


def check_against_reference(wl: asc.Workload, s: asc.Schedule, target: str = "c", seed: int = 0,
                            args: list[Any] | None = None) -> None:
    """Build ``s``, run it on random inputs and compare every output with ``wl.reference``.

    A failure names the workload, the target, the inputs' seed and the schedule's steps (JSON)."""
    with reproducible(s.steps, workload=wl, target=target, inputs_seed=seed):
        tensors = args if args is not None else wl.tensors()
        f = asc.build(s, tensors, target=target)
        inputs = wl.random_inputs(seed)
        saved = [a.copy() for a in inputs]
        outs = fresh_outputs(wl)
        f(*inputs, *outs)
        for before, after in zip(saved, inputs, strict=True):
            np.testing.assert_array_equal(after, before, err_msg="the kernel wrote to an input")
        expected = wl.reference(*saved)
        tol = tolerances(wl)
        for t, got, want in zip(wl.outputs, outs, expected, strict=True):
            np.testing.assert_allclose(got, want, err_msg=f"output {t.name} of {wl}", **tol)


def check_template_samples(
    make: Callable[[], asc.Workload], target: str, count: int, seed: int = 2026
) -> None:
    """``count`` configs sampled from the knob template of ``make()``'s workload on ``target``,
    each built and checked against its reference, and replayed from JSON on a fresh DAG (another
    ``make()``) to the same source."""
    wl, fresh = make(), make()
    space = template_space(wl, target)
    for pos, cfg in enumerate(space.sample(np.random.default_rng(seed), count)):
        s = instantiate(wl, target, cfg)
        with reproducible(s.steps, seed=seed, sample=pos, config=cfg.to_dict()):
            source = asc.emit(s, wl.tensors(), target)
            steps = asc.steps_from_json(json.loads(json.dumps(asc.steps_to_json(s.steps))))
            assert asc.emit(asc.Schedule.replay(fresh.outputs, steps), fresh.tensors(), target) == source
            check_against_reference(wl, s, target)
