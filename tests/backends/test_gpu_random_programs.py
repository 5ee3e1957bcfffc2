"""Random programs from the GPU sketch space of every built-in operator, the first as the sampler
draws it and the others without its limit check: each either runs on a real OpenCL device (PoCL's
CPU device in CI) and matches the numpy reference, or fails the limits check, and then the GPU
builder records it as ``INSTANTIATION_ERROR`` (never a wrong answer). The programs that run also
compile with NVRTC for sm_80 and sm_90.

Programs per operator: 1 in CI (a PoCL build takes 2-8 s per program on 2 loaded cores, and the
CI budget of these tests is about a minute), more with ``AUTOSCHED_RANDOM_PROGRAMS=N`` (50 is the
issue's figure; about 10% of raw draws are rejected, all for a shared copy smaller than the
block's thread count)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
from gpu_cases import WORKLOADS, draw_unchecked
from repro import reproducible, stable_seed

import autosched as asc
from autosched.backends import CudaBackend, backend_for
from autosched.backends.cuda import nvrtc_compile
from autosched.lower import lower
from autosched.runner import MeasureErrorNo, MeasureInput, MeasureOption
from autosched.space.gpu_space import GpuSketchSpace
from autosched.target import Target

pytestmark = pytest.mark.requires("pyopencl")

SAMPLES = int(os.environ.get("AUTOSCHED_RANDOM_PROGRAMS", "1"))
TARGET = "opencl"

@pytest.mark.requires("nvrtc")
@pytest.mark.parametrize(("name", "args"), WORKLOADS, ids=[f"{n}{a}" for n, a in WORKLOADS])
def test_random_gpu_programs_run_correctly_or_are_instantiation_errors(
    name: str, args: tuple, tmp_path: Path
) -> None:
    task = asc.Task(name, args, target=TARGET)
    wl = task.workload
    space = GpuSketchSpace(wl, TARGET)
    seed = stable_seed("gpu", name, args)
    rng = random.Random(seed)
    cuda = backend_for("cuda")
    assert isinstance(cuda, CudaBackend)
    rejected: list[MeasureInput] = []
    for i in range(SAMPLES):  # the first as the tuner samples (checked), then raw draws
        program = space.sample(rng) if i == 0 else draw_unchecked(space, rng)
        sched = space.schedule(program)
        with reproducible(sched.steps, seed, workload=wl, sample=i):
            if space.check(program) is not None:
                rejected.append(MeasureInput(task, tuple(sched.steps)))
                continue
            f = asc.build(sched, wl.tensors(), TARGET)
            inputs = wl.random_inputs(i)
            outs = [np.full(t.shape, np.nan, t.dtype) for t in wl.outputs]
            f(*inputs, *outs)
            for got, want in zip(outs, wl.reference(*inputs), strict=True):
                np.testing.assert_allclose(
                    got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max()))
                )
            func = lower(sched, wl.tensors(), gpu=True)
            for arch in ("sm_80", "sm_90"):
                source = cuda.program(func, Target.parse(f"cuda -arch={arch}")).source
                assert f".target {arch}" in nvrtc_compile(source, arch, cache_dir=tmp_path).decode()
    if rejected:
        builder = backend_for(task.target).builder(MeasureOption())
        for result in builder.build(rejected):
            assert result.error_no == MeasureErrorNo.INSTANTIATION_ERROR, result.error_msg


def test_drawn_programs_that_break_the_limits_are_instantiation_errors() -> None:
    """A device with few threads and little shared memory rejects most draws: each is recorded
    with its reason before any compiler runs."""
    task = asc.Task(
        "matmul", (64, 64, 64), target="opencl -max-threads-per-block=32 -shared-memory-bytes=1024"
    )
    space = GpuSketchSpace(task.workload, task.target)
    rng = random.Random(4)
    programs = [draw_unchecked(space, rng) for _ in range(12)]
    reasons = [space.check(p) for p in programs]
    bad = [p for p, why in zip(programs, reasons, strict=True) if why is not None]
    assert bad, "the small device should reject some draws"
    builder = backend_for(task.target).builder(MeasureOption())
    results = builder.build([MeasureInput(task, space.steps(p)) for p in bad])
    for result, why in zip(results, [r for r in reasons if r], strict=True):
        assert result.error_no == MeasureErrorNo.INSTANTIATION_ERROR
        assert why.split(":")[0] in result.error_msg
