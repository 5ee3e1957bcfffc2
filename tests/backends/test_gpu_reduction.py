"""Cross-thread reduction (TVM's ``rfactor`` + ``bind`` of a reduction to ``threadIdx.x``): sum
and max reduced across the threads of a block through shared memory, run on a real OpenCL device
(PoCL's CPU device in CI) against numpy on dividing and non-dividing sizes, with several rows per
block; the softmax schedule that uses it; the CUDA source compiled with NVRTC; bad bindings as
clear errors."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.backends import CudaBackend, OpenCLBackend, backend_for
from autosched.backends.cuda import nvrtc_compile
from autosched.backends.gpu_schedules import softmax_gpu
from autosched.backends.opencl import OpenCLKernel
from autosched.driver import arg_specs
from autosched.lower import lower
from autosched.lower.gpu import split_kernels
from autosched.schedule import ScheduleError
from autosched.target import Target

RNG = np.random.default_rng(3)


def _row_reduce(m: int, n: int, kind: str) -> list[asc.Tensor]:
    A = asc.placeholder((m, n), name="A")
    k = asc.reduce_axis(n, name="k")
    fn = asc.sum if kind == "sum" else asc.max
    return [A, asc.compute((m,), lambda i: fn(A[i, k], axis=k), name="B")]


def _cross_thread(args: list[asc.Tensor], threads: int, rows: int, rfactor: bool) -> asc.Schedule:
    """Rows over blocks (``rows`` per block on threadIdx.y), each row reduced by ``threads``
    threads on threadIdx.x: with rfactor (the partial sums a stage computed at the bound loop)
    or by binding the inner half of the split reduction axis directly."""
    B = args[-1]
    s = asc.create_schedule(B)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=threads)
    if rfactor:
        BF = s.rfactor(B, ki)
        ki = s[B].op.reduce_axis[0]
        s[BF].compute_at(s[B], ki)
    bx, ty = s[B].split(s[B].op.axis[0], factor=rows)
    s[B].bind(bx, asc.thread_axis("blockIdx.x"))
    s[B].bind(ty, asc.thread_axis("threadIdx.y"))
    s[B].bind(ki, asc.thread_axis("threadIdx.x"))
    return s


CASES = [  # (m, n, kind, threads, rows per block, rfactor)
    (8, 64, "sum", 16, 1, True),  # dividing
    (7, 100, "max", 32, 2, True),  # non-dividing rows and columns
    (5, 37, "sum", 8, 4, False),  # bound directly, a serial part per thread
    (3, 5, "max", 8, 1, True),  # fewer columns than threads
    (6, 300, "sum", 24, 3, False),  # a thread count that is no power of two
]


@pytest.mark.requires("pyopencl")
@pytest.mark.parametrize("m, n, kind, threads, rows, rfactor", CASES)
def test_cross_thread_reductions_match_numpy(
    m: int, n: int, kind: str, threads: int, rows: int, rfactor: bool
) -> None:
    args = _row_reduce(m, n, kind)
    s = _cross_thread(args, threads, rows, rfactor)
    (kernel,) = split_kernels(lower(s, args, gpu=True), 1024, 48 << 10).kernels
    assert kernel.block == (min(threads, n), rows, 1)
    assert [b.name for b in kernel.shared] == ["B.red_buf"]
    a = RNG.standard_normal((m, n)).astype(np.float32)
    b = np.full(m, np.nan, dtype=np.float32)
    asc.build(s, args, target="opencl")(a, b)
    np.testing.assert_allclose(b, a.sum(axis=1) if kind == "sum" else a.max(axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.requires("pyopencl")
def test_a_scalar_reduction_is_one_block() -> None:
    A = asc.placeholder((300,), name="A")
    k = asc.reduce_axis(300, name="k")
    S = asc.compute((), lambda: asc.sum(A[k], axis=k), name="S")
    s = asc.create_schedule(S)
    ko, ki = s[S].split(k, factor=128)
    s[S].reorder(ki, ko)
    s[S].bind(ki, asc.thread_axis("threadIdx.x"))
    (kernel,) = split_kernels(lower(s, [A, S], gpu=True), 1024, 48 << 10).kernels
    assert (kernel.grid, kernel.block) == ((1, 1, 1), (128, 1, 1))
    a = RNG.standard_normal(300).astype(np.float32)
    out = np.full((), np.nan, dtype=np.float32)
    asc.build(s, [A, S], target="opencl")(a, out)
    np.testing.assert_allclose(out, a.sum(), rtol=1e-5, atol=1e-5)


@pytest.mark.requires("pyopencl")
def test_the_barriers_between_tree_steps_are_needed() -> None:
    """Without its barriers the tree reads slots that other work-items have not written yet."""
    args = _row_reduce(4, 256, "sum")
    program = OpenCLBackend().program(
        lower(_cross_thread(args, 64, 1, True), args, gpu=True), Target.parse("opencl")
    )
    specs = arg_specs(asc.create_schedule(args[-1]), args)
    a = RNG.standard_normal((4, 256)).astype(np.float32)
    results = []
    for source in (program.source, program.source.replace("barrier(CLK_LOCAL_MEM_FENCE);", "")):
        b = np.full(4, np.nan, dtype=np.float32)
        OpenCLKernel(replace(program, source=source), specs)(a, b)
        results.append(np.allclose(b, a.sum(axis=1), rtol=1e-5, atol=1e-5))
    assert results == [True, False]


@pytest.mark.requires("pyopencl")
def test_softmax_reduces_each_row_across_a_block() -> None:
    m, n = 4, 1000
    task = asc.Task("softmax", (m, n), target="opencl")
    tensors = task.workload.tensors()
    s = softmax_gpu(tensors, "opencl", threads=64)
    kernels = split_kernels(lower(s, tensors, gpu=True), 1024, 48 << 10).kernels
    assert [k.grid[0] for k in kernels] == [m, m, m]  # one block per row, not one thread per row
    assert [[b.name for b in k.shared] for k in kernels] == [["maxelem.red_buf"], ["expsum.red_buf"], []]
    (data,) = task.workload.random_inputs(1)[:1]
    (want,) = task.workload.reference(data.copy())
    got = np.full(want.shape, np.nan, dtype=want.dtype)
    asc.build(s, tensors, target="opencl")(data, got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


@pytest.mark.requires("nvrtc")
def test_cross_thread_reduction_compiles_with_nvrtc(tmp_path: Path) -> None:
    backend = backend_for("cuda")
    assert isinstance(backend, CudaBackend)
    args = _row_reduce(7, 100, "max")
    program = backend.program(lower(_cross_thread(args, 32, 2, True), args, gpu=True), Target.parse("cuda"))
    assert "__shared__ __align__(16) float B_red_buf[64];" in program.source
    ptx = nvrtc_compile(program.source, "sm_90", cache_dir=tmp_path).decode()
    assert ".visible .entry default_function_kernel0(" in ptx and "bar.sync" in ptx


def test_bad_cross_thread_bindings_are_clear_errors() -> None:
    args = _row_reduce(8, 64, "sum")
    B = args[-1]
    s = asc.create_schedule(B)
    with pytest.raises(ScheduleError, match="only to threadIdx"):
        s[B].bind(B.op.reduce_axis[0], asc.thread_axis("blockIdx.x"))
    # a data loop inside the reduction: each thread would need several accumulators
    s = asc.create_schedule(B)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    s[B].reorder(ko, ki, B.op.axis[0])
    s[B].bind(ki, asc.thread_axis("threadIdx.x"))
    with pytest.raises(ScheduleError, match="data loop i is inside a reduction loop"):
        lower(s, args, gpu=True)
    # two reduction loops on threads
    s = asc.create_schedule(B)
    ko, ki = s[B].split(B.op.reduce_axis[0], factor=16)
    s[B].bind(B.op.axis[0], asc.thread_axis("blockIdx.x"))
    s[B].bind(ko, asc.thread_axis("threadIdx.y"))
    s[B].bind(ki, asc.thread_axis("threadIdx.x"))
    with pytest.raises(ScheduleError, match="are all bound to threads: bind at most one"):
        lower(s, args, gpu=True)
    # more threads than a block may have: rejected before any compiler runs
    args = _row_reduce(64, 64, "sum")
    s = _cross_thread(args, 64, 32, True)
    with pytest.raises(ScheduleError, match="2048 threads per block"):
        split_kernels(lower(s, args, gpu=True), 1024, 48 << 10)
