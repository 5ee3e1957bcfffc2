"""Generated spaces (Ansor): sketches, random annotation, mutation, replay, on every built-in
operator and on user-defined computations. Every sampled program is built and checked."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
from odd_shapes import ODD_SHAPES
from repro import reproducible, stable_seed

import autosched as asc
from autosched.expr import Expr, Var
from autosched.space.annotate import MAX_LOCAL_TILE, Annotation, sample_factors
from autosched.space.generated import SketchProgram, SketchSpace
from autosched.space.sketch import generate_sketches

TARGET = "c -num-threads=2"
#: random programs built and checked per workload (by default 60; more with
#: AUTOSCHED_RANDOM_PROGRAMS=N, e.g. 1000 before a release)
SAMPLES = int(os.environ.get("AUTOSCHED_RANDOM_PROGRAMS", "60"))

# small shapes, most of them not dividing any tile size
WORKLOADS = [
    *ODD_SHAPES,
    ("softmax", (3, 300)),
    ("relu", (7, 33)),
    ("add", (5, 17)),
    ("fused_conv2d_packed", (1, 5, 9, 7, 12, 3, 3, 2, 1, 4, "bias,add,relu")),  # kernel blocks of 4
]


def check(wl: asc.Workload, sched: asc.Schedule, inputs_seed: int, seed: int | None = None,
          **context: object) -> None:
    """Build ``sched``, run it on inputs drawn with ``inputs_seed``, compare with the reference.

    A failure names ``seed`` (of the random programs), the workload, the inputs' seed, ``context``
    (which program of the sequence) and the program's steps."""
    with reproducible(sched.steps, seed, workload=wl, inputs_seed=inputs_seed, **context):
        f = asc.build(sched, wl.tensors(), TARGET)
        inputs = wl.random_inputs(inputs_seed)
        outs = [np.full(t.shape, np.nan, t.dtype) for t in wl.outputs]
        f(*inputs, *outs)
        for got, want in zip(outs, wl.reference(*inputs), strict=True):
            scale = max(1.0, float(np.abs(want).max()))
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale)


def test_sketches_follow_the_derivation_rules() -> None:
    def rules(name: str, args: tuple) -> list[str]:
        return [str(s) for s in generate_sketches(asc.get_workload(name, args).outputs)]

    assert rules("matmul", (64, 64, 64)) == ["C: tile", "C: tile_cache"]
    assert rules("dense", (8, 16, 32)) == ["out: fused; dense: tile_fuse (fused into out)"]
    conv = rules("conv2d_nchw", (1, 8, 9, 9, 8, 3, 3, 1, 1))
    assert conv == ["conv: tile; pad: simple", "conv: tile_cache; pad: simple"]
    assert rules("max_pool2d", (1, 3, 8, 8, 3, 2, 1)) == ["pool: simple; pad: simple"]
    softmax = rules("softmax", (2, 1000))  # little spatial parallelism: rfactor is an option
    assert len(softmax) == 4 and all("expval: inline" in s for s in softmax)
    assert any("expsum: rfactor" in s for s in softmax)


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(("name", "args"), WORKLOADS, ids=[f"{n}{a}" for n, a in WORKLOADS])
def test_sampled_programs_are_valid_and_correct(name: str, args: tuple) -> None:
    wl = asc.get_workload(name, args)
    space = SketchSpace(wl, TARGET)
    seed = stable_seed(name, args)  # not hash(): that is salted per process
    rng = random.Random(seed)
    for i in range(SAMPLES):
        check(wl, space.schedule(space.sample(rng)), i, seed=seed, sample=i)


@pytest.mark.parametrize(("name", "args"), WORKLOADS[:6], ids=[f"{n}{a}" for n, a in WORKLOADS[:6]])
def test_programs_replay_from_json_to_the_same_source(name: str, args: tuple) -> None:
    wl = asc.get_workload(name, args)
    space = SketchSpace(wl, TARGET)
    rng = random.Random(7)
    for i in range(40):
        program = space.sample(rng)
        sched = space.schedule(program)
        with reproducible(sched.steps, seed=7, sample=i, workload=wl):
            text = json.dumps(asc.steps_to_json(sched.steps))
            fresh = asc.get_workload(name, args)
            replayed = asc.Schedule.replay(fresh.outputs, asc.steps_from_json(json.loads(text)))
            assert asc.emit(replayed, fresh.tensors(), TARGET) == asc.emit(sched, wl.tensors(), TARGET)
            text = json.dumps(program.annotation.to_json())
            again = SketchProgram(program.sketch, Annotation.from_json(json.loads(text)))
            assert space.steps(again) == tuple(sched.steps)


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(("name", "args"), WORKLOADS[:8], ids=[f"{n}{a}" for n, a in WORKLOADS[:8]])
def test_mutation_and_crossover_keep_programs_valid(name: str, args: tuple) -> None:
    wl = asc.get_workload(name, args)
    space = SketchSpace(wl, TARGET)
    rng = random.Random(11)
    population = [space.sample(rng) for _ in range(6)]
    for i in range(60):
        parent = rng.choice(population)
        child = space.mutate(parent, rng) if i % 3 else space.crossover(parent, rng.choice(population), rng)
        check(wl, space.schedule(child), i, seed=11, generation=i)
        population[rng.randrange(len(population))] = child


def test_mutation_keeps_tile_products() -> None:
    wl = asc.get_workload("matmul", (64, 48, 32))
    space = SketchSpace(wl, TARGET)
    rng = random.Random(3)
    program = space.sample(rng)
    for _ in range(50):
        child = space.mutate(program, rng)
        for stage, axes in child.annotation.tiles.items():
            for axis, factors in axes.items():
                if len(factors) == 3:  # a factor moved between levels 0-3: the product still divides
                    assert space.extents[stage][axis] % np.prod(factors) == 0
                    assert factors[1] * factors[2] <= MAX_LOCAL_TILE
        program = child


def test_tile_factors_are_any_factorization() -> None:
    rng = random.Random(0)
    seen = {tuple(sample_factors(60, 3, rng)) for _ in range(500)}
    assert all(60 % int(np.prod(f)) == 0 for f in seen)
    assert any(3 in f or 5 in f for f in seen)  # not only powers of two
    assert len(seen) > 20


@pytest.mark.requires("gcc")
def test_generated_space_of_a_user_defined_operator() -> None:
    """A fused matmul + bias + GELU-like epilogue and a 1-D stencil, written here, never registered
    as built-ins: their spaces come from the DAG alone."""

    @asc.workload("test_matmul_gelu", override=True)
    def matmul_gelu(m: int, n: int, k: int) -> list[asc.Tensor]:
        A = asc.placeholder((m, k), name="A")
        W = asc.placeholder((k, n), name="W")
        bias = asc.placeholder((n,), name="bias")
        r = asc.reduce_axis(k, name="r")
        mm = asc.compute((m, n), lambda i, j: asc.sum(A[i, r] * W[r, j], axis=r), name="mm")

        def gelu(i: Var, j: Var) -> Expr:
            x = mm[i, j] + bias[j]
            return 0.5 * x * (1.0 + asc.tanh(0.79788456 * x))

        out = asc.compute((m, n), gelu, name="gelu")
        return [A, W, bias, out]

    @asc.workload("test_stencil", override=True)
    def stencil(n: int) -> list[asc.Tensor]:
        X = asc.placeholder((n,), name="X")
        Y = asc.compute((n - 2,), lambda i: X[i] + X[i + 1] + X[i + 2], name="Y")
        return [X, Y]

    gelu = asc.get_workload("test_matmul_gelu", (13, 21, 9))
    sketches = [str(s) for s in SketchSpace(gelu, TARGET).sketches]
    assert sketches == ["gelu: fused; mm: tile_fuse (fused into gelu)"]
    rng = random.Random(5)
    for name, args in (("test_matmul_gelu", (13, 21, 9)), ("test_stencil", (101,))):
        wl = asc.get_workload(name, args)
        space = SketchSpace(wl, TARGET)
        for i in range(40):
            check(wl, space.schedule(space.sample(rng)), i, seed=5)


def _key(program: SketchProgram) -> str:
    return json.dumps([program.sketch, program.annotation.to_json()], sort_keys=True)


def test_grid_size_is_exact_and_holds_every_sampled_program() -> None:
    """matmul 4x6x2 on 2 threads, by hand: tiles i (4 = 2^2: 10 ordered splits into 4 levels),
    j (6 = 2*3: 4*4 = 16), k (divisors of 2: 2); vectorize 2, parallel fusion 1-2, unroll 4;
    the cache-write sketch can also pack A or B (3)."""
    space = SketchSpace(asc.get_workload("matmul", (4, 6, 2)), TARGET)
    per_sketch = 10 * 16 * 2 * 2 * 2 * 4
    assert space.grid_size() == per_sketch + per_sketch * 3
    points = {_key(space.grid_point(i)) for i in range(space.grid_size())}
    assert len(points) == space.grid_size()  # distinct indices, distinct programs
    rng = random.Random(2)
    assert all(_key(space.sample(rng)) in points for _ in range(2000))
    with pytest.raises(IndexError):
        space.grid_point(space.grid_size())
    with pytest.raises(IndexError):
        space.grid_point(-1)


def test_grid_order_varies_the_cheapest_knob_first() -> None:
    space = SketchSpace(asc.get_workload("matmul", (4, 6, 2)), TARGET)
    first, second, fifth = (space.grid_point(i).annotation for i in (0, 1, 4))
    assert first.tiles == second.tiles and first.vectorize == second.vectorize
    assert [first.unroll["C"], second.unroll["C"]] == [0, 16]
    assert fifth.unroll["C"] == 0 and fifth.vectorize["C"] != first.vectorize["C"]


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(("name", "args"), [WORKLOADS[0], WORKLOADS[4], WORKLOADS[7]])
def test_grid_points_build_and_compute_the_reference(name: str, args: tuple) -> None:
    wl = asc.get_workload(name, args)
    space = SketchSpace(wl, TARGET)
    size = space.grid_size()
    rng = random.Random(4)
    indices = [0, size - 1, *(rng.randrange(size) for _ in range(40))]
    valid = [(index, space.grid_point(index)) for index in indices if space.is_valid(space.grid_point(index))]
    assert len(valid) >= 10
    for i, (index, program) in enumerate(valid[:6]):
        check(wl, space.schedule(program), i, grid_index=index)


def test_is_valid_flags_what_sampling_never_draws() -> None:
    space = SketchSpace(asc.get_workload("matmul", (64, 512, 512)), TARGET)
    rng = random.Random(8)
    assert all(space.is_valid(space.sample(rng)) for _ in range(200))
    cache = next(i for i, sk in enumerate(space.sketches) if "tile_cache" in str(sk))

    def program(i_tiles: list[int], pack: str) -> SketchProgram:
        tiles = {"C": {"i": i_tiles, "j": [1, 16, 32], "k": [1]}}
        return SketchProgram(cache, Annotation(tiles, {"C": 1}, {"C": True}, {"C": 0}, {}, {"C": pack}))

    assert space.is_valid(program([1, 1, 1], "A"))
    assert not space.is_valid(program([1, 1, 1], "B"))  # a 512 x 512 panel of B
    assert not space.is_valid(program([1, 8, 8], ""))  # 64 x 512 accumulators


#: draws sketch programs, their mutations and crossovers with one seed and prints their steps
_DRAW = """
import random
import autosched as asc
from autosched.space.generated import SketchSpace
space = SketchSpace(asc.get_workload("conv2d_nchw", (1, 8, 9, 9, 16, 3, 3, 1, 1)), "c -num-threads=2")
rng = random.Random(5)
population = [space.sample(rng) for _ in range(8)]
for i in range(40):
    a, b = rng.choice(population), rng.choice(population)
    child = space.crossover(a, b, rng) if i % 2 else space.mutate(a, rng)
    population[rng.randrange(len(population))] = child
    print(repr(space.steps(child)))
"""


def test_mutation_and_crossover_draw_the_same_programs_in_every_process() -> None:
    """One seed, one sequence of programs, whatever the process's string hashing (the evolutionary
    search depends on it: a crossover once walked its stages in set order)."""
    runs = []
    for hash_seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run([sys.executable, "-c", _DRAW], env=env, capture_output=True, text=True,
                              timeout=300, check=True)
        runs.append(done.stdout)
    assert runs[0].count("\n") == 40 and runs[0] == runs[1] == runs[2]
