"""OpenCL end to end on a real OpenCL device (PoCL's CPU device in CI): hand-written GPU schedules
built, run and checked against numpy on dividing and non-dividing shapes; the inserted barriers
proven needed; compile errors, wrong answers and tuning as values through the GPU runner."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.backends import OpenCLBackend, backend_for
from autosched.backends.gpu_schedules import elementwise_gpu, matmul_gpu, softmax_gpu
from autosched.backends.opencl import OpenCLKernel
from autosched.driver import arg_specs
from autosched.lower import lower
from autosched.runner import CompileError, MeasureErrorNo, MeasureInput, MeasureOption
from autosched.runner.gpu_program import GpuProgram
from autosched.target import Target

pytestmark = pytest.mark.requires("pyopencl")

RNG = np.random.default_rng(0)
QUICK = MeasureOption(number=1, repeat=2, min_repeat_ms=0.0)


def _rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("m, n, k", [(64, 64, 64), (127, 255, 63)])
def test_tiled_shared_memory_matmul_matches_numpy(m: int, n: int, k: int) -> None:
    task = asc.Task("matmul", (m, n, k), target="opencl")
    A, B, C = task.workload.tensors()
    f = asc.build(matmul_gpu([A, B, C], block=8, reg=4, k_tile=8), [A, B, C], target="opencl")
    a, b = _rand(m, k), _rand(k, n)
    c = np.full((m, n), np.nan, dtype=np.float32)
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


CASES = [("relu", (64, 32), elementwise_gpu), ("relu", (7, 45), elementwise_gpu),
         ("add", (10, 100), elementwise_gpu), ("softmax", (64, 100), softmax_gpu),
         ("softmax", (37, 19), softmax_gpu)]


@pytest.mark.parametrize("workload, args, schedule", CASES, ids=[f"{c[0]}{c[1]}" for c in CASES])
def test_operator_schedules_match_the_reference(workload: str, args: tuple, schedule: Callable) -> None:
    task = asc.Task(workload, args, target="opencl")
    tensors = task.workload.tensors()
    f = asc.build(schedule(tensors, "opencl", threads=32), tensors, target="opencl")
    inputs = task.workload.random_inputs(1)
    (want,) = task.workload.reference(*[x.copy() for x in inputs])
    got = np.full(want.shape, np.nan, dtype=want.dtype)
    f(*inputs, got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("n", [1024, 1000])
def test_vectorized_loops_become_vload_vstore_where_they_fit(n: int) -> None:
    A = asc.placeholder((n,), name="A")
    B = asc.placeholder((n,), name="B")
    C = asc.compute((n,), lambda i: A[i] * 2.0 + B[i], name="C")
    s = asc.create_schedule(C)
    bo, rest = s[C].split(C.op.axis[0], factor=128)
    to, v = s[C].split(rest, factor=4)
    s[C].bind(bo, asc.thread_axis("blockIdx.x"))
    s[C].bind(to, asc.thread_axis("threadIdx.x"))
    s[C].vectorize(v)
    # a dividing extent stores whole vectors; a tail guard inside the loop keeps it scalar
    assert ("vstore4((" in asc.emit(s, [A, B, C], target="opencl")) == (n % 128 == 0)
    a, b = _rand(n), _rand(n)
    c = np.full(n, np.nan, dtype=np.float32)
    asc.build(s, [A, B, C], target="opencl")(a, b, c)
    np.testing.assert_allclose(c, a * 2 + b, rtol=1e-6)


def _matmul_program(m: int, n: int, k: int) -> tuple[GpuProgram, list[asc.Tensor]]:
    task = asc.Task("matmul", (m, n, k), target="opencl")
    tensors = task.workload.tensors()
    s = matmul_gpu(tensors, block=8, reg=2, k_tile=8)
    program = OpenCLBackend().program(lower(s, tensors, gpu=True), task.target)
    return program, tensors


def test_the_inserted_barriers_are_needed() -> None:
    """Without its barriers the same kernel reads tiles other work-items have not written yet."""
    program, tensors = _matmul_program(64, 64, 64)
    specs = arg_specs(asc.create_schedule(tensors[-1]), tensors)
    a, b = _rand(64, 64), _rand(64, 64)
    results = []
    for source in (program.source, program.source.replace("barrier(CLK_LOCAL_MEM_FENCE);", "")):
        c = np.full((64, 64), np.nan, dtype=np.float32)
        OpenCLKernel(replace(program, source=source), specs)(a, b, c)
        results.append(np.allclose(c, a @ b, rtol=1e-4, atol=1e-4))
    assert results == [True, False]


def test_a_source_the_driver_rejects_is_a_compile_error_with_the_build_log() -> None:
    program, tensors = _matmul_program(16, 16, 16)
    specs = arg_specs(asc.create_schedule(tensors[-1]), tensors)
    broken = replace(program, source=program.source.replace("C_local[", "no_such_buffer[", 1))
    with pytest.raises(CompileError, match="undeclared identifier 'C_local'"):  # its declaration is gone
        OpenCLKernel(broken, specs)


def test_the_runner_gives_times_wrong_answers_compile_errors_and_hangs_as_values(tmp_path: Path) -> None:
    task = asc.Task("matmul", (48, 40, 24), target="opencl")
    backend = backend_for(task.target)
    steps = matmul_gpu(task.workload.tensors(), block=4, reg=2, k_tile=8).steps
    builder = backend.builder(QUICK)
    builder.cache_dir = tmp_path  # type: ignore[attr-defined]
    (good,) = builder.build([MeasureInput(task, steps)])
    program = GpuProgram.from_json(Path(str(good.lib_path)).read_text())
    wrong = program.source.replace("] = 0.0f;", "] = 1.0f;", 1)  # the accumulator starts at 1
    hang = program.source.replace("{\n", "{ for (volatile int spin = 0; spin >= 0; spin *= 1) {}\n", 1)
    assert wrong != program.source and hang != program.source
    sources = {"wrong": wrong, "broken": program.source + "\n}", "hang": hang}
    paths = [replace(program, source=src).save(tmp_path / name) for name, src in sources.items()]
    builds = [good] + [replace(good, lib_path=str(p)) for p in paths]
    inputs = [MeasureInput(task, steps)] * len(builds)
    with backend.runner(QUICK) as runner:  # type: ignore[attr-defined]
        results = runner.run(inputs[:3], builds[:3])
    # a hang costs its run timeout, then a fresh worker measures the next candidate
    with backend.runner(replace(QUICK, run_timeout=5.0)) as runner:  # type: ignore[attr-defined]
        results += runner.run(inputs[:2], [builds[3], good])
    kinds = [r.error_no for r in results]
    assert kinds == [MeasureErrorNo.NO_ERROR, MeasureErrorNo.WRONG_ANSWER, MeasureErrorNo.COMPILE_ERROR,
                     MeasureErrorNo.RUN_TIMEOUT, MeasureErrorNo.NO_ERROR], [r.error_msg for r in results]
    assert len(results[0].costs) == 2 and all(c > 0 for c in results[0].costs)
    assert "elements differ" in results[1].error_msg


def test_tuning_matmul_on_opencl_with_the_gpu_template(tmp_path: Path) -> None:
    task = asc.Task("matmul", (64, 64, 64), target="opencl")
    result = asc.tune(task, trials=6, space="template", tuner="random", log=tmp_path / "t.jsonl",
                      option=QUICK, remeasure=0, seed=0)
    assert result.valid_trials >= 3 and result.best_gflops is not None and result.best_gflops > 0
    f = asc.load_best(tmp_path / "t.jsonl", task)
    a, b = _rand(64, 64), _rand(64, 64)
    c = np.zeros((64, 64), dtype=np.float32)
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    assert Target.parse("opencl").kind == "opencl"
