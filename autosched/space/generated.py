"""The generated search space of a workload: its sketches, random programs, mutation, replay, and
a deterministic enumeration (the grid) for exhaustive search.

The grid is mixed-radix, like a template :class:`~autosched.space.knobs.ConfigSpace`: the sketch
is the outermost digit; within a sketch every choice that :func:`sample_annotation` makes is a
:class:`GridKnob` with a fixed list of options, the cheapest kind varying fastest (unroll depth,
then vectorize, parallel fusion or placement, pack, tile sizes). The grid holds exactly the
annotations that sampling can draw, and also points that break the limits sampling keeps (the
local-tile and panel sizes): :meth:`SketchSpace.is_valid` tells them apart cheaply.
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..expr import ComputeOp, as_int
from ..ops import Workload
from ..schedule import Schedule
from ..schedule.steps import Step
from ..target import Target
from . import tensorize
from .annotate import (
    AT_POSITIONS,
    MAX_LOCAL_TILE,
    TILED,
    UNROLL_STEPS,
    Annotation,
    apply_sketch,
    divisors,
    local_tile,
    pack_candidates,
    sample_annotation,
    stage_ops,
)
from .entities import split_entities
from .mutate import crossover, mutate
from .sketch import Sketch, generate_sketches

# knob kinds from the fastest-varying digit of a grid index to the slowest
GRID_ORDER = ("unroll", "vectorize", "parallel", "placement", "pack", "tiles")


@dataclass(frozen=True)
class SketchProgram:
    """One program of a generated space: a sketch (by index) and its annotation."""

    sketch: int
    annotation: Annotation


@dataclass(frozen=True, slots=True)
class GridKnob:
    """One choice of a sketch's annotation: the table it fills (``placement`` fills ``location``
    and ``parallel`` together), its stage, its axis (tiles only), and its options in grid order."""

    table: str
    stage: str
    options: tuple[Any, ...]
    axis: str = ""

    def write(self, ann: Annotation, value: Any) -> None:
        """Put ``value`` (one of the options) into ``ann``."""
        if self.table == "tiles":
            ann.tiles.setdefault(self.stage, {})[self.axis] = list(value)
        elif self.table == "placement":
            ann.location[self.stage], ann.parallel[self.stage] = value
        else:
            getattr(ann, self.table)[self.stage] = value


class SketchSpace:
    """Programs generated from a workload's compute DAG alone (no template)."""

    def __init__(self, workload: Workload, target: Target | str = "c") -> None:
        self.workload = workload
        self.target = Target.parse(target)
        self.outputs = workload.outputs
        self.ops = stage_ops(self.outputs)
        self.sketches: list[Sketch] = generate_sketches(self.outputs, self.target.cores or 1, self.target)
        self.extents = axis_extents(self.ops)

    def sample(self, rng: random.Random) -> SketchProgram:
        """A random program: a random sketch, randomly annotated."""
        index = rng.randrange(len(self.sketches))
        ann = sample_annotation(self.sketches[index], self.outputs, self.target, rng, self.ops)
        return SketchProgram(index, ann)

    def schedule(self, program: SketchProgram) -> Schedule:
        """The program's schedule, built on the workload's tensors."""
        return apply_sketch(self.sketches[program.sketch], program.annotation, self.outputs, self.target)

    def steps(self, program: SketchProgram) -> tuple[Step, ...]:
        """The program as replayable schedule steps."""
        return tuple(self.schedule(program).steps)

    def mutate(self, program: SketchProgram, rng: random.Random) -> SketchProgram:
        """A neighbour of ``program`` (same sketch)."""
        return SketchProgram(program.sketch, mutate(program.annotation, rng, self.extents))

    def crossover(self, a: SketchProgram, b: SketchProgram, rng: random.Random) -> SketchProgram:
        """A child of two programs of the same sketch (``a`` itself when the sketches differ)."""
        if a.sketch != b.sketch:
            return a
        return SketchProgram(a.sketch, crossover(a.annotation, b.annotation, rng))

    def describe(self) -> str:
        """The sketches, one per line, for people."""
        lines = [
            f"{self.workload} on {self.target.kind}: {len(self.sketches)} sketch(es), "
            f"{self.grid_size():,} grid points"
        ]
        lines += [f"  [{i}] {sk}" for i, sk in enumerate(self.sketches)]
        return "\n".join(lines)

    # -- the grid
    @cached_property
    def grid_knobs(self) -> list[list[GridKnob]]:
        """Per sketch, its knobs from the fastest-varying digit to the slowest."""
        outputs = {t.name for t in self.outputs}
        return [sketch_knobs(sk, self.ops, outputs, self.target) for sk in self.sketches]

    def grid_size(self) -> int:
        """The number of grid points (exact; some may be invalid, see :meth:`is_valid`)."""
        return sum(_radix_product(knobs) for knobs in self.grid_knobs)

    def grid_point(self, index: int) -> SketchProgram:
        """The program at ``index`` of the grid, ``0 <= index < grid_size()``; neighbouring indices
        differ in the cheapest knob first (the unroll depth)."""
        if not 0 <= index < self.grid_size():
            raise IndexError(f"grid index {index} out of range [0, {self.grid_size()})")
        sketch = 0
        while index >= (size := _radix_product(self.grid_knobs[sketch])):
            index -= size
            sketch += 1
        ann = Annotation()
        for knob in self.grid_knobs[sketch]:
            index, digit = divmod(index, len(knob.options))
            knob.write(ann, knob.options[digit])
        return SketchProgram(sketch, ann)

    def is_valid(self, program: SketchProgram) -> bool:
        """Whether ``program`` keeps the limits that sampling keeps: local tiles of at most
        ``MAX_LOCAL_TILE`` elements and packed panels that fit ``MAX_PANEL``."""
        ann = program.annotation
        for plan in self.sketches[program.sketch].plans:
            if plan.rule in ("tile_fuse", "tile_cache"):
                tiles = ann.tiles[plan.stage]
                pack = ann.pack.get(plan.stage, "")
                if local_tile(tiles) > MAX_LOCAL_TILE:
                    return False
                if pack and pack not in pack_candidates(self.ops[plan.stage], tiles):
                    return False
        return True


def sketch_knobs(
    sketch: Sketch, ops: Mapping[str, ComputeOp], outputs: set[str], target: Target
) -> list[GridKnob]:
    """The knobs of ``sketch``: one per choice :func:`sample_annotation` makes, with every value it
    can draw, sorted by :data:`GRID_ORDER` (stages in plan order within a kind)."""
    threads = target.num_threads or 1
    knobs: list[GridKnob] = []
    for plan in sketch.plans:
        op, name = ops[plan.stage], plan.stage
        if plan.rule in TILED:
            for iv in op.axis:
                lanes = target.vector_lanes(op.dtype) if iv is op.axis[-1] else 1
                knobs.append(GridKnob("tiles", name, tile_options(as_int(iv.extent), lanes), iv.name))
            for iv in op.reduce_axis:
                knobs.append(GridKnob("tiles", name, tuple((d,) for d in divisors(iv.extent)), iv.name))
            knobs.append(GridKnob("vectorize", name, (False, True)))
            if plan.rule != "tile":
                knobs.append(GridKnob("pack", name, ("", *pack_candidates(op, None))))
        elif plan.rule == "rfactor":
            axis = op.reduce_axis[0]
            factors = [d for d in divisors(axis.extent) if d > 1] or [1]
            knobs.append(GridKnob("tiles", name, tuple((d,) for d in factors), axis.name))
        elif plan.rule in ("simple", "root"):
            knobs.append(GridKnob("vectorize", name, (False, True)))
        elif plan.rule == "tensorize":
            options = tensorize.knob_options(op, target)
            knobs += [GridKnob("tiles", name, values, axis) for axis, values in options]
            knobs.append(GridKnob("parallel", name, (0,) if threads == 1 else (1,)))
            continue
        if plan.rule in ("inline", "fused"):
            continue
        parallel = (0,) if threads == 1 else tuple(range(1, max(1, len(op.axis)) + 1))
        if plan.rule == "simple":
            elsewhere = [] if name in outputs else [f"at:{i}" for i in range(AT_POSITIONS)]
            if name not in outputs and not op.reduce_axis:
                elsewhere.append("inline")
            places = [("root", p) for p in parallel] + [(where, 0) for where in elsewhere]
            knobs.append(GridKnob("placement", name, tuple(places)))
        else:
            knobs.append(GridKnob("parallel", name, parallel))
        knobs.append(GridKnob("unroll", name, UNROLL_STEPS))
    return sorted(knobs, key=lambda k: GRID_ORDER.index(k.table))


def axis_extents(ops: Mapping[str, ComputeOp]) -> dict[str, dict[str, int]]:
    """Per stage, the extent of each spatial and reduction axis with a constant extent."""
    out: dict[str, dict[str, int]] = {}
    for name, op in ops.items():
        axes = {}
        for iv in (*op.axis, *op.reduce_axis):
            with contextlib.suppress(ValueError):  # a symbolic extent
                axes[iv.name] = as_int(iv.extent)
        out[name] = axes
    return out


def tile_options(extent: int, lanes: int = 1) -> tuple[tuple[int, ...], ...]:
    """Inner tile factors (levels 1-3) of a spatial axis that sampling can draw: every ordered
    factorization whose product divides ``extent``, then (an innermost axis longer than a vector)
    the ones whose innermost factor is one or two vectors and does not divide."""
    exact = [e.size[1:] for e in split_entities(extent, 4, "factors")]
    if lanes <= 1 or extent <= lanes:
        return tuple(exact)
    known = set(exact)
    outer = dict.fromkeys(f[:2] for f in exact)
    extra = [(a, b, v) for a, b in outer for v in (lanes, 2 * lanes) if (a, b, v) not in known]
    return (*exact, *extra)


def _radix_product(knobs: list[GridKnob]) -> int:
    return math.prod(len(k.options) for k in knobs)
