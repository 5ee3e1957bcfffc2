"""Hand-written CPU schedules of the memory-bound graph workloads: elementwise chains
(``fused_elementwise``), softmax over the last axis and layer norm.

Each one reads its input once and writes its output once, row by row: rows in parallel where the
tensor is large enough to pay for waking the threads, each row's loop vectorized (up to
:data:`ROW_VECTORS` vectors an iteration, the tail of a row in shorter vectors or scalar code),
the row reductions of softmax and layer norm factored into one vector of partial results per row
(rfactor), and the math functions (exp, erf, tanh) vectorized too (:mod:`autosched.emit_c.vector`).
"""

from __future__ import annotations

from ..expr import IterVar, Tensor, as_int
from ..ops.schedules import SCHEDULES
from ..schedule import Schedule, Stage, create_schedule
from ..target import Target
from . import epilogue as epi

#: vectors per iteration of a row's loop (a row of at most that many is one run of vector statements)
ROW_VECTORS = 4
#: elements of a tensor below which its kernel runs on one thread (waking the others costs more)
PARALLEL_ELEMENTS = 32768


def parallel_rows(stage: Stage, rows: IterVar, target: Target, elements: int, count: int) -> None:
    """Run the loop ``rows`` (``count`` rows of a tensor of ``elements``) of ``stage`` in parallel
    where the target has threads and the tensor has :data:`PARALLEL_ELEMENTS` or more."""
    if (target.num_threads or 1) > 1 and elements >= PARALLEL_ELEMENTS and count > 1:
        stage.parallel(rows)


def vectorize_row(stage: Stage, axis: IterVar, extent: int, lanes: int) -> None:
    """Vectorize the innermost loop ``axis`` (of ``extent``) of ``stage``: whole when it is at most
    :data:`ROW_VECTORS` vectors, else split by that many vectors (a serial outer loop, so that the
    lowering peels its partial last iteration off: whole vectors, then a scalar tail)."""
    width = lanes * ROW_VECTORS
    if extent <= width:
        stage.vectorize(axis)
        return
    _, inner = stage.split(axis, width)
    stage.vectorize(inner)


def _row_reduction(s: Schedule, red: Tensor, out: Stage, row: IterVar, lanes: int) -> None:
    """Compute the per-row reduction ``red`` (rows,) inside ``out``'s loop ``row``: its reduction
    split by ``lanes`` and factored into a vector of partial results, summed (or maxed) across
    the vector at the end of the row."""
    (k,) = s[red].op.reduce_axis
    s[red].compute_at(out, row)
    if as_int(k.extent) < 2 * lanes:
        return
    _, ki = s[red].split(k, lanes)
    rf = s.rfactor(red, ki, factor_axis=1)
    s[rf].compute_at(out, row)
    _, lane = s[rf].op.axis
    (ko,) = s[rf].op.reduce_axis
    s[rf].reorder(ko, lane)
    s[rf].vectorize(lane)
    s[red].unroll(s[red].op.reduce_axis[0])


def elementwise_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """``fused_elementwise`` (outer, channels, inner): the chain in one loop nest (every stage
    inlined into the output's), vectorized along the innermost axis that is longer than one (the
    inner one, or the channels), rows in parallel for large tensors."""
    tgt = Target.parse(target)
    s = epi.inline_default(tensors, target)
    out = tensors[-1]
    if out.op.name != "load":
        s[s.stages["load"].op.output(0)].compute_inline()
    outer, channels, inner = (as_int(d) for d in out.shape)
    o, c, i = s[out].op.axis
    if inner == 1:  # the channels are the last axis: (outer) rows of (channels)
        s[out].reorder(i, o, c)
        rows, last, extent, count = o, c, channels, outer
    else:
        rows, last, extent, count = s[out].fuse(o, c), i, inner, outer * channels
    vectorize_row(s[out], last, extent, tgt.vector_lanes(out.dtype))
    parallel_rows(s[out], rows, tgt, outer * channels * inner, count)
    return s


def softmax_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """``softmax`` (rows, n) over each row: per row the maximum, the exponentials (a row buffer)
    and their sum, then the quotients, each a vector loop; rows in parallel."""
    tgt = Target.parse(target)
    out = tensors[-1]
    s = create_schedule(out)
    lanes = tgt.vector_lanes(out.dtype)
    rows, n = (as_int(d) for d in out.shape)
    i, j = s[out].op.axis
    expval = s.stages["expval"].op.output(0)
    _row_reduction(s, s.stages["maxelem"].op.output(0), s[out], i, lanes)
    s[expval].compute_at(s[out], i)
    vectorize_row(s[expval], s[expval].op.axis[1], n, lanes)
    _row_reduction(s, s.stages["expsum"].op.output(0), s[out], i, lanes)
    vectorize_row(s[out], j, n, lanes)
    parallel_rows(s[out], i, tgt, rows * n, rows)
    return s


def layer_norm_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """``layer_norm`` (rows, cols): per row the sum, the sum of squared deviations (vectors of
    partial sums) and the normalized row (a vector loop); rows in parallel."""
    tgt = Target.parse(target)
    out = tensors[-1]
    s = create_schedule(out)
    lanes = tgt.vector_lanes(out.dtype)
    rows, cols = (as_int(d) for d in out.shape)
    i, j = s[out].op.axis
    _row_reduction(s, s.stages["row_sum"].op.output(0), s[out], i, lanes)
    _row_reduction(s, s.stages["square_sum"].op.output(0), s[out], i, lanes)
    vectorize_row(s[out], j, cols, lanes)
    parallel_rows(s[out], i, tgt, rows * cols, rows)
    return s


SCHEDULES.update(softmax=softmax_cpu, layer_norm=layer_norm_cpu)
