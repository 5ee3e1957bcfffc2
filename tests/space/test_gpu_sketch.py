"""GPU sketches (Ansor's GPU rules): the derivation per operator, sampling and mutation within the
device's limits, the grid, and the default ``sketch`` space tuning end to end on a real OpenCL
device (PoCL's CPU device in CI)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.lower import lower
from autosched.lower.gpu import split_kernels
from autosched.records import load_records
from autosched.space.generated import SketchSpace
from autosched.space.gpu_sketch import block_threads, generate_gpu_sketches, local_size
from autosched.space.gpu_space import GpuSketchSpace, sketch_space
from autosched.target import Target


def _rules(name: str, args: tuple) -> list[str]:
    return [str(s) for s in generate_gpu_sketches(asc.get_workload(name, args).outputs)]


def test_gpu_sketches_follow_the_gpu_rules() -> None:
    assert _rules("matmul", (64, 64, 64)) == ["C: gpu_tile"]
    assert _rules("dense", (8, 16, 32)) == ["out: fused; dense: gpu_tile (fused into out)"]
    assert _rules("conv2d_nchw", (1, 8, 9, 9, 8, 3, 3, 1, 1)) == ["conv: gpu_tile; pad: inline"]
    assert _rules("max_pool2d", (1, 3, 8, 8, 3, 2, 1)) == ["pool: gpu_simple; pad: inline"]
    assert _rules("relu", (7, 33)) == ["out: gpu_simple"]
    softmax = _rules("softmax", (2, 1000))  # long rows: each reduction per thread or across a block
    assert len(softmax) == 4 and all("expval: inline" in s for s in softmax)
    assert any("maxelem: cross_thread" in s and "expsum: cross_thread" in s for s in softmax)
    assert _rules("softmax", (2, 16)) == [  # short rows: one row per thread only
        "softmax: gpu_simple; expsum: gpu_simple; expval: inline; maxelem: gpu_simple"
    ]


def test_the_default_space_of_a_gpu_target_is_the_gpu_one() -> None:
    wl = asc.get_workload("matmul", (32, 32, 32))
    assert isinstance(sketch_space(wl, "opencl"), GpuSketchSpace)
    assert isinstance(sketch_space(wl, "cuda -arch=sm_90"), GpuSketchSpace)
    assert type(sketch_space(wl, "c")) is SketchSpace


@pytest.mark.parametrize("target", ["opencl -max-threads-per-block=64", "cuda"])
def test_samples_and_mutants_keep_the_device_limits(target: str) -> None:
    tgt = Target.parse(target)
    limit = tgt.max_threads_per_block or 0
    wl = asc.get_workload("conv2d_nchw", (1, 8, 12, 12, 16, 3, 3, 1, 1))
    space = GpuSketchSpace(wl, tgt)
    rng = random.Random(5)
    for _ in range(8):
        program = space.sample(rng)
        (plan,) = [p for p in space.sketches[program.sketch].plans if p.rule == "gpu_tile"]
        assert space.check(program) is None  # lowers, and every kernel fits
        func = split_kernels(lower(space.schedule(program), wl.tensors(), gpu=True), limit, 48 << 10)
        (kernel,) = func.kernels
        assert kernel.threads == block_threads(plan, program.annotation) <= limit
        assert sorted(b.name for b in kernel.shared) == ["kernel.shared", "pad.shared"]
        child = space.mutate(program, rng)
        assert space.is_valid(child) and local_size(child.annotation.tiles["conv"]) <= 64
        assert block_threads(plan, child.annotation) <= limit


def test_grid_points_are_programs_of_the_space() -> None:
    wl = asc.get_workload("softmax", (4, 200))
    space = GpuSketchSpace(wl, "opencl -max-threads-per-block=256")  # not the device's own limit
    assert (
        len(space.sketches) == 4 and space.grid_size() == 4 * 4**3 * 4**3
    )  # sketches x threads^3 x unroll^3
    for index in (0, 17, space.grid_size() - 1):
        program = space.grid_point(index)
        assert space.is_valid(program) and space.check(program) is None


@pytest.mark.requires("pyopencl")
def test_tuning_with_the_default_space_on_opencl(tmp_path: Path) -> None:
    task = asc.Task("matmul", (24, 20, 12), target="opencl")
    log = tmp_path / "matmul.jsonl"
    result = asc.tune(task, trials=2, log=str(log), seed=1)
    assert result.valid_trials == 2 and result.errors == {}
    programs = [r.program for r in load_records(str(log)) if r.program]  # remeasurements carry none
    assert len(programs) >= 2 and all(p["space"] == "sketch" for p in programs)
    f = asc.load_best(str(log), task)
    a, b = task.workload.random_inputs(2)
    c = np.full((24, 20), np.nan, dtype=np.float32)
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
