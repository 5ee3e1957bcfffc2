"""Hand-written GPU schedules and GPU templates for batch_matmul, dense, conv2d (direct and tiled
with shared memory), depthwise conv2d and pooling: built, run on a real OpenCL device (PoCL's CPU
device in CI) and checked against the numpy references on dividing and non-dividing shapes; the
same lowered programs printed as CUDA compile with NVRTC for sm_80 and sm_90."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
from gpu_cases import CASE_IDS, CASES, TEMPLATE_CASES, check_outputs

import autosched as asc
from autosched.backends import CudaBackend, OpenCLBackend
from autosched.backends.cuda import nvrtc_compile
from autosched.backends.gpu_conv import conv2d_gpu
from autosched.lower import lower
from autosched.space.templates import instantiate, template_space
from autosched.target import Target


@pytest.mark.requires("pyopencl")
@pytest.mark.parametrize("name, args, schedule, kw", CASES, ids=CASE_IDS)
def test_hand_written_schedules_match_the_reference_on_opencl(
    name: str, args: tuple, schedule: Callable[..., asc.Schedule], kw: dict
) -> None:
    task = asc.Task(name, args, target="opencl")
    tensors = task.workload.tensors()
    check_outputs(task, asc.build(schedule(tensors, "opencl", **kw), tensors, target="opencl"))


def test_the_tiled_conv2d_stages_input_and_filter_in_shared_memory() -> None:
    task = asc.Task("conv2d_nchw", (1, 8, 16, 16, 16, 3, 3, 1, 1), target="opencl")
    tensors = task.workload.tensors()
    source = asc.emit(conv2d_gpu(tensors, "opencl"), tensors, target="opencl")
    assert "__local float pad_shared[" in source and "__local float kernel_shared[" in source
    assert source.count("barrier(CLK_LOCAL_MEM_FENCE);") == 2
    with pytest.raises(ValueError, match="exceed the target's limit of 256"):
        conv2d_gpu(tensors, "opencl -max-threads-per-block=256", threads=(8, 8, 8))


@pytest.mark.requires("nvrtc")
def test_the_same_programs_compile_as_cuda_with_nvrtc_for_sm_80_and_sm_90(tmp_path: Path) -> None:
    for name, args, schedule, kw in CASES:
        task = asc.Task(name, args, target="cuda")
        func = lower(schedule(task.workload.tensors(), "cuda", **kw), task.workload.tensors(), gpu=True)
        program = CudaBackend().program(func, Target.parse("cuda"))
        for arch in ("sm_80", "sm_90"):
            ptx = nvrtc_compile(program.source, arch, cache_dir=tmp_path).decode()
            assert f".target {arch}" in ptx and ".visible .entry default_function_kernel0(" in ptx, name
        assert OpenCLBackend().program(func, Target.parse("opencl")).launches == program.launches



@pytest.mark.requires("pyopencl")
@pytest.mark.parametrize("name, args", TEMPLATE_CASES, ids=[f"{c[0]}{c[1]}" for c in TEMPLATE_CASES])
def test_gpu_template_points_run_and_match_the_reference(name: str, args: tuple) -> None:
    """Sampled points of the template each build, run and match numpy (a block smaller than its
    thread tile, or a shared tile with fewer elements than the block has threads, still launches
    every thread: the extra ones are masked)."""
    task = asc.Task(name, args, target="opencl")
    space = template_space(task.workload, "opencl")
    for index in random.Random(0).sample(range(len(space)), min(2, len(space))):
        s = instantiate(task.workload, "opencl", index)
        check_outputs(task, asc.build(s, task.workload.tensors(), target="opencl"), seed=index)
