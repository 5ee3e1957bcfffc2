"""Generated search spaces (Ansor): sketches derived from the compute DAG alone.

A sketch fixes a program's structure, stage by stage, from the output back to the inputs:

- ``inline``      a simple elementwise stage is substituted into its consumers;
- ``tile``        a stage with data reuse gets multi-level tiling, ``SSRSRS`` on CPU (four spatial
                  levels, two reduction levels, interleaved);
- ``tile_fuse``   the same, with its elementwise consumer (an epilogue) tiled on the two outer
                  spatial levels and the stage computed inside it;
- ``tile_cache``  a cache-write stage is added and tiled, the original stage becoming the fused
                  consumer (a register accumulator);
- ``rfactor``     a reduction with little spatial parallelism is split into partial reductions;
- ``simple``      any other stage keeps its loops; annotation decides its place and loop kinds;
- ``tensorize``   a matmul-like stage over a dot-product intrinsic's input types has its operand
                  laid out for the intrinsic and its blocks tensorized (:mod:`.tensorize`);
- ``root``        a stage that a tensorized stage reads as its ``A`` is computed at the root,
                  as ``simple`` places it there (inlined, the intrinsic would not match).

Where a stage admits several rules the sketches enumerate them, so a workload has a handful of
sketches. Annotation (``annotate.py``) fills the holes: tile sizes, parallel and vector loops,
auto-unroll depth and compute locations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..expr import (
    ComputeOp,
    ExternOp,
    Reduce,
    Tensor,
    as_int,
    static_shape,
    topo_order,
)
from ..schedule.analysis import consumers, has_data_reuse, is_fusible_consumer, is_strict_inlinable
from ..target import Target
from . import tensorize
from .tensorize import dot_plan


@dataclass(frozen=True, slots=True)
class StagePlan:
    """The rule a sketch applies to one stage (``consumer``: the stage fused with it)."""

    stage: str
    rule: str
    consumer: str | None = None

    def __str__(self) -> str:
        return f"{self.stage}: {self.rule}" + (f" (fused into {self.consumer})" if self.consumer else "")


@dataclass(frozen=True, slots=True)
class Sketch:
    """A program structure: one plan per compute stage, outputs first."""

    plans: tuple[StagePlan, ...]

    def plan(self, stage: str) -> StagePlan | None:
        return next((p for p in self.plans if p.stage == stage), None)

    def __str__(self) -> str:
        return "; ".join(str(p) for p in self.plans)


# ---------------------------------------------------------------------------- stage analysis


def wants_rfactor(op: ComputeOp, cores: int) -> bool:
    """Little spatial parallelism next to a long reduction (e.g. a row sum of a 1 x N input)."""
    if not isinstance(op.body, Reduce):
        return False
    spatial = 1
    for n in static_shape(op.shape):
        spatial *= n
    reduce = 1
    for iv in op.reduce_axis:
        reduce *= as_int(iv.extent)
    return spatial < 4 * cores and reduce >= 256


# ---------------------------------------------------------------------------- derivation


def stage_options(
    op: ComputeOp, ops: Sequence[ComputeOp], outputs: set[str], cores: int, target: Target | None = None
) -> list[StagePlan]:
    """The rules that apply to one stage (several means several sketches); ``tensorize`` only
    with a ``target`` (whose CPU extensions decide it)."""
    if is_strict_inlinable(op, outputs):
        return [StagePlan(op.name, "inline")]
    options: list[StagePlan] = []
    if target is not None and dot_plan(op, target) is not None:
        options.append(StagePlan(op.name, "tensorize"))
    if has_data_reuse(op):
        users = consumers(ops, op.name)
        if len(users) == 1 and is_fusible_consumer(op, users[0]):
            options.append(StagePlan(op.name, "tile_fuse", users[0].name))
        else:
            options += [StagePlan(op.name, "tile"), StagePlan(op.name, "tile_cache")]
    else:
        options.append(StagePlan(op.name, "simple"))
    if wants_rfactor(op, cores):
        options.append(StagePlan(op.name, "rfactor"))
    return options


def generate_sketches(
    outputs: Sequence[Tensor], cores: int = 2, target: Target | None = None
) -> list[Sketch]:
    """Every sketch of the DAG behind ``outputs``, by applying the derivation rules from the
    outputs back to the inputs and enumerating the stages' alternatives (those of ``target``'s
    intrinsics too, given one)."""
    every = topo_order(list(outputs))
    ops = [op for op in every if isinstance(op, ComputeOp)]
    # an extern stage reads whole arrays: what it reads stays a stage of its own, as outputs do
    whole = {t.name for op in every if isinstance(op, ExternOp) for t in op.inputs}
    out_names = {t.name for t in outputs} | whole
    sketches: list[tuple[StagePlan, ...]] = [()]
    for op in reversed(ops):
        grown = []
        for partial in sketches:
            for option in stage_options(op, ops, out_names, cores, target):
                if option.consumer is not None:  # the consumer's own plan becomes "fused"
                    partial = tuple(
                        StagePlan(p.stage, "fused") if p.stage == option.consumer else p for p in partial
                    )
                grown.append((*partial, option))
        sketches = grown
    return [Sketch(_rooted_operands(plans, ops)) for plans in sketches]


def _rooted_operands(plans: tuple[StagePlan, ...], ops: Sequence[ComputeOp]) -> tuple[StagePlan, ...]:
    """``plans`` with the stage that each tensorized stage reads as ``A`` computed at the root."""
    by_name = {op.name: op for op in ops}
    rooted = {tensorize.operands(by_name[p.stage])[0].op.name for p in plans if p.rule == "tensorize"}
    return tuple(StagePlan(p.stage, "root") if p.stage in rooted and p.rule in ("inline", "simple") else p
                 for p in plans)  # fmt: skip


def tiled_stages(sketch: Sketch) -> list[StagePlan]:
    """Plans with multi-level tiling."""
    return [p for p in sketch.plans if p.rule in ("tile", "tile_fuse", "tile_cache")]
