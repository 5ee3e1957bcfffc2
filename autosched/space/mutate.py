"""Mutation and crossover of annotated sketches, for evolutionary search (Ansor).

Each operator returns a new :class:`~autosched.space.annotate.Annotation` of the same sketch that
is again a valid program: tile sizes change but keep their product (a factor moves from one level
to another), the parallel granularity, the auto-unroll depth or a compute location changes.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable

from .annotate import MAX_LOCAL_TILE, UNROLL_STEPS, Annotation, divisors, local_tile

Mutation = Callable[[Annotation, random.Random], bool]


def _prime_factors(n: int) -> list[int]:
    out, d = [], 2
    while d * d <= n:
        while n % d == 0:
            out.append(d)
            n //= d
        d += 1
    return out + ([n] if n > 1 else [])


def mutate_tile_size(ann: Annotation, rng: random.Random) -> bool:
    """Move a prime factor between two levels of one axis (the product stays the same); a
    one-level (reduction) factor becomes another divisor of its old tile times the outer part."""
    choices = [(st, ax) for st, axes in ann.tiles.items() for ax, f in axes.items() if f]
    if not choices:
        return False
    stage, axis = rng.choice(choices)
    factors = list(ann.tiles[stage][axis])
    if len(factors) == 1:
        options = [d for d in divisors(factors[0] * rng.choice((1, 2, 3, 4))) if d != factors[0]]
        if not options:
            return False
        factors[0] = rng.choice(options)
    else:
        src = rng.choice([i for i, f in enumerate(factors) if f > 1] or [0])
        if factors[src] == 1:
            return False
        p = rng.choice(_prime_factors(factors[src]))
        dst = rng.choice([i for i in range(len(factors)) if i != src])
        factors[src] //= p
        factors[dst] *= p
        if local_tile({**ann.tiles[stage], axis: factors}) > MAX_LOCAL_TILE:
            return False
    ann.tiles[stage][axis] = factors
    return True


def mutate_parallel(ann: Annotation, rng: random.Random) -> bool:
    """Fuse one more or one fewer outer loop into the parallel loop."""
    stages = [st for st, p in ann.parallel.items() if p > 0]
    if not stages:
        return False
    stage = rng.choice(stages)
    ann.parallel[stage] = max(1, ann.parallel[stage] + rng.choice((-1, 1)))
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


def mutate(ann: Annotation, rng: random.Random) -> Annotation:
    """A copy of ``ann`` changed by one applicable mutation (a copy unchanged if none applies)."""
    out = copy.deepcopy(ann)
    for op in rng.sample(MUTATIONS, len(MUTATIONS)):
        if op(out, rng):
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
