"""Mutation and crossover of annotated sketches, for evolutionary search (Ansor).

Each operator returns a new :class:`~autosched.space.annotate.Annotation` of the same sketch that
is again a valid program: a prime factor of a tile size moves from one level to another (the
outermost level, the number of tiles, included where the axis's extent is known), the parallel
granularity, the auto-unroll depth or a compute location changes.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable, Mapping

from .annotate import MAX_LOCAL_TILE, UNROLL_STEPS, Annotation, divisors, local_tile

#: per stage, the extent of each (static) axis by name: what the outermost tile level divides
Extents = Mapping[str, Mapping[str, int]]
Mutation = Callable[[Annotation, random.Random], bool]


def _prime_factors(n: int) -> list[int]:
    out, d = [], 2
    while d * d <= n:
        while n % d == 0:
            out.append(d)
            n //= d
        d += 1
    return out + ([n] if n > 1 else [])


def mutate_tile_size(ann: Annotation, rng: random.Random, extents: Extents | None = None) -> bool:
    """Move a prime factor from one tile level of an axis to another. With the axis's extent known
    (``extents``) and divided by the inner levels, the outermost level (what the inner levels leave
    of the extent) is one of the levels too, so the number of outer tiles can change (a reduction
    axis: its one inner factor becomes another divisor of the extent). Without it, only the inner
    levels trade factors (their product stays) and a one-level factor becomes another divisor of its
    old tile times a small multiple."""
    known = extents or {}
    choices = [(st, ax) for st, axes in ann.tiles.items() for ax, f in axes.items()
               if f and (max(f) > 1 or known.get(st, {}).get(ax, 0) > 1)]  # an axis of 1 cannot change
    if not choices:
        return False
    stage, axis = rng.choice(choices)
    factors = list(ann.tiles[stage][axis])
    extent = known.get(stage, {}).get(axis, 0)
    inner = math.prod(factors)
    whole = bool(extent) and extent % inner == 0
    if not whole and len(factors) == 1:
        options = [d for d in divisors(factors[0] * rng.choice((1, 2, 3, 4))) if d != factors[0]]
        if not options:
            return False
        ann.tiles[stage][axis] = [rng.choice(options)]
        return True
    levels = [extent // inner if whole else 1, *factors]
    first = 0 if whole else 1  # the outer level trades factors only when it is exact
    movable = [i for i in range(first, len(levels)) if levels[i] > 1]
    if not movable or len(levels) - first < 2:
        return False
    src = rng.choice(movable)
    p = rng.choice(_prime_factors(levels[src]))
    dst = rng.choice([i for i in range(first, len(levels)) if i != src])
    levels[src] //= p
    levels[dst] *= p
    factors = levels[1:]
    if len(factors) == 3 and local_tile({**ann.tiles[stage], axis: factors}) > MAX_LOCAL_TILE:
        return False
    ann.tiles[stage][axis] = factors
    return True


def mutate_parallel(ann: Annotation, rng: random.Random) -> bool:
    """Fuse one more or one fewer outer loop into the parallel loop."""
    stages = [st for st, p in ann.parallel.items() if p > 0]
    if not stages:
        return False
    stage = rng.choice(stages)
    ann.parallel[stage] += 1 if ann.parallel[stage] == 1 else rng.choice((-1, 1))  # never a no-op
    return True


def mutate_unroll(ann: Annotation, rng: random.Random) -> bool:
    """Pick another auto-unroll depth."""
    if not ann.unroll:
        return False
    stage = rng.choice(sorted(ann.unroll))
    ann.unroll[stage] = rng.choice([u for u in UNROLL_STEPS if u != ann.unroll[stage]])
    return True


def mutate_location(ann: Annotation, rng: random.Random) -> bool:
    """Move a ``simple`` stage: to the root, inline, or another loop of its consumer."""
    if not ann.location:
        return False
    stage = rng.choice(sorted(ann.location))
    old = ann.location[stage]
    options = [x for x in ("root", "inline", f"at:{rng.randint(0, 7)}") if x != old]
    ann.location[stage] = rng.choice(options)
    if ann.location[stage] != "root":
        ann.parallel[stage] = 0  # a stage inside another loop nest runs on that nest's threads
    return True


MUTATIONS: tuple[Mutation, ...] = (mutate_tile_size, mutate_parallel, mutate_unroll, mutate_location)


def mutate(ann: Annotation, rng: random.Random, extents: Extents | None = None) -> Annotation:
    """A copy of ``ann`` changed by one applicable mutation (a copy unchanged if none applies);
    ``extents`` (see :func:`mutate_tile_size`) lets tile mutations change the outermost level."""
    out = copy.deepcopy(ann)
    for op in rng.sample(MUTATIONS, len(MUTATIONS)):
        changed = mutate_tile_size(out, rng, extents) if op is mutate_tile_size else op(out, rng)
        if changed:
            break
    return out


def crossover(a: Annotation, b: Annotation, rng: random.Random) -> Annotation:
    """Per stage, take every choice from one parent or the other (both of the same sketch; a packed
    panel goes with the tiles it was sized for)."""
    child = copy.deepcopy(a)
    stages = sorted(set(a.parallel) | set(a.tiles) | set(a.location))  # one order in every process
    for stage in stages:
        if rng.random() < 0.5:
            for table in ("tiles", "parallel", "vectorize", "unroll", "location", "pack"):
                src, dst = getattr(b, table), getattr(child, table)
                if stage in src:
                    dst[stage] = copy.deepcopy(src[stage])
    return child
