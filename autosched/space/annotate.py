"""Random annotation (Ansor): fill a sketch's holes to get a complete program.

An :class:`Annotation` holds every choice, as plain JSON-friendly values, keyed by stage:

- ``tiles``      inner tile factors per axis: three per spatial axis (levels 1-3 of ``SSRSRS``;
                 level 0 is what remains), one per reduction axis (level 1); ``rfactor`` stages
                 keep their split factor under the axis name;
- ``parallel``   how many outer spatial loops are fused into the parallel loop (0: none); sampling
                 prefers outer tiles and counts that give every thread work (:func:`sample_parallel`);
- ``vectorize``  whether the innermost spatial loop is vectorized;
- ``unroll``     the auto-unroll depth (``auto_unroll_max_step``) from {0, 16, 64, 512};
- ``location``   for ``simple`` stages: ``root``, ``inline``, or ``at:<leaf index>`` of its consumer;
- ``pack``       for fused tiles: an input to copy into a contiguous local panel (``cache_read``)
                 once per outer tile of the axes it depends on ("" for none).

:func:`apply_sketch` turns (sketch, annotation) into a :class:`~autosched.schedule.Schedule` by
calling the public primitives, so the program is a replayable list of steps.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..expr import ComputeOp, Load, PlaceholderOp, Tensor, Var, as_int, static_shape, topo_order, walk
from ..schedule import Schedule, Stage, create_schedule, effective_readers
from ..target import Target
from . import tensorize
from .sketch import Sketch, StagePlan

UNROLL_STEPS = (0, 16, 64, 512)
MAX_LOCAL_TILE = 4096  # elements of a register/cache tile (keeps stack arrays small)
MAX_PANEL = 1 << 16  # elements of a packed operand panel (on the stack of each thread)
AT_POSITIONS = 8  # a ``simple`` stage computed inside its consumer goes in one of its first 8 loops
TILED = ("tile", "tile_fuse", "tile_cache")


@dataclass
class Annotation:
    """The filled holes of a sketch (see the module docstring)."""

    tiles: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    parallel: dict[str, int] = field(default_factory=dict)
    vectorize: dict[str, bool] = field(default_factory=dict)
    unroll: dict[str, int] = field(default_factory=dict)
    location: dict[str, str] = field(default_factory=dict)
    pack: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A deep copy as plain dicts and lists (written directly: ``dataclasses.asdict`` is ~30x
        slower, and the search calls this once per program it draws)."""
        return {
            "tiles": {st: {ax: f.copy() if isinstance(f, list) else f for ax, f in axes.items()}
                      for st, axes in self.tiles.items()},
            "parallel": dict(self.parallel),
            "vectorize": dict(self.vectorize),
            "unroll": dict(self.unroll),
            "location": dict(self.location),
            "pack": dict(self.pack),
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Annotation:
        return Annotation(**{k: dict(v) for k, v in data.items()})


# ---------------------------------------------------------------------------- sampling


@functools.lru_cache(maxsize=4096)
def divisors(n: int) -> tuple[int, ...]:
    """The divisors of ``n`` in increasing order."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return tuple(sorted(set(small + [n // d for d in small])))


#: how often the innermost factor of a vectorizable axis is drawn among the divisors that fill
#: whole vectors (at most :data:`MAX_VECTORS` of them): on the logs of bench_guided.py such programs
#: ran 3-10x faster (median) than the others, so uniform draws wasted most of a small budget
VECTOR_PRIOR = 0.7
MAX_VECTORS = 8


def sample_factors(extent: int, count: int, rng: random.Random, lanes: int = 1) -> list[int]:
    """``count`` inner tile factors, outermost first, whose product divides ``extent`` (any
    factorization, not only powers of two); now and then the innermost is a vector-width multiple
    that need not divide (the split then has a guarded tail).

    With ``lanes`` > 1 the innermost factor is, with probability :data:`VECTOR_PRIOR`, a divisor
    that is a multiple of ``lanes`` (up to ``MAX_VECTORS`` vectors) when there is one: a prior
    towards whole vectors, not a restriction (every factorization can still be drawn)."""
    out: list[int] = []
    rest = extent
    whole = [d for d in divisors(extent) if d % lanes == 0 and d <= MAX_VECTORS * lanes] if lanes > 1 else []
    for level in range(count):
        prior = level == 0 and whole and rng.random() < VECTOR_PRIOR
        f = rng.choice(whole) if prior else rng.choice(divisors(rest))
        out.append(f)
        rest //= f
    out.reverse()  # the last factor drawn from the full extent becomes the outermost inner level
    if lanes > 1 and extent > lanes and rng.random() < 0.2:
        out[-1] = lanes * rng.choice((1, 2))
    return out


def _spatial(op: ComputeOp) -> list[str]:
    return [iv.name for iv in op.axis]


def _reduce(op: ComputeOp) -> list[str]:
    return [iv.name for iv in op.reduce_axis]


def sample_annotation(
    sketch: Sketch,
    outputs: Sequence[Tensor],
    target: Target,
    rng: random.Random,
    ops: Mapping[str, ComputeOp] | None = None,
) -> Annotation:
    """A random complete annotation of ``sketch`` (``ops``: :func:`stage_ops` of ``outputs``, if
    the caller keeps it)."""
    ops = stage_ops(outputs) if ops is None else ops
    ann = Annotation()
    threads = target.num_threads or 1
    for plan in sketch.plans:
        op = ops[plan.stage]
        lanes = target.vector_lanes(op.dtype)
        if plan.rule in TILED:
            fused = plan.rule != "tile"
            tiles = {a: [1, 1, 1] for a in _spatial(op)}
            for _ in range(20):  # local tiles must stay small, outer tiles enough for the threads
                drawn = {
                    a: sample_factors(as_int(iv.extent), 3, rng, lanes if a == op.axis[-1].name else 1)
                    for a, iv in zip(_spatial(op), op.axis, strict=True)
                }
                if fused and local_tile(drawn) > MAX_LOCAL_TILE:
                    continue
                tiles = drawn
                if _product(outer_extents(op, drawn)) >= threads:
                    break
            tiles |= {
                a: sample_factors(as_int(iv.extent), 1, rng)
                for a, iv in zip(_reduce(op), op.reduce_axis, strict=True)
            }
            ann.tiles[plan.stage] = tiles
            ann.vectorize[plan.stage] = rng.random() < 0.9
            if fused:
                options = [t for t in pack_candidates(op, tiles) if rng.random() < 0.5]
                ann.pack[plan.stage] = options[0] if options else ""
        elif plan.rule == "rfactor":
            axis = op.reduce_axis[0]
            ann.tiles[plan.stage] = {
                axis.name: [rng.choice([d for d in divisors(axis.extent) if d > 1] or [1])]
            }
        elif plan.rule == "simple":
            ann.location[plan.stage] = _sample_location(plan, op, outputs, rng)
            ann.vectorize[plan.stage] = rng.random() < 0.8
        elif plan.rule == "tensorize":
            ann.tiles[plan.stage], ann.parallel[plan.stage] = tensorize.sample(op, target, rng)
            continue
        elif plan.rule == "root":  # as "simple", its location fixed (none to mutate)
            ann.vectorize[plan.stage] = rng.random() < 0.8
        if plan.rule not in ("inline", "fused"):
            attached = ann.location.get(plan.stage, "root") != "root"
            if threads == 1 or attached:
                ann.parallel[plan.stage] = 0
            elif plan.rule in TILED:
                outer = outer_extents(op, ann.tiles[plan.stage])
                ann.parallel[plan.stage] = sample_parallel(outer, threads, rng)
            else:
                ann.parallel[plan.stage] = rng.randint(1, max(1, len(op.axis)))
            ann.unroll[plan.stage] = rng.choice(UNROLL_STEPS)
    return ann


def outer_extents(op: ComputeOp, tiles: Mapping[str, Sequence[int]]) -> list[int]:
    """The outermost tile level's extent per spatial axis of a tiled stage (what the inner levels
    leave of the axis, a guarded tail rounded up): the loops its parallel loop fuses."""
    return [-(-as_int(iv.extent) // _product(tiles[iv.name])) for iv in op.axis]


def sample_parallel(outer: Sequence[int], threads: int, rng: random.Random) -> int:
    """How many of the ``outer`` loops the parallel loop fuses: uniformly among the counts that give
    it at least ``threads`` iterations (fusing only a batch axis of 1 runs on one core), among all
    counts where none does."""
    counts = range(1, max(1, len(outer)) + 1)
    enough = [k for k in counts if _product(outer[:k]) >= threads]
    return rng.choice(enough or list(counts))


def local_tile(tiles: Mapping[str, Sequence[int]]) -> int:
    """Elements of a fused stage's local (register/cache) tile: levels 2-3 of its spatial axes."""
    return _product(f[1] * f[2] for f in tiles.values() if len(f) == 3)


def pack_candidates(op: ComputeOp, tiles: Mapping[str, Sequence[int]] | None) -> list[str]:
    """Inputs of a tiled stage worth packing: read without some spatial index (reused across it)
    and small enough, per outer tile, for a panel on the stack (``tiles=None``: any size)."""
    out = []
    spatial = {iv.var.name: iv for iv in op.axis}
    for load in (n for n in walk(op.body) if isinstance(n, Load)):
        if load.tensor.name in out or not isinstance(load.tensor.op, PlaceholderOp):
            continue
        used = {v.name for i in load.indices for v in walk(i) if isinstance(v, Var)}
        if not set(spatial) - used:
            continue
        if tiles is None:
            out.append(load.tensor.name)
            continue
        size = 1
        for dim, index in zip(static_shape(load.tensor.shape), load.indices, strict=True):
            names = {v.name for v in walk(index) if isinstance(v, Var)} & set(spatial)
            size *= min(dim, _product(_product(tiles[a]) for a in names)) if names else dim
        if size <= MAX_PANEL:
            out.append(load.tensor.name)
    return out


def _product(values: Any) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def _sample_location(plan: StagePlan, op: ComputeOp, outputs: Sequence[Tensor], rng: random.Random) -> str:
    if op.name in {t.name for t in outputs}:
        return "root"
    choices = ["root", "at"]
    if not op.reduce_axis:
        choices.append("inline")
    pick = rng.choice(choices)
    return f"at:{rng.randint(0, AT_POSITIONS - 1)}" if pick == "at" else pick


def stage_ops(outputs: Sequence[Tensor]) -> dict[str, ComputeOp]:
    """The compute ops behind ``outputs`` by name, producers first."""
    return {op.name: op for op in topo_order(list(outputs)) if isinstance(op, ComputeOp)}


# ---------------------------------------------------------------------------- applying


def apply_sketch(sketch: Sketch, ann: Annotation, outputs: Sequence[Tensor], target: Target) -> Schedule:
    """The schedule of (sketch, annotation), built with public primitives only."""
    s = create_schedule(list(outputs))
    for plan in sketch.plans:
        rule = plan.rule
        if rule == "inline":
            s[plan.stage].compute_inline()
        elif rule == "tile":
            _tile(s, s[plan.stage], ann, plan.stage)
        elif rule == "tile_fuse":
            _tile_fused(s, s[plan.stage], s[plan.consumer or ""], ann, plan.stage, target)
        elif rule == "tile_cache":
            cache = s.cache_write(s[plan.stage].op.output(0), "local")
            _tile_fused(s, s[cache], s[plan.stage], ann, plan.stage, target)
        elif rule == "rfactor":
            _rfactor(s, plan.stage, ann, target)
        elif rule in ("simple", "root"):
            _simple(s, s[plan.stage], ann, plan.stage, target)
        elif rule == "tensorize":
            tensorize.apply(s, plan.stage, ann.tiles[plan.stage], ann.parallel.get(plan.stage, 0), target)
    return s


def _split_levels(stage: Stage, axis: str, factors: list[int]) -> list[str]:
    """Split ``axis`` into ``len(factors) + 1`` loops, outermost first."""
    names = []
    current = axis
    for i, _ in enumerate(factors):
        inner = _product(factors[i:])
        outer, rest = stage.split(current, max(1, inner))
        names.append(outer.name)
        current = rest.name
    return [*names, current]


def _annotate_outer(s: Schedule, stage: Stage, outer: list[str], ann: Annotation, key: str) -> None:
    p = min(ann.parallel.get(key, 0), len(outer))
    if p >= 1:
        loop = stage.fuse(*outer[:p]).name if p > 1 else outer[0]
        stage.parallel(loop)
    step = ann.unroll.get(key, 0)
    if step:
        stage.pragma(stage.leaves[0], "auto_unroll_max_step", step)


def _tile(s: Schedule, stage: Stage, ann: Annotation, key: str) -> None:
    """SSRSRS multi-level tiling of one stage."""
    op = stage.op
    tiles = ann.tiles[key]
    sp = [_split_levels(stage, a, tiles[a]) for a in _spatial(op)]  # type: ignore[arg-type]
    rd = [_split_levels(stage, a, tiles[a]) for a in _reduce(op)]  # type: ignore[arg-type]
    order = [lv[0] for lv in sp] + [lv[1] for lv in sp] + [lv[0] for lv in rd]
    order += [lv[2] for lv in sp] + [lv[1] for lv in rd] + [lv[3] for lv in sp]
    stage.reorder(*order)
    if ann.vectorize.get(key) and sp:
        stage.vectorize(sp[-1][3])
    _annotate_outer(s, stage, [lv[0] for lv in sp], ann, key)


def _tile_fused(s: Schedule, inner: Stage, outer: Stage, ann: Annotation, key: str, target: Target) -> None:
    """Tile ``outer`` (the consumer) on levels 0-1, compute ``inner`` in it, tile ``inner`` RSRS."""
    tiles = ann.tiles[key]
    names = _spatial(inner.op)  # type: ignore[arg-type]
    packed = ann.pack.get(key, "")
    panel = s.cache_read(s[packed].op.output(0), "local", [inner]) if packed else None
    out_axes = [iv.name for iv in outer.op.axis]
    levels = [
        _split_levels(outer, a, [tiles[n][0], tiles[n][1] * tiles[n][2]])
        for a, n in zip(out_axes, names, strict=True)
    ]
    top = [lv[0] for lv in levels]
    if panel is not None:  # the axes the panel depends on go outermost; it is copied inside them
        used = _axes_reading(inner.op, f"{packed}.local", names)  # type: ignore[arg-type]
        top = [lv[0] for n, lv in zip(names, levels, strict=True) if n in used] + [
            lv[0] for n, lv in zip(names, levels, strict=True) if n not in used
        ]
    outer.reorder(*top, *[lv[1] for lv in levels], *[lv[2] for lv in levels])
    if ann.vectorize.get(key) and levels:
        outer.vectorize(levels[-1][2])
    inner.compute_at(outer, levels[-1][1])
    sp = [_split_levels(inner, a, [tiles[a][2]]) for a in names]
    rd = [_split_levels(inner, a, tiles[a]) for a in _reduce(inner.op)]  # type: ignore[arg-type]
    inner.reorder(*[lv[0] for lv in rd], *[lv[0] for lv in sp], *[lv[1] for lv in rd], *[lv[1] for lv in sp])
    if ann.vectorize.get(key) and sp:
        inner.vectorize(sp[-1][1])
    if panel is not None:
        ann_one = Annotation(parallel={key: min(1, ann.parallel.get(key, 0))}, unroll=ann.unroll)
        _annotate_outer(s, outer, top, ann_one, key)
        s[panel].compute_at(outer, outer.leaves[0])
        s[panel].vectorize(s[panel].op.axis[-1])
    else:
        _annotate_outer(s, outer, top, ann, key)
    if ann.unroll.get(key):
        inner.pragma(inner.leaves[0], "auto_unroll_max_step", ann.unroll[key])


def _axes_reading(op: ComputeOp, tensor: str, names: list[str]) -> set[str]:
    """Spatial axes of ``op`` that index its reads of ``tensor``."""
    used: set[str] = set()
    for load in (n for n in walk(op.body) if isinstance(n, Load) and n.tensor.name == tensor):
        used |= {v.name for i in load.indices for v in walk(i) if isinstance(v, Var)}
    return used & set(names)


def _rfactor(s: Schedule, name: str, ann: Annotation, target: Target) -> None:
    stage = s[name]
    axis = stage.op.reduce_axis[0]
    _, ki = stage.split(axis, ann.tiles[name][axis.name][0])
    rf = s.rfactor(stage.op.output(0), ki)
    _simple(s, s[rf], ann, name, target)
    _simple(s, s[name], ann, name, target)


def _simple(s: Schedule, stage: Stage, ann: Annotation, key: str, target: Target) -> None:
    """Root, inline or compute_at placement; parallel outer loops; vectorized inner loop."""
    where = ann.location.get(key, "root")
    if where == "inline" and not stage.op.reduce_axis and stage.name not in s.outputs:
        stage.compute_inline()
        return
    readers = effective_readers(s, stage.name) if where.startswith("at:") else []
    if len(readers) == 1 and readers[0].leaves:
        reader = readers[0]
        stage.compute_at(reader, reader.leaves[min(int(where[3:]), len(reader.leaves) - 1)])
    spatial = [iv.name for iv in stage.op.axis]
    lanes = target.vector_lanes(stage.op.dtype)
    vec = None
    if ann.vectorize.get(key) and not stage.op.reduce_axis and spatial and stage.op.axis[-1].extent > 1:
        _, inner = stage.split(spatial[-1], min(lanes, as_int(stage.op.axis[-1].extent)))
        stage.vectorize(inner)
        vec = inner.name
    if stage.attach == ("root",):
        outer = []
        for leaf in stage.leaves:
            if stage.kinds[leaf] != "data" or leaf == vec:
                break
            outer.append(leaf)
        _annotate_outer(s, stage, outer, ann, key)
