"""Hand-written GPU schedules for convolutions and pooling (OpenCL and CUDA alike).

``direct_gpu`` puts every output element on its own thread (conv2d, depthwise conv2d, max and
average pooling): padding is inlined into the reads, and a reduction feeding the output (the
window sum of ``avg_pool2d``) is accumulated in a register at each thread. ``conv2d_gpu`` is the
shared-memory kernel of TVM's CUDA conv2d: a block computes a tile of output channels x rows x
columns of one image, its threads fetch the padded input tile and the filter tile of ``rc_tile``
input channels into shared memory cooperatively, and each thread accumulates ``reg`` output
channels in registers.
"""

from __future__ import annotations

from ..expr import Tensor
from ..schedule import Schedule, create_schedule, thread_axis
from ..target import Target
from .gpu_schedules import bind_threads, cooperative_fetch, thread_limit


def direct_gpu(tensors: list[Tensor], target: Target | str = "opencl", threads: int = 64) -> Schedule:
    """One output element per thread, blocks of ``threads`` (capped by the target's limit):
    elementwise producers inlined, reductions accumulated in a ``local`` register at the thread."""
    out = tensors[-1]
    s = create_schedule(out)
    reductions = []
    for name in [n for n, st in s.stages.items() if not st.is_placeholder and n != out.op.name]:
        stage = s.stages[name]
        if stage.op.reduce_axis:
            acc = s.cache_write(stage.op.output(0), "local")
            s[stage.op.output(0)].compute_inline()
            reductions.append(acc)
        else:
            stage.compute_inline()
    tx = bind_threads(s, out, min(threads, thread_limit(target)))
    for acc in reductions:
        s[acc].compute_at(s[out], tx)
    return s


def conv2d_gpu(
    tensors: list[Tensor],
    target: Target | str = "opencl",
    threads: tuple[int, int, int] = (4, 4, 8),
    reg: int = 2,
    rc_tile: int = 4,
) -> Schedule:
    """conv2d NCHW with shared-memory tiles: ``threads`` = (output channels, rows, columns) of
    threads per block (``threadIdx.z/y/x``), each thread computing ``reg`` output channels of one
    pixel; input and filter tiles of ``rc_tile`` input channels are staged in shared memory."""
    tz, ty, tx = threads
    if tz * ty * tx > thread_limit(target):
        raise ValueError(f"{tz} x {ty} x {tx} threads exceed the target's limit of {thread_limit(target)}")
    data, kernel, out = tensors
    s = create_schedule(out)
    acc = s.cache_write(out, "local")
    src = s.stages["pad"].op.output(0) if "pad" in s.stages else data
    caches = [s.cache_read(t, "shared", [acc]) for t in (src, kernel)]
    if src is not data:
        s[src].compute_inline()
    n, f, y, x = s[out].op.axis
    f_threads, rf = s[out].split(f, factor=reg)
    bf, vf = s[out].split(f_threads, factor=tz)
    by, vy = s[out].split(y, factor=ty)
    bx, vx = s[out].split(x, factor=tx)
    s[out].reorder(n, bf, by, bx, vf, vy, vx, rf)
    s[out].bind(s[out].fuse(n, bf), thread_axis("blockIdx.z"))
    s[out].bind(by, thread_axis("blockIdx.y"))
    s[out].bind(bx, thread_axis("blockIdx.x"))
    s[out].bind(vf, thread_axis("threadIdx.z"))
    s[out].bind(vy, thread_axis("threadIdx.y"))
    s[out].bind(vx, thread_axis("threadIdx.x"))
    s[acc].compute_at(s[out], vx)
    rc, ry, rx = s[acc].op.reduce_axis
    rco, rci = s[acc].split(rc, factor=rc_tile)
    *_, af = s[acc].op.axis[:2]
    s[acc].reorder(rco, ry, rx, rci, af)
    for cache in caches:
        s[cache].compute_at(s[acc], rco)
        cooperative_fetch(s, cache, threads)
    return s
