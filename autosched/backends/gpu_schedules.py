"""Hand-written GPU schedules (OpenCL and CUDA alike), built only from public primitives.

``matmul_gpu`` is TVM's classic: each block computes a tile of C from tiles of A and B that its
threads fetch cooperatively into shared memory, one slice of K at a time, each thread
accumulating a small register tile; ``batch_matmul_gpu`` adds the batch on ``blockIdx.z`` and
``dense_gpu`` lays the same tiles on the bias + ReLU epilogue. ``elementwise_gpu`` fuses all axes
and splits them over blocks and threads; ``softmax_gpu`` reduces each row across the threads of a
block. Convolutions and pooling are in :mod:`~autosched.backends.gpu_conv`. All respect the target's
thread limit.
"""

from __future__ import annotations

from ..expr import IterVar, Tensor
from ..schedule import Schedule, ScheduleError, create_schedule, thread_axis
from ..target import Target

Pair = int | tuple[int, int]  # one value for the rows and columns of a tile, or (rows, columns)


def thread_limit(target: Target | str) -> int:
    """The target's maximum threads per block."""
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
    bind_threads(s, out, min(threads, thread_limit(target)))
    return s


def bind_threads(s: Schedule, out: Tensor, threads: int) -> IterVar:
    """``out``'s axes fused and split into blocks (``blockIdx.x``) of ``threads`` (``threadIdx.x``);
    the thread loop is returned."""
    fused = s[out].fuse(*s[out].op.axis) if len(out.op.axis) > 1 else out.op.axis[0]
    bx, tx = s[out].split(fused, factor=threads)
    s[out].bind(bx, thread_axis("blockIdx.x"))
    s[out].bind(tx, thread_axis("threadIdx.x"))
    return tx


def matmul_gpu(
    tensors: list[Tensor],
    target: Target | str = "opencl",
    block: int = 8,
    reg: Pair = 4,
    k_tile: int = 8,
    vthreads: Pair = 1,
) -> Schedule:
    """Shared-memory tiled matmul: blocks of ``block*reg`` x ``block*reg`` outputs, ``block`` x
    ``block`` threads each accumulating ``reg`` x ``reg`` in registers (a ``local`` cache), A and B
    tiles of ``k_tile`` columns/rows fetched cooperatively into ``shared`` memory. Leading (batch)
    axes go to ``blockIdx.z``.

    ``reg`` and ``vthreads`` are one number for both axes or a (rows, columns) pair: a 4 x 8 tile
    is ``reg=(4, 8)``. ``vthreads`` > 1 splits each thread's ``reg`` rows (columns) over that many
    virtual threads (``vthread`` loops outside the thread loops, injected by lowering): a thread's
    outputs are ``reg / vthreads``-wide pieces a ``block * reg / vthreads`` stride apart, so that
    the threads of a warp read shared memory on distinct banks. ``reg`` must be a multiple of
    ``vthreads`` (else a :class:`ScheduleError`)."""
    A, B, C = tensors
    s = create_schedule(C)
    acc = s.cache_write(C, "local")
    _tiled_gemm(s, C, acc, [A, B], target, (block, reg, k_tile, vthreads))
    return s


def batch_matmul_gpu(
    tensors: list[Tensor],
    target: Target | str = "opencl",
    block: int = 8,
    reg: Pair = 4,
    k_tile: int = 8,
    vthreads: Pair = 1,
) -> Schedule:
    """batch_matmul as :func:`matmul_gpu` with the batch index on ``blockIdx.z``."""
    return matmul_gpu(tensors, target, block, reg, k_tile, vthreads)


def dense_gpu(
    tensors: list[Tensor],
    target: Target | str = "opencl",
    block: int = 8,
    reg: Pair = 4,
    k_tile: int = 8,
    vthreads: Pair = 1,
) -> Schedule:
    """dense as :func:`matmul_gpu` laid out on the bias + ReLU epilogue ``out``: the product is
    accumulated in registers (a ``local`` cache of ``dense``, computed at each thread's tile) and
    never goes to global memory (:func:`fused_gemm_gpu` with the built-in dense's epilogue)."""
    return fused_gemm_gpu(tensors, target, block, reg, k_tile, vthreads)


def fused_gemm_gpu(
    tensors: list[Tensor],
    target: Target | str = "opencl",
    block: int = 8,
    reg: Pair = 4,
    k_tile: int = 8,
    vthreads: Pair = 1,
) -> Schedule:
    """A GEMM with any elementwise epilogue (a network's ``fused_dense`` and ``fused_batch_matmul``:
    bias, activation, residual add) as :func:`matmul_gpu` laid out on its output: the epilogue's
    stages inlined into the output, the product accumulated in registers."""
    out = tensors[-1]
    s = create_schedule(out)
    products = [st for st in s.stages.values() if not st.is_placeholder and st.op.reduce_axis]
    if len(products) != 1 or len(products[0].op.reduce_axis) != 1:
        raise ScheduleError("fused_gemm_gpu schedules one product over one reduction axis, then "
                            "elementwise stages")
    product = products[0].op.output(0)
    for stage in list(s.stages.values()):
        if not stage.is_placeholder and stage.op.name not in (out.op.name, product.op.name):
            stage.compute_inline()
    acc = s.cache_write(product, "local")
    if product.op.name != out.op.name:
        s[product].compute_inline()
    reads = {t.name for t in product.op.input_tensors}
    operands = [t for t in tensors if t.name in reads]  # in argument order: the same steps as before
    _tiled_gemm(s, out, acc, operands, target, (block, reg, k_tile, vthreads))
    return s


def _tiled_gemm(
    s: Schedule,
    out: Tensor,
    acc: Tensor,
    operands: list[Tensor],
    target: Target | str,
    tiles: tuple[int, Pair, int, Pair],
) -> None:
    """Tile ``out``'s last two axes over blocks, virtual threads and threads (any leading axis on
    ``blockIdx.z``), compute the register accumulator ``acc`` at each thread, and fetch
    ``operands`` cooperatively into shared memory one ``k_tile`` slice of the reduction at a time;
    ``tiles`` is (block, reg, k_tile, vthreads) of :func:`matmul_gpu`."""
    block, k_tile = tiles[0], tiles[2]
    (ry, rx), (vty, vtx) = _pair(tiles[1]), _pair(tiles[3])
    if block * block > thread_limit(target):
        raise ValueError(f"{block} x {block} threads exceed the target's limit of {thread_limit(target)}")
    for r, v in ((ry, vty), (rx, vtx)):
        if v < 1 or r % v:
            raise ScheduleError(
                f"vthreads={tiles[3]} does not divide the register tile reg={tiles[1]}: each thread's "
                "rows and columns are split evenly over its virtual threads"
            )
    caches = [s.cache_read(t, "shared", [acc]) for t in operands]
    *lead, i, j = s[out].op.axis
    by, vy, ty, ii = _split3(s, out, i, block, ry // vty, vty)
    bx, vx, tx, ji = _split3(s, out, j, block, rx // vtx, vtx)
    vts = [lp for lp in (vy, vx) if lp is not None]
    s[out].reorder(*lead, by, bx, *vts, ty, tx, ii, ji)
    if lead:
        s[out].bind(s[out].fuse(*lead) if len(lead) > 1 else lead[0], thread_axis("blockIdx.z"))
    s[out].bind(by, thread_axis("blockIdx.y"))
    s[out].bind(bx, thread_axis("blockIdx.x"))
    for lp in vts:
        s[out].bind(lp, thread_axis("vthread"))
    s[out].bind(ty, thread_axis("threadIdx.y"))
    s[out].bind(tx, thread_axis("threadIdx.x"))
    s[acc].compute_at(s[out], tx)
    *_, ai, aj = s[acc].op.axis
    (k,) = s[acc].op.reduce_axis
    ko, ki = s[acc].split(k, factor=k_tile)
    s[acc].reorder(ko, ki, ai, aj)
    for cache in caches:
        s[cache].compute_at(s[acc], ko)
        cooperative_fetch(s, cache, (block, block))


def cooperative_fetch(s: Schedule, cache: Tensor, threads: tuple[int, ...]) -> None:
    """All axes of the shared ``cache`` fused and spread over the block's threads: ``threads``
    gives the thread extents from the outermost index (``z``, ``y``, ``x``, as many as given)."""
    fused = s[cache].fuse(*s[cache].op.axis) if len(s[cache].op.axis) > 1 else s[cache].op.axis[0]
    total = 1
    for t in threads:
        total *= t
    _, rest = s[cache].split(fused, factor=total)
    tags = ("threadIdx.z", "threadIdx.y", "threadIdx.x")[3 - len(threads) :]
    for tag, extent in zip(tags, threads, strict=True):
        total //= extent
        if total > 1:
            outer, rest = s[cache].split(rest, factor=total)
        else:
            outer = rest
        s[cache].bind(outer, thread_axis(tag))


def softmax_gpu(tensors: list[Tensor], target: Target | str = "opencl", threads: int = 64) -> Schedule:
    """softmax as three kernels of one block per row: the row maximum and the row sum of
    exponentials each reduced across the block's ``threads`` (each thread a strided part of the
    row, then a tree through shared memory), then the row's outputs spread over the same threads;
    the exponentials are inlined into both of their readers."""
    out = tensors[-1]
    s = create_schedule(out)
    t = min(threads, thread_limit(target))
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


def _pair(x: Pair) -> tuple[int, int]:
    return (x, x) if isinstance(x, int) else (int(x[0]), int(x[1]))


def _split3(
    s: Schedule, t: Tensor, axis: IterVar, threads: int, reg: int, vthreads: int
) -> tuple[IterVar, IterVar | None, IterVar, IterVar]:
    """(block, virtual thread, thread, register) loops of ``axis``: ``reg`` innermost, then
    ``threads``, then ``vthreads`` (None when 1), splits made inside out so that a small extent
    still launches ``threads`` threads (see lower.loops)."""
    rest, reg_loop = s[t].split(axis, factor=reg)
    outer, mid = s[t].split(rest, factor=threads)
    if vthreads == 1:
        return outer, None, mid, reg_loop
    outer, vt = s[t].split(outer, factor=vthreads)
    return outer, vt, mid, reg_loop
