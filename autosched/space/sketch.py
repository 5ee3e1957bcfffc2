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
- ``simple``      any other stage keeps its loops; annotation decides its place and loop kinds.

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
    Load,
    Reduce,
    Select,
    Tensor,
    Var,
    as_int,
    static_shape,
    topo_order,
    walk,
)


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


def consumers(ops: Sequence[ComputeOp], name: str) -> list[ComputeOp]:
    """Compute ops that read tensor ``name``."""
    return [op for op in ops if any(t.name == name for t in op.input_tensors)]


def has_data_reuse(op: ComputeOp) -> bool:
    """A reduction in which some input is read without some spatial index: its elements are
    reused across that axis, so tiling for locality pays (matmul, conv2d)."""
    if not isinstance(op.body, Reduce):
        return False
    spatial = {iv.var for iv in op.axis}
    for node in walk(op.body):
        if isinstance(node, Load):
            used = {v for i in node.indices for v in walk(i) if isinstance(v, Var)}
            if spatial - used:
                return True
    return False


def is_strict_inlinable(op: ComputeOp, outputs: set[str]) -> bool:
    """Elementwise, without a reduction or a branch, and not an output: always worth inlining."""
    if op.name in outputs or isinstance(op.body, Reduce):
        return False
    return not any(isinstance(n, Select) for n in walk(op.body))


def is_fusible_consumer(producer: ComputeOp, consumer: ComputeOp) -> bool:
    """``consumer`` is elementwise over the same iteration space and reads ``producer`` only at its
    own index: it can run on the producer's outer tiles (an epilogue)."""
    if isinstance(consumer.body, Reduce) or consumer.shape != producer.shape:
        return False
    own = tuple(iv.var for iv in consumer.axis)
    reads = [n for n in walk(consumer.body) if isinstance(n, Load) and n.tensor.name == producer.name]
    return bool(reads) and all(tuple(r.indices) == own for r in reads)


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


def stage_options(op: ComputeOp, ops: Sequence[ComputeOp], outputs: set[str], cores: int) -> list[StagePlan]:
    """The rules that apply to one stage (several means several sketches)."""
    if is_strict_inlinable(op, outputs):
        return [StagePlan(op.name, "inline")]
    options: list[StagePlan] = []
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


def generate_sketches(outputs: Sequence[Tensor], cores: int = 2) -> list[Sketch]:
    """Every sketch of the DAG behind ``outputs``, by applying the derivation rules from the
    outputs back to the inputs and enumerating the stages' alternatives."""
    every = topo_order(list(outputs))
    ops = [op for op in every if isinstance(op, ComputeOp)]
    # an extern stage reads whole arrays: what it reads stays a stage of its own, as outputs do
    whole = {t.name for op in every if isinstance(op, ExternOp) for t in op.inputs}
    out_names = {t.name for t in outputs} | whole
    sketches: list[tuple[StagePlan, ...]] = [()]
    for op in reversed(ops):
        grown = []
        for partial in sketches:
            for option in stage_options(op, ops, out_names, cores):
                if option.consumer is not None:  # the consumer's own plan becomes "fused"
                    partial = tuple(
                        StagePlan(p.stage, "fused") if p.stage == option.consumer else p for p in partial
                    )
                grown.append((*partial, option))
        sketches = grown
    return [Sketch(plans) for plans in sketches]


def tiled_stages(sketch: Sketch) -> list[StagePlan]:
    """Plans with multi-level tiling."""
    return [p for p in sketch.plans if p.rule in ("tile", "tile_fuse", "tile_cache")]
