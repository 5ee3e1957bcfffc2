"""Random LEGAL schedules for hypothesis tests: matmul and conv2d_nchw on small random shapes.

Each ``draw_*`` function takes hypothesis' interactive ``draw`` (from ``st.data()``), picks a
workload shape (non-dividing and prime sizes included), then applies random te-style primitives
that are legal in the state the schedule is in: splits by a factor or a number of parts (possibly
larger than the extent), permutations of the current loops, fuses of adjacent loops of one kind,
vectorize/unroll of random loops, parallel of the outermost data loop, optional cache_write (and
cache_read packing for matmul) computed at a random loop of the output, and inline / compute_at
of the padding stage for conv2d.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

import autosched as asc

Draw = Callable[..., Any]

SIZES = st.sampled_from([1, 2, 3, 4, 5, 7, 8, 11, 13, 16, 17])
FACTORS = st.integers(min_value=1, max_value=24)


def leaf_names(stage: asc.Stage) -> list[str]:
    return [iv.name for iv in stage.leaf_itervars()]


def kind(stage: asc.Stage, axis: str) -> str:
    """"data" or "reduce", from the leaf itervars' kinds."""
    return next(iv.kind for iv in stage.leaf_itervars() if iv.name == axis)


def draw_loop_steps(draw: Draw, stage: asc.Stage, max_steps: int = 5) -> None:
    """Random splits, reorders and fuses of ``stage``'s current loops."""
    for _ in range(draw(st.integers(0, max_steps), label=f"{stage.name}: number of loop steps")):
        leaves = leaf_names(stage)
        what = draw(st.sampled_from(["split", "split", "reorder", "fuse"]), label="step")
        if what == "split":
            axis = draw(st.sampled_from(leaves), label="split axis")
            if draw(st.booleans(), label="by factor"):
                stage.split(axis, factor=draw(FACTORS, label="factor"))
            else:
                stage.split(axis, nparts=draw(FACTORS, label="nparts"))
        elif what == "reorder":
            subset = draw(st.lists(st.sampled_from(leaves), min_size=1, unique=True), label="reorder subset")
            stage.reorder(*draw(st.permutations(subset), label="order"))
        else:
            pairs = [(a, b) for a, b in zip(leaves, leaves[1:], strict=False)
                     if kind(stage, a) == kind(stage, b)]
            if pairs:
                a, b = draw(st.sampled_from(pairs), label="fuse pair")
                stage.fuse(a, b)


def draw_annotations(draw: Draw, stage: asc.Stage, allow_parallel: bool) -> None:
    """Maybe vectorize a data loop, unroll a loop, parallelize the outermost data loop."""
    leaves = leaf_names(stage)
    data = [a for a in leaves if kind(stage, a) == "data"]
    annotated: set[str] = set()
    if data and draw(st.booleans(), label=f"{stage.name}: vectorize?"):
        # mostly the innermost data loop, sometimes any data loop
        axis = data[-1] if draw(st.booleans(), label="innermost") else draw(st.sampled_from(data))
        stage.vectorize(axis)
        annotated.add(axis)
    free = [a for a in leaves if a not in annotated]
    if free and draw(st.booleans(), label=f"{stage.name}: unroll?"):
        axis = draw(st.sampled_from(free), label="unroll axis")
        stage.unroll(axis)
        annotated.add(axis)
    outer = leaves[0]
    if (allow_parallel and kind(stage, outer) == "data" and outer not in annotated
            and draw(st.booleans(), label=f"{stage.name}: parallel outermost?")):
        stage.parallel(outer)
    if draw(st.booleans(), label=f"{stage.name}: auto_unroll pragma?"):
        axis = draw(st.sampled_from(leaves), label="pragma axis")
        stage.pragma(axis, "auto_unroll_max_step", draw(st.sampled_from([0, 4, 16, 64])))


def draw_matmul(draw: Draw) -> tuple[asc.Workload, asc.Schedule, str]:
    """A random legal schedule of a random small matmul; returns (workload, schedule, target)."""
    M, N, K = draw(SIZES, label="M"), draw(SIZES, label="N"), draw(SIZES, label="K")
    transpose_b = draw(st.booleans(), label="transpose_b")
    wl = asc.get_workload("matmul", (M, N, K, "float32", transpose_b))
    A, B, C = wl.tensors()
    s = asc.create_schedule(C)
    CC = s.cache_write(C, "local") if draw(st.booleans(), label="cache_write?") else None
    BL = None
    if draw(st.booleans(), label="pack B?"):
        BL = s.cache_read(B, "local", [CC if CC is not None else C])
    draw_loop_steps(draw, s[C])
    cc_pos = len(leaf_names(s[C])) - 1
    if CC is not None:
        cc_pos = draw(st.integers(0, len(leaf_names(s[C])) - 1), label="C.local at loop #")
        s[CC].compute_at(s[C], leaf_names(s[C])[cc_pos])
        draw_loop_steps(draw, s[CC], max_steps=3)
        draw_annotations(draw, s[CC], allow_parallel=False)
    if BL is not None:
        # at a loop of C that encloses C.local's loop, or at a loop of C.local
        if CC is not None and draw(st.booleans(), label="B.local at a C.local loop?"):
            s[BL].compute_at(s[CC], draw(st.sampled_from(leaf_names(s[CC])), label="B.local loop"))
        else:
            pos = draw(st.integers(0, cc_pos), label="B.local at loop #")
            s[BL].compute_at(s[C], leaf_names(s[C])[pos])
    draw_annotations(draw, s[C], allow_parallel=True)
    threads = draw(st.sampled_from([1, 2]), label="threads")
    return wl, s, f"c -num-threads={threads}"


@st.composite
def conv_shapes(draw: Draw) -> tuple[int, ...]:
    N = draw(st.integers(1, 2))
    C = draw(st.integers(1, 4))
    H = draw(st.integers(3, 12))
    W = draw(st.integers(3, 12))
    K = draw(st.integers(1, 5))
    R = draw(st.integers(1, 3))
    S = draw(st.integers(1, 3))
    stride = draw(st.integers(1, 2))
    pad = draw(st.integers(0, 2))
    dilation = draw(st.integers(1, 2))
    fits = all(n + 2 * pad - dilation * (k - 1) - 1 >= 0 for n, k in ((H, R), (W, S)))
    if not fits:
        R = S = 1
    return (N, C, H, W, K, R, S, stride, pad, dilation)


def draw_conv2d(draw: Draw) -> tuple[asc.Workload, asc.Schedule, str]:
    """A random legal schedule of a random small conv2d_nchw; returns (workload, schedule, target)."""
    args = draw(conv_shapes(), label="conv2d_nchw args")
    wl = asc.get_workload("conv2d_nchw", args)
    (out,) = wl.outputs
    s = asc.create_schedule(out)
    CL = s.cache_write(out, "local") if draw(st.booleans(), label="cache_write?") else None
    draw_loop_steps(draw, s[out])
    cl_pos = len(leaf_names(s[out])) - 1
    if CL is not None:
        cl_pos = draw(st.integers(0, len(leaf_names(s[out])) - 1), label="conv.local at loop #")
        s[CL].compute_at(s[out], leaf_names(s[out])[cl_pos])
        draw_loop_steps(draw, s[CL], max_steps=3)
        draw_annotations(draw, s[CL], allow_parallel=False)
    if "pad" in s.stages:
        pad = s.stages["pad"]
        where = draw(st.sampled_from(["root", "inline", "at"]), label="pad")
        if where == "inline":
            pad.compute_inline()
        elif where == "at":
            if CL is not None and draw(st.booleans(), label="pad at a conv.local loop?"):
                pad.compute_at(s[CL], draw(st.sampled_from(leaf_names(s[CL])), label="pad loop"))
            else:
                pos = draw(st.integers(0, cl_pos), label="pad at loop #")
                pad.compute_at(s[out], leaf_names(s[out])[pos])
            if draw(st.booleans(), label="pad loop steps?"):
                draw_loop_steps(draw, pad, max_steps=2)
                draw_annotations(draw, pad, allow_parallel=False)
    draw_annotations(draw, s[out], allow_parallel=True)
    threads = draw(st.sampled_from([1, 2]), label="threads")
    return wl, s, f"c -num-threads={threads}"


DRAWERS = {"matmul": draw_matmul, "conv2d_nchw": draw_conv2d}
