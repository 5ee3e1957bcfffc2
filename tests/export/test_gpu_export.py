"""``autosched export`` of GPU records (the kernels and a host launcher; built and run for OpenCL on
PoCL, compiled with nvcc for CUDA where nvcc is), its refusals, and ``asc.lower`` of a schedule
bound to GPU threads (the kernels with their launches)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import autosched as asc
from autosched.backends.gpu_schedules import matmul_gpu
from autosched.schedule import ScheduleError

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "autosched", *args], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.fixture(scope="module")
def opencl_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tuning log of matmul on OpenCL (PoCL), 2 trials of the GPU template."""
    pytest.importorskip("pyopencl", reason="pip install pyopencl pocl-binary-distribution")
    log = tmp_path_factory.mktemp("gpu-export") / "mm.jsonl"
    task = asc.Task("matmul", (48, 40, 24), target="opencl")
    option = asc.MeasureOption(number=1, repeat=1, min_repeat_ms=0.0)
    result = asc.tune(task, trials=2, space="template", tuner="random", log=log, option=option,
                      remeasure=0, seed=0)
    assert result.valid_trials >= 1
    return log


def _pocl_env() -> dict[str, str]:
    """Environment in which the system's OpenCL loader finds the PoCL that pip installed."""
    import pyopencl

    libs = str(Path(pyopencl.__file__).parent / ".libs")
    return {**os.environ, "OCL_ICD_VENDORS": libs, "LD_LIBRARY_PATH": libs}


@pytest.mark.requires("pyopencl", "gcc", "make")
def test_an_opencl_record_exports_to_a_host_program_that_checks_and_times_it(
    opencl_log: Path, tmp_path: Path
) -> None:
    out = tmp_path / "ocl"
    done = _cli("export", str(opencl_log), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert {p.name for p in out.iterdir()} == {"kernel.cl", "kernel_host.c", "kernel.h", "main.c",
                                               "reference.c", "reference.h", "Makefile", "README"}
    assert "__kernel void default_function_kernel0(" in (out / "kernel.cl").read_text()
    if not Path("/usr/include/CL/cl.h").exists():
        pytest.skip("no OpenCL headers: apt-get install opencl-headers ocl-icd-opencl-dev")
    run = subprocess.run(["make", "-s", "-C", str(out), "run"], capture_output=True, text=True,
                         env=_pocl_env(), timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "check: OK" in run.stdout and re.search(r"time: [0-9.]+ ms", run.stdout), run.stdout


@pytest.mark.requires("pyopencl")  # the record comes from tuning on PoCL (the fixture)
def test_a_cuda_record_exports_kernels_and_a_launcher_that_nvcc_compiles(
    opencl_log: Path, tmp_path: Path
) -> None:
    # the same program, as if tuned on CUDA: the schedule steps are the target's kind's alike
    text = re.sub(r'"target":"opencl[^"]*"', '"target":"cuda -arch=sm_90"', opencl_log.read_text())
    log = tmp_path / "cuda.jsonl"
    log.write_text(text)
    out = tmp_path / "cuda"
    done = _cli("export", str(log), "--out", str(out))
    assert done.returncode == 0, done.stderr
    source = (out / "kernel.cu").read_text()
    assert 'extern "C" int matmul_kernel(float* a0, float* a1, float* a2) {' in source
    assert re.search(r"default_function_kernel0<<<dim3\(\d+, \d+, 1\), dim3\(\d+, \d+, 1\)>>>", source)
    assert "NVCCFLAGS ?= -O3 -arch=sm_90" in (out / "Makefile").read_text()
    refused = _cli("export", str(log), "--out", str(tmp_path / "p"), "--portable")
    assert refused.returncode != 0 and "--portable is for C kernels" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc is not installed: the CUDA export was written but not compiled")
    made = subprocess.run(["make", "-s", "-C", str(out)], capture_output=True, text=True, timeout=300)
    assert made.returncode == 0 and (out / "bench").exists(), made.stderr


def test_lower_prints_the_kernels_of_a_bound_schedule_with_their_launches() -> None:
    task = asc.Task("matmul", (64, 64, 64), target="opencl")
    tensors = task.workload.tensors()
    s = matmul_gpu(tensors, block=8, reg=4, k_tile=8)
    text = str(asc.lower(s, tensors))
    args = "A: float32[64, 64], B: float32[64, 64], C: float32[64, 64]"
    assert text.startswith(f"gpu func default_function({args})")
    launch = "grid=(2, 2, 1) block=(8, 8, 1) shared A.shared: float32[256]"
    assert f"kernel default_function_kernel0 {launch}" in text
    assert "thread threadIdx.x:" in text and "barrier" in text
    with pytest.raises(ScheduleError, match="64 threads per block .* exceed the device limit of 32"):
        asc.lower(s, tensors, target="opencl -max-threads-per-block=32")
    assert str(asc.lower(asc.create_schedule(tensors[-1]), tensors)).startswith("func default_function(")
