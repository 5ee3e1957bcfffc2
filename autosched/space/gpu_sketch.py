"""Generated search spaces on GPUs (Ansor's GPU sketch rules): derivation, sampling and applying.

Each compute stage, from the outputs back to the inputs, gets one of these rules:

- ``inline``       an elementwise stage that is not an output (padding included) is substituted
                   into its consumers: every other stage is a kernel of its own;
- ``gpu_tile``     a stage with data reuse (matmul, conv2d, dense) gets multi-level tiling
                   ``SSSRRSRS``: each spatial axis in five levels (block, virtual thread, thread,
                   two inner levels), each reduction axis in three. The block, virtual-thread and
                   thread levels of all axes are fused and bound to ``blockIdx.x``, ``vthread`` and
                   ``threadIdx.x``; the stage accumulates in ``local`` memory computed at the
                   thread loop of its consumer (its elementwise epilogue when it has one, else a
                   ``cache_write`` copy); every input is copied into ``shared`` memory at the outer
                   reduction level by all threads of the block (cooperative fetch);
- ``fused``        the epilogue of a ``gpu_tile`` stage (tiled there);
- ``cross_thread`` a reduction without data reuse and with a long reduction (a row of softmax)
                   puts one output per block and reduces across the block's threads;
- ``gpu_simple``   any other stage (an elementwise output, a short reduction): all spatial axes
                   fused and split over blocks and threads, one output per thread.

A reduction that admits ``cross_thread`` also keeps ``gpu_simple``: the two are two sketches.
The :class:`~autosched.space.annotate.Annotation` holds the choices: ``tiles`` (four inner
factors per spatial axis and two per reduction axis of a ``gpu_tile``; ``[threads]`` under
:data:`THREADS` for the others), ``unroll`` (auto-unroll depth) and ``vectorize`` (a
cooperative fetch in vectors of four).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from ..expr import ComputeOp, ExternOp, Reduce, Tensor, as_int, topo_order
from ..lower.vthread import MAX_VTHREADS
from ..schedule import Schedule, Stage, create_schedule, thread_axis
from ..schedule.analysis import consumers, has_data_reuse, is_fusible_consumer
from ..target import Target
from .annotate import UNROLL_STEPS, Annotation, sample_factors
from .sketch import Sketch, StagePlan

THREADS = "threads"  # the tiles key of a ``cross_thread`` or ``gpu_simple`` stage's thread count
#: a reduction at least this long (and without data reuse) may be reduced across threads
CROSS_THREAD_MIN = 64
#: thread counts that ``cross_thread`` and ``gpu_simple`` stages draw from (capped by the device)
THREAD_CHOICES = (32, 64, 128, 256, 512, 1024)
#: the most elements of a thread's local accumulator tile (levels 3-4 of a ``gpu_tile``)
MAX_LOCAL = 64


def is_gpu(target: Target) -> bool:
    """Whether ``target`` runs kernels on blocks of threads (it has a thread limit)."""
    return target.max_threads_per_block is not None


def _reduce_length(op: ComputeOp) -> int:
    n = 1
    for iv in op.reduce_axis:
        n *= as_int(iv.extent)
    return n


def gpu_stage_options(op: ComputeOp, ops: Sequence[ComputeOp], outputs: set[str]) -> list[StagePlan]:
    """The GPU rules that apply to one stage (several means several sketches)."""
    if op.name not in outputs and not isinstance(op.body, Reduce):
        return [StagePlan(op.name, "inline")]
    if has_data_reuse(op):
        users = consumers(ops, op.name)
        if len(users) == 1 and op.name not in outputs and is_fusible_consumer(op, users[0]):
            return [StagePlan(op.name, "gpu_tile", users[0].name)]
        return [StagePlan(op.name, "gpu_tile")]
    options = [StagePlan(op.name, "gpu_simple")]
    if isinstance(op.body, Reduce) and _reduce_length(op) >= CROSS_THREAD_MIN:
        options.append(StagePlan(op.name, "cross_thread"))
    return options


def generate_gpu_sketches(outputs: Sequence[Tensor]) -> list[Sketch]:
    """Every GPU sketch of the DAG behind ``outputs`` (the rules above, outputs first)."""
    every = topo_order(list(outputs))
    ops = [op for op in every if isinstance(op, ComputeOp)]
    whole = {t.name for op in every if isinstance(op, ExternOp) for t in op.inputs}
    if whole:
        raise ValueError("GPU sketches cover compute stages only: this workload has an extern stage")
    out_names = {t.name for t in outputs}
    sketches: list[tuple[StagePlan, ...]] = [()]
    for op in reversed(ops):
        grown = []
        for partial in sketches:
            for option in gpu_stage_options(op, ops, out_names):
                plans = partial
                if option.consumer is not None:
                    plans = tuple(
                        StagePlan(p.stage, "fused") if p.stage == option.consumer else p for p in plans
                    )
                grown.append((*plans, option))
        sketches = grown
    return [Sketch(plans) for plans in sketches]


# ---------------------------------------------------------------------------- sampling


def block_threads(plan: StagePlan, ann: Annotation) -> int:
    """Threads per block of the kernel of ``plan`` under ``ann`` (0: the plan makes no kernel)."""
    tiles = ann.tiles.get(plan.stage, {})
    if plan.rule == "gpu_tile":
        n = 1
        for factors in tiles.values():
            if len(factors) == 4:
                n *= factors[1]
        return n
    if plan.rule in ("cross_thread", "gpu_simple"):
        return tiles[THREADS][0]
    return 0


def local_size(tiles: Mapping[str, Sequence[int]]) -> int:
    """Elements of a ``gpu_tile`` thread's local accumulator (spatial levels 3 and 4)."""
    n = 1
    for factors in tiles.values():
        if len(factors) == 4:
            n *= factors[2] * factors[3]
    return n


def vthreads(tiles: Mapping[str, Sequence[int]]) -> int:
    """Virtual threads of a ``gpu_tile`` stage (spatial level 1)."""
    n = 1
    for factors in tiles.values():
        if len(factors) == 4:
            n *= factors[0]
    return n


def _tile_fits(tiles: Mapping[str, Sequence[int]]) -> bool:
    """A thread's local tile stays small and its virtual threads within what lowering injects."""
    return local_size(tiles) <= MAX_LOCAL and vthreads(tiles) <= MAX_VTHREADS


def fits(sketch: Sketch, ann: Annotation, target: Target) -> bool:
    """Whether every kernel keeps the thread limit, the local tiles stay small and the virtual
    threads few (shared memory and matching thread extents are checked when the program is
    lowered)."""
    limit = target.max_threads_per_block or 1
    for plan in sketch.plans:
        if block_threads(plan, ann) > limit:
            return False
        if plan.rule == "gpu_tile" and not _tile_fits(ann.tiles[plan.stage]):
            return False
    return True


def sample_gpu_annotation(
    sketch: Sketch, ops: Mapping[str, ComputeOp], target: Target, rng: random.Random
) -> Annotation:
    """A random annotation of a GPU ``sketch``; tile draws are repeated (a few times) until every
    kernel fits the target's thread limit."""
    limit = target.max_threads_per_block or 1
    ann = Annotation()
    for plan in sketch.plans:
        op = ops[plan.stage]
        if plan.rule == "gpu_tile":
            for _ in range(32):
                tiles = {iv.name: sample_factors(as_int(iv.extent), 4, rng) for iv in op.axis}
                threads = block_threads(plan, Annotation(tiles={plan.stage: tiles}))
                if threads <= limit and _tile_fits(tiles):
                    break
            tiles |= {iv.name: sample_factors(as_int(iv.extent), 2, rng) for iv in op.reduce_axis}
            ann.tiles[plan.stage] = tiles
            ann.vectorize[plan.stage] = rng.random() < 0.5
        elif plan.rule in ("cross_thread", "gpu_simple"):
            ann.tiles[plan.stage] = {THREADS: [rng.choice(thread_choices(limit))]}
        if plan.rule not in ("inline", "fused"):
            ann.unroll[plan.stage] = rng.choice(UNROLL_STEPS)
    return ann


def thread_choices(limit: int) -> tuple[int, ...]:
    """The thread counts a simple or cross-thread stage may draw within ``limit``."""
    return tuple(t for t in THREAD_CHOICES if t <= limit) or (limit,)


# ---------------------------------------------------------------------------- applying


def apply_gpu_sketch(sketch: Sketch, ann: Annotation, outputs: Sequence[Tensor]) -> Schedule:
    """The schedule of a GPU (sketch, annotation), built with public primitives only."""
    s = create_schedule(list(outputs))
    for plan in sketch.plans:  # inline first: the shared caches then read the inlined values
        if plan.rule == "inline":
            s[plan.stage].compute_inline()
    for plan in sketch.plans:
        if plan.rule == "gpu_tile":
            stage = _gpu_tile(s, plan, ann)
        elif plan.rule == "cross_thread":
            stage = _cross_thread(s[plan.stage], ann.tiles[plan.stage][THREADS][0])
        elif plan.rule == "gpu_simple":
            stage = _gpu_simple(s[plan.stage], ann.tiles[plan.stage][THREADS][0])
        else:
            continue
        if ann.unroll.get(plan.stage):
            stage.pragma(stage.leaves[0], "auto_unroll_max_step", ann.unroll[plan.stage])
    return s


def _levels(stage: Stage, axis: str, factors: Sequence[int]) -> list[str]:
    """Split ``axis`` into ``len(factors) + 1`` loops, outermost first (inner factors given)."""
    names, current = [], axis
    for i in range(len(factors)):
        inner = 1
        for f in factors[i:]:
            inner *= f
        outer, rest = stage.split(current, max(1, inner))
        names.append(outer.name)
        current = rest.name
    return [*names, current]


def _fuse(stage: Stage, loops: list[str]) -> str:
    return stage.fuse(*loops).name if len(loops) > 1 else loops[0]


def _gpu_tile(s: Schedule, plan: StagePlan, ann: Annotation) -> Stage:
    """SSSRRSRS: the consumer tiled and bound on levels 0-2, the local accumulator inside it on
    levels 3-4 and the reduction levels, shared copies of the inputs at the outer reduction level.
    Returns the accumulator's stage."""
    name = plan.stage
    tiles = ann.tiles[name]
    if plan.consumer is not None:
        inner, outer = s[name], s[plan.consumer]
    else:
        inner = s[s.cache_write(s[name].op.output(0), "local").op.name]
        outer = s[name]
    op = inner.op
    assert isinstance(op, ComputeOp)
    spatial = [iv.name for iv in op.axis]
    caches = [s[s.cache_read(t, "shared", [inner]).op.name] for t in dict.fromkeys(op.input_tensors)]
    levels = [_levels(outer, a.name, tiles[n]) for a, n in zip(outer.op.axis, spatial, strict=True)]
    outer.reorder(*[lv[k] for k in range(5) for lv in levels])
    bx = _fuse(outer, [lv[0] for lv in levels])
    vt = _fuse(outer, [lv[1] for lv in levels])
    tx = _fuse(outer, [lv[2] for lv in levels])
    outer.bind(bx, thread_axis("blockIdx.x"))
    outer.bind(vt, thread_axis("vthread"))
    outer.bind(tx, thread_axis("threadIdx.x"))
    inner.compute_at(outer, tx)
    sp = [_levels(inner, a, [tiles[a][3]]) for a in spatial]
    rd = [_levels(inner, iv.name, tiles[iv.name]) for iv in op.reduce_axis]
    inner.reorder(
        *[lv[0] for lv in rd],
        *[lv[1] for lv in rd],
        *[lv[0] for lv in sp],
        *[lv[2] for lv in rd],
        *[lv[1] for lv in sp],
    )
    threads = block_threads(plan, ann)
    vec = 4 if ann.vectorize.get(name) else 1
    for cache in caches:
        cache.compute_at(inner, rd[-1][0] if rd else inner.leaves[0])
        _, t = cache.split(_fuse(cache, list(cache.leaves)), threads * vec)
        if vec > 1:
            t, v = cache.split(t, vec)
            cache.vectorize(v)
        cache.bind(t, thread_axis("threadIdx.x"))
    return inner


def _cross_thread(stage: Stage, threads: int) -> Stage:
    """One output per block, the reduction split over ``threads`` threads of it."""
    op = stage.op
    assert isinstance(op, ComputeOp)
    bx = _fuse(stage, [iv.name for iv in op.axis]) if op.axis else None
    r = _fuse(stage, [iv.name for iv in op.reduce_axis])
    ro, ri = stage.split(r, threads)
    stage.reorder(*([bx] if bx else []), ri.name, ro.name)
    if bx:
        stage.bind(bx, thread_axis("blockIdx.x"))
    stage.bind(ri, thread_axis("threadIdx.x"))
    return stage


def _gpu_simple(stage: Stage, threads: int) -> Stage:
    """All spatial axes fused, split into blocks of ``threads`` threads (reductions serial inside;
    a scalar stage stays unbound, and lowering says so)."""
    op = stage.op
    assert isinstance(op, ComputeOp)
    if not op.axis:
        return stage
    fused = _fuse(stage, [iv.name for iv in op.axis])
    bx, tx = stage.split(fused, threads)
    stage.bind(bx, thread_axis("blockIdx.x"))
    stage.bind(tx, thread_axis("threadIdx.x"))
    return stage
