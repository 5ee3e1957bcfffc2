"""The schedule a workload gets on a GPU before any tuning (``default_schedule`` on a GPU target).

The built-in GEMMs, a network's GEMMs with their epilogues (``fused_dense``,
``fused_batch_matmul``) and the NCHW convolution get their hand-written shared-memory kernels
(:mod:`.gpu_schedules`, :mod:`.gpu_conv`) at their default tiles. Any other workload (a network's
fused convolution with its epilogue, layer normalization, pooling, a user's own compute) gets
:func:`generic_gpu`, built from the DAG alone:

- an elementwise stage that is not an output is inlined into its readers;
- a reduction accumulates in a register (``local``) on the thread of the output element it feeds:
  at its epilogue's thread where its only reader, through inlined stages, is an output of the same
  shape reading it at its own index (a convolution's bias, residual and activation), else on a
  kernel of its own (a row mean of layer normalization);
- every kernel puts one output element on each thread, its axes fused and split into blocks of
  ``threads``.

Every launch respects the target's thread limit, so the schedule runs on any device of the kind.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..expr import ComputeOp, ExternOp, IterVar, Reduce, Tensor, topo_order
from ..ops import Workload
from ..schedule import Schedule, ScheduleError, Stage, create_schedule, thread_axis
from ..schedule.analysis import consumers, is_fusible_consumer
from ..target import Target
from .gpu_conv import conv2d_gpu
from .gpu_schedules import batch_matmul_gpu, dense_gpu, fused_gemm_gpu, matmul_gpu, thread_limit

#: threads per block of :func:`generic_gpu`'s kernels (capped by the target's limit)
THREADS = 64

#: the hand-written GPU kernels by workload name, at their default tiles
GPU_SCHEDULES: dict[str, Callable[[list[Tensor], Target | str], Schedule]] = {
    "matmul": matmul_gpu,
    "batch_matmul": batch_matmul_gpu,
    "dense": dense_gpu,
    "fused_dense": fused_gemm_gpu,
    "fused_batch_matmul": fused_gemm_gpu,
    "conv2d_nchw": conv2d_gpu,
}


def default_gpu_schedule(wl: Workload, target: Target | str) -> tuple[Schedule, str]:
    """``wl``'s schedule before tuning on the GPU ``target`` and its name: its hand-written kernel
    (:data:`GPU_SCHEDULES`) where there is one, else :func:`generic_gpu`."""
    make = GPU_SCHEDULES.get(wl.name)
    if make is not None and not (wl.name == "matmul" and wl.args[4]):  # B transposed: no GPU kernel
        return make(wl.tensors(), target), f"{make.__module__}.{make.__name__}"
    return generic_gpu(wl.outputs, target), f"{__name__}.generic_gpu"


def generic_gpu(outputs: Sequence[Tensor], target: Target | str, threads: int = THREADS) -> Schedule:
    """One output element per thread for any DAG of compute stages (see the module's docstring)."""
    every = topo_order(list(outputs))
    if any(isinstance(op, ExternOp) for op in every):
        raise ScheduleError("a GPU kernel cannot call C: this workload has an extern stage")
    ops = [op for op in every if isinstance(op, ComputeOp)]
    names = {t.name for t in outputs}
    kernels = [op for op in ops if op.name in names or isinstance(op.body, Reduce)]
    fused = {op.name: host for op in kernels if (host := _epilogue(op, ops, kernels, names)) is not None}
    s = create_schedule(list(outputs))
    for op in ops:
        if op not in kernels:
            s[op.name].compute_inline()
    accumulators: dict[str, list[Tensor]] = {}
    for op in kernels:
        if isinstance(op.body, Reduce):
            acc = s.cache_write(op.output(0), "local")
            if op.name in fused:
                s[op.name].compute_inline()
                accumulators.setdefault(fused[op.name], []).append(acc)
            else:
                accumulators.setdefault(op.name, []).append(acc)
    limit = min(threads, thread_limit(target))
    for op in kernels:
        if op.name in fused:
            continue
        thread = _bind(s[op.name], limit)
        if thread is not None:  # a scalar's accumulator stays at the root of its one thread
            for acc in accumulators.get(op.name, []):
                s[acc].compute_at(s[op.name], thread)
    return s


def _epilogue(op: ComputeOp, ops: list[ComputeOp], kernels: list[ComputeOp], outputs: set[str]) -> str | None:
    """The output stage that reduction ``op`` can be computed in, element by element (its only
    reader through inlined elementwise stages, each reading its producer at its own index), or None."""
    if not isinstance(op.body, Reduce) or op.name in outputs:
        return None
    current = op
    while True:
        users = consumers(ops, current.name)
        if len(users) != 1 or not is_fusible_consumer(current, users[0]):
            return None
        current = users[0]
        if current in kernels:
            return current.name if current.name in outputs and not isinstance(current.body, Reduce) else None


def _bind(stage: Stage, threads: int) -> IterVar | None:
    """``stage``'s axes fused and split over blocks of ``threads`` threads; the thread loop (None
    for a scalar stage, which runs on one thread of one block)."""
    op = stage.op
    assert isinstance(op, ComputeOp)
    if not op.axis:
        return None
    fused = stage.fuse(*op.axis) if len(op.axis) > 1 else op.axis[0]
    block, thread = stage.split(fused, factor=threads)
    stage.bind(block, thread_axis("blockIdx.x"))
    stage.bind(thread, thread_axis("threadIdx.x"))
    return thread
