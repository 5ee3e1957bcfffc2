"""CUDA on a real NVIDIA GPU (every test is marked: without pycuda and a visible device they skip
naming what is missing; ``scripts/gpu-check`` runs them where a GPU is): the hand-written schedules,
template points and random sketch programs of the OpenCL tests run through NVRTC and pycuda and
match numpy; the device's limits are read from the driver; the runner gives times, wrong answers,
compile errors, faults and hangs as values; tuning resumes from its log without measuring a
program twice; an exported record's host program checks and times the kernel.

Random programs per workload: 4 by default, more with ``AUTOSCHED_RANDOM_PROGRAMS=N``."""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from gpu_cases import CASE_IDS, CASES, TEMPLATE_CASES, WORKLOADS, check_outputs, draw_unchecked
from repro import reproducible, stable_seed

import autosched as asc
from autosched.backends import backend_for
from autosched.backends.cuda import device_arch
from autosched.backends.cuda.device import cuda_limits
from autosched.backends.gpu_schedules import matmul_gpu, softmax_gpu
from autosched.records import load_records
from autosched.runner import MeasureErrorNo, MeasureInput, MeasureOption
from autosched.runner.gpu_program import GpuProgram
from autosched.space.gpu_space import GpuSketchSpace
from autosched.space.templates import instantiate, template_space
from autosched.target import Target

pytestmark = pytest.mark.requires("pycuda")

SAMPLES = int(os.environ.get("AUTOSCHED_RANDOM_PROGRAMS", "4"))
QUICK = MeasureOption(number=1, repeat=2, min_repeat_ms=0.0)
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name, args, schedule, kw", CASES, ids=CASE_IDS)
def test_hand_written_schedules_match_the_reference_on_cuda(
    name: str, args: tuple, schedule: Callable[..., asc.Schedule], kw: dict
) -> None:
    task = asc.Task(name, args, target="cuda")
    tensors = task.workload.tensors()
    check_outputs(task, asc.build(schedule(tensors, "cuda", **kw), tensors, target="cuda"))


@pytest.mark.parametrize("rows, cols", [(37, 19), (64, 1000), (5, 4097)])
def test_softmax_with_its_cross_thread_reduction_matches_on_cuda(rows: int, cols: int) -> None:
    task = asc.Task("softmax", (rows, cols), target="cuda")
    tensors = task.workload.tensors()
    check_outputs(task, asc.build(softmax_gpu(tensors, "cuda", threads=128), tensors, target="cuda"))


@pytest.mark.parametrize("name, args", TEMPLATE_CASES, ids=[f"{c[0]}{c[1]}" for c in TEMPLATE_CASES])
def test_gpu_template_points_run_and_match_the_reference_on_cuda(name: str, args: tuple) -> None:
    task = asc.Task(name, args, target="cuda")
    space = template_space(task.workload, "cuda")
    for index in random.Random(1).sample(range(len(space)), min(8, len(space))):
        s = instantiate(task.workload, "cuda", index)
        check_outputs(task, asc.build(s, task.workload.tensors(), target="cuda"), seed=index)


@pytest.mark.parametrize(("name", "args"), WORKLOADS, ids=[f"{n}{a}" for n, a in WORKLOADS])
def test_random_gpu_programs_run_correctly_on_cuda_or_are_instantiation_errors(
    name: str, args: tuple
) -> None:
    task = asc.Task(name, args, target="cuda")
    wl = task.workload
    space = GpuSketchSpace(wl, task.target)
    seed = stable_seed("cuda", name, args)
    rng = random.Random(seed)
    rejected: list[MeasureInput] = []
    for i in range(SAMPLES):  # the first as the tuner samples (checked), then raw draws
        program = space.sample(rng) if i == 0 else draw_unchecked(space, rng)
        sched = space.schedule(program)
        with reproducible(sched.steps, seed, workload=wl, sample=i):
            if space.check(program) is not None:
                rejected.append(MeasureInput(task, tuple(sched.steps)))
                continue
            f = asc.build(sched, wl.tensors(), task.target)
            inputs = wl.random_inputs(i)
            outs = [np.full(t.shape, np.nan, t.dtype) for t in wl.outputs]
            f(*inputs, *outs)
            for got, want in zip(outs, wl.reference(*inputs), strict=True):
                np.testing.assert_allclose(
                    got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max()))
                )
    if rejected:
        builder = backend_for(task.target).builder(MeasureOption())
        for result in builder.build(rejected):
            assert result.error_no == MeasureErrorNo.INSTANTIATION_ERROR, result.error_msg


def test_a_cuda_target_reads_its_limits_from_the_device() -> None:
    limits = cuda_limits()
    assert limits["gpu_arch"] == device_arch() and limits["warp_size"] == 32
    assert limits["max_threads_per_block"] == 1024 and limits["compute_units"] >= 1
    target = Target.parse("cuda")
    assert target.gpu_arch == device_arch()
    assert target.max_threads_per_block == 1024
    assert target.shared_memory_bytes == limits["shared_memory_bytes"]
    assert Target.parse("cuda -arch=sm_80").gpu_arch == "sm_80"  # a flag wins over the device


def test_device_time_grows_with_the_work() -> None:
    """CUDA events time the launches: 8x the flops of a matmul takes clearly longer (at sizes that
    fill an H200: 256^3 and 512^3 took 25 and 48 us, mostly launch and too few blocks)."""
    seconds = []
    for n in (1024, 2048):
        task = asc.Task("matmul", (n, n, n), target="cuda")
        tensors = task.workload.tensors()
        f = asc.build(matmul_gpu(tensors, "cuda", block=16, reg=4, k_tile=8), tensors, target="cuda")
        a, b = task.workload.random_inputs(0)
        c = np.zeros((n, n), dtype=np.float32)
        times = f.time(a, b, c, number=5, repeat=3)
        assert len(times) == 3 and all(t > 0 for t in times)
        seconds.append(min(times))
    assert seconds[1] > 2 * seconds[0], seconds


def test_the_runner_gives_times_wrong_answers_compile_errors_faults_and_hangs_as_values(
    tmp_path: Path,
) -> None:
    task = asc.Task("matmul", (48, 40, 24), target="cuda")
    backend = backend_for(task.target)
    steps = matmul_gpu(task.workload.tensors(), "cuda", block=4, reg=2, k_tile=8).steps
    builder = backend.builder(QUICK)
    builder.cache_dir = tmp_path  # type: ignore[attr-defined]
    (good,) = builder.build([MeasureInput(task, steps)])
    program = GpuProgram.from_json(Path(str(good.lib_path)).read_text())
    body = "{\n"
    wrong = program.source.replace("] = 0.0f;", "] = 1.0f;", 1)  # the accumulator starts at 1
    fault = program.source.replace(body, "{ __trap();\n", 1)
    # ptxas deletes a loop with no side effect (a spin on a volatile local ran to the end on an
    # H200); one that sleeps stays in the machine code
    hang = program.source.replace(body, "{ for (;;) { __nanosleep(1000); }\n", 1)
    assert len({wrong, fault, hang, program.source}) == 4, "each variant must change the source"
    sources = {"wrong": wrong, "broken": program.source + "\n}", "fault": fault, "hang": hang}
    paths = [replace(program, source=src).save(tmp_path / name) for name, src in sources.items()]
    builds = [good] + [replace(good, lib_path=str(p)) for p in paths]
    inputs = [MeasureInput(task, steps)] * (len(builds) + 1)
    with backend.runner(QUICK) as runner:  # type: ignore[attr-defined]
        results = runner.run(inputs[:5], [*builds[:4], good])
    # a hang costs its run timeout, then a fresh worker measures the next candidate
    with backend.runner(replace(QUICK, run_timeout=5.0)) as runner:  # type: ignore[attr-defined]
        results += runner.run(inputs[:2], [builds[4], good])
    kinds = [r.error_no for r in results]
    assert kinds == [
        MeasureErrorNo.NO_ERROR, MeasureErrorNo.WRONG_ANSWER, MeasureErrorNo.COMPILE_ERROR,
        MeasureErrorNo.RUNTIME_ERROR, MeasureErrorNo.NO_ERROR, MeasureErrorNo.RUN_TIMEOUT,
        MeasureErrorNo.NO_ERROR,
    ], [r.error_msg for r in results]
    assert len(results[0].costs) == 2 and all(c > 0 for c in results[0].costs)
    assert "elements differ" in results[1].error_msg


@pytest.mark.parametrize("space", ["template", "sketch"])
def test_tuning_on_cuda_resumes_without_measuring_a_program_twice(space: str, tmp_path: Path) -> None:
    task = asc.Task("matmul", (128, 96, 64), target="cuda")
    log = tmp_path / "t.jsonl"
    first = asc.tune(task, trials=8, space=space, log=log, option=QUICK, remeasure=0, seed=0)
    assert first.valid_trials >= 4 and first.best_gflops is not None and first.best_gflops > 0
    again = asc.tune(task, trials=16, space=space, log=log, option=QUICK, remeasure=0, seed=0)
    assert again.resumed_trials == first.trials and again.new_trials == 16 - first.trials
    programs = [r.program for r in load_records(str(log)) if r.program]
    keys = [repr(sorted(p.items())) for p in programs]
    assert len(keys) == len(set(keys)) == 16
    f = asc.load_best(log, task)
    check_outputs(task, f, seed=3)


@pytest.mark.requires("make")
def test_a_cuda_record_exports_to_a_host_program_that_checks_and_times_it_on_the_gpu(tmp_path: Path) -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed: the exported CUDA host program cannot be built")
    task = asc.Task("matmul", (48, 40, 24), target="cuda")
    log = tmp_path / "mm.jsonl"
    asc.tune(task, trials=2, space="template", tuner="random", log=log, option=QUICK, remeasure=0, seed=0)
    out = tmp_path / "export"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "autosched", "export", str(log), "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    run = subprocess.run(["make", "-s", "-C", str(out), "run"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "check: OK" in run.stdout and re.search(r"time: [0-9.]+ ms", run.stdout), run.stdout
