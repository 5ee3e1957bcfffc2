"""GPU lowering and the OpenCL / CUDA printers: kernels, launches, barriers, and the checks that turn
an unlaunchable schedule into a clear error before any compiler runs (no device needed here)."""

from __future__ import annotations

import re

import pytest

import autosched as asc
from autosched.backends import OpenCLBackend, backend_for
from autosched.backends.gpu_schedules import elementwise_gpu, matmul_gpu
from autosched.lower import lower
from autosched.lower.gpu import split_kernels
from autosched.runner import MeasureErrorNo, MeasureInput, MeasureOption
from autosched.schedule import ScheduleError
from autosched.target import Target


def _matmul(m: int, n: int, k: int) -> list[asc.Tensor]:
    A = asc.placeholder((m, k), name="A")
    B = asc.placeholder((k, n), name="B")
    r = asc.reduce_axis(k, name="k")
    return [A, B, asc.compute((m, n), lambda i, j: asc.sum(A[i, r] * B[r, j], axis=r), name="C")]


def _axpy(n: int) -> list[asc.Tensor]:
    X = asc.placeholder((n,), name="X")
    Y = asc.placeholder((n,), name="Y")
    return [X, Y, asc.compute((n,), lambda i: X[i] * 2.0 + Y[i], name="Z")]


def test_opencl_and_cuda_kernels_of_an_elementwise_schedule() -> None:
    args = _axpy(100)
    s = elementwise_gpu(args, threads=32)
    ocl = asc.emit(s, args, target="opencl")
    assert "__kernel void default_function_kernel0(__global float* restrict X" in ocl
    assert "get_group_id(0)" in ocl and "get_local_id(0)" in ocl
    cuda = asc.emit(s, args, target="cuda")
    assert 'extern "C" __global__ void __launch_bounds__(32) default_function_kernel0(' in cuda
    assert "float* __restrict__ X" in cuda and "(int)threadIdx.x" in cuda and "get_local_id" not in cuda
    program = OpenCLBackend().program(lower(s, args, gpu=True), Target.parse("opencl"))
    (launch,) = program.launches
    assert (launch.grid, launch.block, launch.global_size) == ((4, 1, 1), (32, 1, 1), (128, 1, 1))


def test_matmul_gets_shared_tiles_and_a_barrier_on_each_side_of_the_reads() -> None:
    args = _matmul(64, 64, 64)
    s = matmul_gpu(args, block=8, reg=4, k_tile=8)
    func = split_kernels(lower(s, args, gpu=True), 1024, 48 << 10)
    (k,) = func.kernels
    assert (k.grid, k.block) == ((2, 2, 1), (8, 8, 1))
    assert sorted(b.name for b in k.shared) == ["A.shared", "B.shared"]
    ocl = asc.emit(s, args, target="opencl")
    assert "__local float A_shared[256];" in ocl and "__local float B_shared[256];" in ocl
    # fetch, barrier, compute from the tiles, barrier (before the next fetch overwrites them)
    body = ocl[ocl.index("C_local_k_outer = 0") :]
    order = [m.group(0) for m in re.finditer(r"A_shared\[[^\]]*\] = |barrier\(CLK_LOCAL_MEM_FENCE\)|"
                                              r"\* B_shared\[", body)]
    assert order[0].startswith("A_shared") and order[-3:] == [
        "barrier(CLK_LOCAL_MEM_FENCE)", "* B_shared[", "barrier(CLK_LOCAL_MEM_FENCE)"]
    cuda = asc.emit(s, args, target="cuda")
    assert cuda.count("__syncthreads();") == 2 and "__shared__ __align__(16) float A_shared[256];" in cuda


def _error(s: asc.Schedule, args: list[asc.Tensor], target: str) -> str:
    with pytest.raises(ScheduleError) as info:
        asc.emit(s, args, target=target)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_limits_are_checked_before_any_compiler_runs() -> None:
    args = _matmul(64, 64, 64)
    s = matmul_gpu(args, block=8, reg=4, k_tile=8)
    assert "64 threads per block (8 x 8 x 1) exceed the device limit of 32" in _error(
        s, args, "opencl -max-threads-per-block=32")
    assert "shared memory of 2048 bytes (A.shared, B.shared) exceeds the device limit of 1024" in _error(
        s, args, "cuda -shared-memory-bytes=1024")


def test_mismatched_extents_of_one_thread_index_are_an_error() -> None:
    A = asc.placeholder((8, 16), name="A")
    C = asc.compute((8, 16), lambda i, j: A[i, j] * 2.0, name="C")
    s = asc.create_schedule(C)
    s[C].bind(C.op.axis[0], asc.thread_axis("blockIdx.x"))
    s[C].bind(C.op.axis[1], asc.thread_axis("threadIdx.x"))
    shared = s.cache_read(A, "shared", [C])
    s[shared].compute_at(s[C], C.op.axis[0])
    _, tx = s[shared].split(shared.op.axis[1], factor=8)  # a fetch on 8 threads, the compute on 16
    s[shared].bind(tx, asc.thread_axis("threadIdx.x"))
    assert "threadIdx.x has extent 8 in one stage and 16 in another" in _error(s, [A, C], "opencl")


def test_a_fetch_smaller_than_the_block_still_launches_every_thread() -> None:
    args = _matmul(33, 17, 9)  # a 9-wide slice of A fetched by 8 x 8 threads: the extra ones masked
    func = split_kernels(lower(matmul_gpu(args, block=8, reg=4, k_tile=8), args, gpu=True), 1024, 48 << 10)
    assert [(k.grid, k.block) for k in func.kernels] == [((1, 2, 1), (8, 8, 1))]


def test_unbound_loops_are_an_error() -> None:
    args = _axpy(64)
    s = asc.create_schedule(args[-1])
    assert "unbound loops outside the kernel: Z has no loop bound to blockIdx/threadIdx" in _error(
        s, args, "opencl")


def _chain() -> tuple[asc.Schedule, list[asc.Tensor]]:
    """A -> B -> C, C's rows on blocks and its columns on threads."""
    A = asc.placeholder((8, 16), name="A")
    B = asc.compute((8, 16), lambda i, j: A[i, j] + 1.0, name="B")
    C = asc.compute((8, 16), lambda i, j: B[i, j] * 2.0, name="C")
    s = asc.create_schedule(C)
    s[C].bind(C.op.axis[0], asc.thread_axis("blockIdx.x"))
    s[C].bind(C.op.axis[1], asc.thread_axis("threadIdx.x"))
    return s, [A, B, C]


def test_a_global_store_that_every_thread_would_repeat_is_an_error() -> None:
    s, (A, B, C) = _chain()
    s[B].compute_at(s[C], C.op.axis[0])  # B is an argument: computed whole rows by every thread
    assert "the store to B runs on every thread of threadIdx.x" in _error(s, [A, B, C], "opencl")


def test_each_root_stage_is_a_kernel_and_intermediates_are_host_temporaries() -> None:
    s, (A, B, C) = _chain()
    s[B].bind(B.op.axis[0], asc.thread_axis("blockIdx.x"))
    program = OpenCLBackend().program(
        lower(s, [A, C], gpu=True), Target.parse("opencl"))
    assert [(x.name, x.grid, x.block) for x in program.launches] == [
        ("default_function_kernel0", (8, 1, 1), (1, 1, 1)),
        ("default_function_kernel1", (8, 1, 1), (16, 1, 1)),
    ]
    assert program.temps == (("float32", 128),)
    assert "__global float* restrict B)" in program.source  # every kernel takes the temporary


def test_symbolic_shapes_and_cpu_targets_are_refused_with_the_reason() -> None:
    n = asc.size_var("n")
    X = asc.placeholder((n,), name="X")
    Y = asc.compute((n,), lambda i: X[i] + 1.0, name="Y")
    s = asc.create_schedule(Y)
    bo, ti = s[Y].split(Y.op.axis[0], factor=32)
    s[Y].bind(bo, asc.thread_axis("blockIdx.x"))
    s[Y].bind(ti, asc.thread_axis("threadIdx.x"))
    assert "GPU kernels take fixed shapes" in _error(s, [X, Y], "opencl")
    args = _axpy(64)
    with pytest.raises(ScheduleError, match="bind needs a GPU target"):
        asc.emit(elementwise_gpu(args), args, target="c")


def test_the_gpu_builder_records_an_unlaunchable_program_as_instantiation_error(tmp_path: object) -> None:
    task = asc.Task("matmul", (64, 64, 64), target="opencl -max-threads-per-block=16")
    good = matmul_gpu(task.workload.tensors(), block=4, reg=2, k_tile=8).steps
    bad = matmul_gpu(task.workload.tensors(), block=8, reg=4, k_tile=8).steps
    builder = backend_for(task.target).builder(MeasureOption())
    results = builder.build([MeasureInput(task, good), MeasureInput(task, bad)])
    assert results[0].error_no == MeasureErrorNo.NO_ERROR and results[0].lib_path
    assert results[1].error_no == MeasureErrorNo.INSTANTIATION_ERROR
    assert "exceed the device limit of 16" in results[1].error_msg
