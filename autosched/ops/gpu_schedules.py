"""Hand-written GPU schedules (OpenCL and CUDA alike), built only from public primitives.

``matmul_gpu`` is TVM's classic: each block computes a tile of C from tiles of A and B that its
threads fetch cooperatively into shared memory, one slice of K at a time, each thread
accumulating a small register tile. ``elementwise_gpu`` fuses all axes and splits them over
blocks and threads; ``softmax_gpu`` reduces each row across the threads of a block.
All respect the target's thread limit.
"""

from __future__ import annotations

from ..expr import IterVar, Tensor
from ..schedule import Schedule, create_schedule, thread_axis
from ..target import Target


def _threads(target: Target | str) -> int:
    limit = Target.parse(target).max_threads_per_block
    assert limit is not None, "a GPU target"
    return limit


def elementwise_gpu(tensors: list[Tensor], target: Target | str = "opencl", threads: int = 64) -> Schedule:
    """Every output element on its own thread: all axes fused, split into blocks of ``threads``
    (capped by the target's limit); the producers are inlined."""
    out = tensors[-1]
    s = create_schedule(out)
    for stage in list(s.stages.values()):
        if not stage.is_placeholder and stage.name != out.op.name:
            stage.compute_inline()
    fused = s[out].fuse(*s[out].op.axis) if len(out.op.axis) > 1 else out.op.axis[0]
    bx, tx = s[out].split(fused, factor=min(threads, _threads(target)))
    s[out].bind(bx, thread_axis("blockIdx.x"))
    s[out].bind(tx, thread_axis("threadIdx.x"))
    return s


def matmul_gpu(
    tensors: list[Tensor], target: Target | str = "opencl", block: int = 8, reg: int = 4, k_tile: int = 8
) -> Schedule:
    """Shared-memory tiled matmul: blocks of ``block*reg`` x ``block*reg`` outputs, ``block`` x
    ``block`` threads each accumulating ``reg`` x ``reg`` in registers (a ``local`` cache), A and B
    tiles of ``k_tile`` columns/rows fetched cooperatively into ``shared`` memory."""
    if block * block > _threads(target):
        raise ValueError(f"{block} x {block} threads exceed the target's limit of {_threads(target)}")
    A, B, C = tensors
    s = create_schedule(C)
    a_sh = s.cache_read(A, "shared", [C])
    b_sh = s.cache_read(B, "shared", [C])
    acc = s.cache_write(C, "local")
    i, j = s[C].op.axis
    by, ty, ii = _split2(s, C, i, block, reg)
    bx, tx, ji = _split2(s, C, j, block, reg)
    s[C].reorder(by, bx, ty, tx, ii, ji)
    s[C].bind(by, thread_axis("blockIdx.y"))
    s[C].bind(bx, thread_axis("blockIdx.x"))
    s[C].bind(ty, thread_axis("threadIdx.y"))
    s[C].bind(tx, thread_axis("threadIdx.x"))
    s[acc].compute_at(s[C], tx)
    ai, aj = s[acc].op.axis
    (k,) = s[acc].op.reduce_axis
    ko, ki = s[acc].split(k, factor=k_tile)
    s[acc].reorder(ko, ki, ai, aj)
    for cache in (a_sh, b_sh):
        s[cache].compute_at(s[acc], ko)
        fused = s[cache].fuse(*s[cache].op.axis)
        rest, t = s[cache].split(fused, factor=block * block)
        t_y, t_x = s[cache].split(t, factor=block)
        s[cache].bind(t_y, thread_axis("threadIdx.y"))
        s[cache].bind(t_x, thread_axis("threadIdx.x"))
    return s


def softmax_gpu(tensors: list[Tensor], target: Target | str = "opencl", threads: int = 64) -> Schedule:
    """softmax as three kernels of one block per row: the row maximum and the row sum of
    exponentials each reduced across the block's ``threads`` (each thread a strided part of the
    row, then a tree through shared memory), then the row's outputs spread over the same threads;
    the exponentials are inlined into both of their readers."""
    out = tensors[-1]
    s = create_schedule(out)
    t = min(threads, _threads(target))
    s["expval"].compute_inline()
    for name in ("maxelem", "expsum"):
        ko, ki = s[name].split(s[name].op.reduce_axis[0], factor=t)
        s[name].reorder(s[name].op.axis[0], ki, ko)
        s[name].bind(s[name].op.axis[0], thread_axis("blockIdx.x"))
        s[name].bind(ki, thread_axis("threadIdx.x"))
    i, j = s[out].op.axis
    jo, ji = s[out].split(j, factor=t)
    s[out].bind(i, thread_axis("blockIdx.x"))
    s[out].bind(ji, thread_axis("threadIdx.x"))
    return s


def _split2(
    s: Schedule, t: Tensor, axis: IterVar, threads: int, reg: int
) -> tuple[IterVar, IterVar, IterVar]:
    """(block, thread, register) loops of ``axis``: ``reg`` innermost, ``threads`` in the middle."""
    outer, inner = s[t].split(axis, factor=threads * reg)
    mid, reg_loop = s[t].split(inner, factor=reg)
    return outer, mid, reg_loop
