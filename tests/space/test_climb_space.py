"""The generated space's reach and moves on a user-defined operator with no hand-written schedule
(an NHWC convolution with a batch of 1 and an explicit padding stage): sampled programs give every
thread work, tile mutation reaches the outermost level, every move changes the program, and the
space holds a multi-level tiled, vectorized, parallel program that computes the right answer."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

import autosched as asc
from autosched.space.annotate import TILED, Annotation, outer_extents, sample_parallel
from autosched.space.generated import SketchProgram, SketchSpace
from autosched.space.mutate import mutate, mutate_parallel, mutate_tile_size

HW, CIN, COUT = 12, 16, 32


@asc.workload("test_climb_conv_nhwc")
def conv_nhwc(hw: int, cin: int, cout: int) -> list[asc.Tensor]:
    """NHWC 3x3 convolution, batch 1, 'same' padding in a stage of its own."""
    x = asc.placeholder((1, hw, hw, cin), name="X")
    w = asc.placeholder((3, 3, cin, cout), name="W")
    xp = asc.compute(
        (1, hw + 2, hw + 2, cin),
        lambda n, h, v, c: asc.if_then_else(asc.all(h >= 1, h <= hw, v >= 1, v <= hw),
                                            x[n, h - 1, v - 1, c], 0.0),
        name="Xp")
    rh, rw, rc = (asc.reduce_axis(e, name=n) for e, n in ((3, "rh"), (3, "rw"), (cin, "rc")))
    y = asc.compute(
        (1, hw, hw, cout),
        lambda n, h, v, f: asc.sum(xp[n, h + rh, v + rw, rc] * w[rh, rw, rc, f], axis=[rh, rw, rc]),
        name="Y")
    return [x, w, y]


WORKLOAD = asc.get_workload("test_climb_conv_nhwc", (HW, CIN, COUT))


def tiled(space: SketchSpace, program: SketchProgram) -> list[str]:
    return [p.stage for p in space.sketches[program.sketch].plans if p.rule in TILED]


@pytest.mark.parametrize(("threads", "share"), [(2, 1.0), (4, 0.95)])
def test_sampled_programs_give_every_thread_work(threads: int, share: float) -> None:
    space = SketchSpace(WORKLOAD, f"c -num-threads={threads}")
    rng = random.Random(0)
    busy = []
    for _ in range(200):
        program = space.sample(rng)
        for stage in tiled(space, program):
            outer = outer_extents(space.ops[stage], program.annotation.tiles[stage])
            # the batch axis (extent 1) comes first: fusing it alone would run on one core
            busy.append(math.prod(outer[: program.annotation.parallel[stage]]) >= threads)
    assert len(busy) == 200 and sum(busy) >= share * len(busy)  # a prior: a few draws may miss
    one = SketchSpace(WORKLOAD, "c -num-threads=1")
    assert all(one.sample(rng).annotation.parallel["Y"] == 0 for _ in range(20))


def test_sample_parallel_fuses_enough_loops() -> None:
    rng = random.Random(1)
    assert {sample_parallel([1, 1, 6, 4], 4, rng) for _ in range(100)} == {3, 4}
    assert {sample_parallel([1, 1], 4, rng) for _ in range(50)} == {1, 2}  # none suffices: any count


def test_tile_mutation_reaches_the_outermost_level() -> None:
    extents = {"Y": {"n": 1, "h": HW, "v": HW, "f": COUT, "rh": 3, "rw": 3, "rc": CIN}}
    start = Annotation(tiles={"Y": {"n": [1, 1, 1], "h": [HW, 1, 1], "v": [1, 1, HW], "f": [1, 2, 16],
                                    "rh": [3], "rw": [1], "rc": [CIN]}})
    rng = random.Random(2)
    outer_seen, rc_seen = set(), set()
    for _ in range(300):
        ann = Annotation(tiles={"Y": {a: list(f) for a, f in start.tiles["Y"].items()}})
        assert mutate_tile_size(ann, rng, extents)
        for axis, factors in ann.tiles["Y"].items():
            assert extents["Y"][axis] % math.prod(factors) == 0, (axis, factors)
        outer_seen.add(HW // math.prod(ann.tiles["Y"]["h"]))
        rc_seen.add(ann.tiles["Y"]["rc"][0])
    assert outer_seen >= {1, 2, 3}  # h's outer level (1 at the start) gained a factor 2 or 3
    assert rc_seen >= {CIN, CIN // 2}  # a reduction factor moves to the outer level too
    # without the extents, the inner levels only trade factors: the outer level stays
    for _ in range(100):
        ann = Annotation(tiles={"Y": {"h": [HW, 1, 1]}})
        mutate_tile_size(ann, rng)
        assert math.prod(ann.tiles["Y"]["h"]) == HW


def test_every_mutation_changes_the_program() -> None:
    space = SketchSpace(WORKLOAD, "c -num-threads=2")
    rng = random.Random(3)
    for _ in range(200):
        program = space.sample(rng)
        assert mutate(program.annotation, rng, space.extents) != program.annotation
    ann = Annotation(parallel={"Y": 1})
    assert mutate_parallel(ann, rng) and ann.parallel["Y"] == 2  # 1 - 1 would leave it at 1


@pytest.mark.requires("gcc")
def test_the_space_holds_a_tiled_vectorized_parallel_program() -> None:
    space = SketchSpace(WORKLOAD, "c -num-threads=2")
    rng = random.Random(4)
    lanes = space.target.vector_lanes("float32")
    for _ in range(200):
        program = space.sample(rng)
        ann = program.annotation
        tiles = ann.tiles.get("Y", {})
        if (tiles and ann.vectorize["Y"] and tiles["f"][-1] % lanes == 0 and ann.parallel["Y"] > 0
                and all(f > 1 for f in tiles["f"][1:])
                and math.prod(outer_extents(space.ops["Y"], tiles)) > 1):
            break
    else:
        pytest.fail("no multi-level tiled, vectorized, parallel program in 200 samples")
    sched = space.schedule(program)
    kinds = {type(s).__name__ for s in sched.steps}
    loops = {getattr(s, "annotation", None) for s in sched.steps if getattr(s, "stage", "") == "Y"}
    assert {"SplitStep", "ReorderStep"} <= kinds and {"vectorize", "parallel"} <= loops
    f = asc.build(sched, WORKLOAD.tensors(), "c -num-threads=2")
    inputs = WORKLOAD.random_inputs(0)
    expected = WORKLOAD.reference(*inputs)[0]
    out = np.full_like(expected, np.nan)
    f(*inputs, out)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
