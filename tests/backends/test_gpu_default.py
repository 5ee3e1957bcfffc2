"""The schedule a workload gets on a GPU before tuning (``default_schedule`` on ``opencl`` and
``cuda``): every built-in operator's default runs on a real OpenCL device (PoCL's CPU device in CI)
on dividing and non-dividing shapes and matches numpy; the generic schedule of any DAG puts a
reduction in a register at its epilogue's thread, or in a kernel of its own; its CUDA source
compiles with NVRTC."""

from __future__ import annotations

import pytest
from schedule_cases import SHAPES, check_against_reference

import autosched as asc
from autosched.backends import backend_for
from autosched.backends.cuda.driver import nvrtc_compile
from autosched.backends.gpu_default import generic_gpu
from autosched.ops.schedules import default_schedule
from autosched.schedule import ScheduleError

# matmul_lowp's inputs come packed for a CPU's int8/bf16 instructions; PoCL's device may lack doubles
CASES = [(name, shape_id, args) for name, shapes in SHAPES.items() for shape_id, args in shapes
         if name != "matmul_lowp" and "float64" not in args]


@pytest.mark.requires("pyopencl")
@pytest.mark.parametrize(("name", "shape_id", "args"), CASES, ids=[f"{n}-{s}" for n, s, _ in CASES])
def test_every_built_in_default_matches_numpy_on_opencl(name: str, shape_id: str, args: tuple) -> None:
    wl = asc.get_workload(name, args)
    s, how = default_schedule(wl, "opencl")
    assert how.startswith("autosched.backends.")  # the GPU's, not a CPU schedule
    check_against_reference(wl, s, "opencl")


@pytest.mark.requires("pyopencl")
@pytest.mark.parametrize(
    ("name", "args", "kernels"),
    [
        # the convolution accumulates in a register at the thread of its bias + add + ReLU epilogue
        ("fused_conv", ("2x8x9x7", "5x8x3x3", "2,2", "1,1,1,1", "1,1", 1, "bias,add,relu"), 1),
        # depthwise (groups == channels), dilated, uneven pads
        ("fused_conv", ("1x6x7x7", "6x1x3x3", "1,1", "1,0,2,1", "2,1", 6, "bias,relu"), 1),
        # a CPU's form, over flat pixels: the convolution, then its rows with the epilogue
        ("fused_conv2d", (2, 3, 9, 7, 5, 3, 3, 2, 1, 1, "bias,add,relu"), 2),
        # the row mean and variance are kernels of their own, the normalized output a third
        ("layer_norm", (5, 37), 3),
        ("instance_norm", (2, 3, 10), 3),
        ("global_avg_pool2d", (2, 5, 7, 3), 1),
        ("softmax_axis", (2, 7, 3), 3),
    ],
)
def test_the_generic_schedule_fuses_reductions_into_their_epilogue(
    name: str, args: tuple, kernels: int
) -> None:
    task = asc.Task(name, args, target="opencl")
    wl = task.workload
    s, how = default_schedule(wl, task.target)
    assert how == "autosched.backends.gpu_default.generic_gpu"
    program = backend_for(task.target).program(task.lowered(s.steps).func(), task.target)
    assert len(program.launches) == kernels
    assert all(launch.block[0] <= 64 for launch in program.launches)
    check_against_reference(wl, s, "opencl")


@pytest.mark.requires("pyopencl")
@pytest.mark.parametrize(("name", "args"), [
    ("fused_dense", (3, 11, 29, "bias,gelu")),
    ("fused_dense", (37, 20, 45, "bias,add,relu")),  # a residual input read at the output's index
    ("fused_batch_matmul", (2, 13, 17, 7, "")),
    ("fused_batch_matmul", (3, 9, 6, 10, "bias")),
])
def test_a_networks_gemms_get_the_shared_memory_kernel_with_their_epilogue(name: str, args: tuple) -> None:
    task = asc.Task(name, args, target="opencl")
    s, how = default_schedule(task.workload, task.target)
    assert how == "autosched.backends.gpu_schedules.fused_gemm_gpu"
    program = backend_for(task.target).program(task.lowered(s.steps).func(), task.target)
    assert len(program.launches) == 1 and "__local" in program.source  # tiles staged in shared memory
    check_against_reference(task.workload, s, "opencl")


def test_a_gpu_cannot_call_c() -> None:
    x = asc.placeholder((4,), name="x")
    copy = "static void copy(const float* a, float* b, int n) { while (n--) *b++ = *a++; }"
    y = asc.extern((4,), [x], lambda ins, outs: asc.call_extern("void", "copy", ins[0].data, outs[0].data, 4),
                   name="y", c_source=copy)
    z = asc.compute((4,), lambda i: y[i] * 2.0, name="z")
    with pytest.raises(ScheduleError, match="cannot call C"):
        generic_gpu([z], "opencl")


@pytest.mark.requires("nvrtc")
@pytest.mark.parametrize(("name", "args"), [("fused_conv2d", (1, 8, 9, 9, 16, 3, 3, 1, 1, 1, "bias,relu")),
                                            ("layer_norm", (4, 96)), ("matmul", (33, 65, 17))])
def test_cuda_defaults_compile_with_nvrtc(name: str, args: tuple) -> None:
    task = asc.Task(name, args, target="cuda -arch=sm_80")
    s, _ = default_schedule(task.workload, task.target)
    program = backend_for(task.target).program(task.lowered(s.steps).func(), task.target)
    for arch in ("sm_80", "sm_90"):
        assert b".entry" in nvrtc_compile(program.source, arch)
