"""The generated space of a workload on a GPU target: GPU sketches (:mod:`.gpu_sketch`) behind the
interface of :class:`~autosched.space.generated.SketchSpace`, so tuners, mutation, crossover, the
grid and the tuning log treat both alike. :func:`sketch_space` picks the one a target needs.

Sampling keeps the device's limits: tile draws respect the thread limit, and a drawn program is
lowered for the target and checked (threads, shared memory, one extent per thread index in a
kernel) before it is offered; after :data:`SAMPLE_ATTEMPTS` failures the last draw is offered
anyway, and the builder records why it cannot run (``INSTANTIATION_ERROR``). Mutations that
break the thread limit are redrawn.
"""

from __future__ import annotations

import random
from functools import cached_property

from ..expr import ComputeOp, as_int
from ..lower import lower
from ..lower.gpu import split_kernels
from ..ops import Workload
from ..schedule import Schedule, ScheduleError
from ..target import Target
from .annotate import UNROLL_STEPS, stage_ops
from .entities import split_entities
from .generated import GRID_ORDER, GridKnob, SketchProgram, SketchSpace
from .gpu_sketch import (
    THREADS,
    apply_gpu_sketch,
    fits,
    generate_gpu_sketches,
    is_gpu,
    sample_gpu_annotation,
    thread_choices,
)
from .mutate import mutate
from .sketch import Sketch

SAMPLE_ATTEMPTS = 16


class GpuSketchSpace(SketchSpace):
    """Programs generated from a workload's compute DAG for a GPU target."""

    def __init__(self, workload: Workload, target: Target | str) -> None:
        self.workload = workload
        self.target = Target.parse(target)
        if not is_gpu(self.target):
            raise ValueError(f"GPU sketches need a GPU target, not {self.target}")
        self.outputs = workload.outputs
        self.ops = stage_ops(self.outputs)
        self.sketches: list[Sketch] = generate_gpu_sketches(self.outputs)

    def sample(self, rng: random.Random) -> SketchProgram:
        """A random program that lowers within the device's limits (see the module docstring)."""
        for _ in range(SAMPLE_ATTEMPTS):
            index = rng.randrange(len(self.sketches))
            program = SketchProgram(
                index, sample_gpu_annotation(self.sketches[index], self.ops, self.target, rng)
            )
            if self.check(program) is None:
                break
        return program

    def check(self, program: SketchProgram) -> str | None:
        """Why ``program`` cannot run on the target (None: it can), found by lowering it."""
        try:
            func = lower(self.schedule(program), self.workload.tensors(), gpu=True)
            split_kernels(func, self.target.max_threads_per_block or 1, self.target.shared_memory_bytes or 0)
        except (ScheduleError, ValueError) as err:
            return str(err)
        return None

    def schedule(self, program: SketchProgram) -> Schedule:
        return apply_gpu_sketch(self.sketches[program.sketch], program.annotation, self.outputs)

    def mutate(self, program: SketchProgram, rng: random.Random) -> SketchProgram:
        """A neighbour of ``program`` within the thread limit (``program`` if none is found)."""
        sketch = self.sketches[program.sketch]
        for _ in range(SAMPLE_ATTEMPTS):
            child = mutate(program.annotation, rng)
            if fits(sketch, child, self.target):
                return SketchProgram(program.sketch, child)
        return program

    def is_valid(self, program: SketchProgram) -> bool:
        """Whether ``program`` keeps the limits sampling keeps (threads per block, local tiles)."""
        return fits(self.sketches[program.sketch], program.annotation, self.target)

    @cached_property
    def grid_knobs(self) -> list[list[GridKnob]]:
        """Per sketch, its knobs from the fastest-varying digit to the slowest."""
        return [gpu_sketch_knobs(sk, self.ops, self.target) for sk in self.sketches]


def gpu_sketch_knobs(sketch: Sketch, ops: dict[str, ComputeOp], target: Target) -> list[GridKnob]:
    """The knobs of a GPU ``sketch``: one per choice :func:`sample_gpu_annotation` makes."""
    knobs: list[GridKnob] = []
    for plan in sketch.plans:
        op, name = ops[plan.stage], plan.stage
        if plan.rule == "gpu_tile":
            for iv in op.axis:
                options = tuple(e.size[1:] for e in split_entities(as_int(iv.extent), 5, "factors"))
                knobs.append(GridKnob("tiles", name, options, iv.name))
            for iv in op.reduce_axis:
                options = tuple(e.size[1:] for e in split_entities(as_int(iv.extent), 3, "factors"))
                knobs.append(GridKnob("tiles", name, options, iv.name))
            knobs.append(GridKnob("vectorize", name, (False, True)))
        elif plan.rule in ("cross_thread", "gpu_simple"):
            limit = target.max_threads_per_block or 1
            knobs.append(GridKnob("tiles", name, tuple((t,) for t in thread_choices(limit)), THREADS))
        if plan.rule not in ("inline", "fused"):
            knobs.append(GridKnob("unroll", name, UNROLL_STEPS))
    return sorted(knobs, key=lambda k: GRID_ORDER.index(k.table))


def sketch_space(workload: Workload, target: Target | str) -> SketchSpace:
    """The generated space of ``workload`` for ``target``: GPU sketches on a GPU target."""
    tgt = Target.parse(target)
    return GpuSketchSpace(workload, tgt) if is_gpu(tgt) else SketchSpace(workload, tgt)
