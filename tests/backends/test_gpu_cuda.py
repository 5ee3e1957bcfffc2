"""CUDA: the same GPU schedules printed as CUDA compile with NVRTC for sm_80 and sm_90 (no GPU
needed); launching them needs a GPU and pycuda (those tests are marked and skip naming what is
missing)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.backends import CudaBackend, OpenCLBackend, backend_for
from autosched.backends.cuda import nvrtc_compile
from autosched.backends.gpu_schedules import elementwise_gpu, matmul_gpu, softmax_gpu
from autosched.lower import lower
from autosched.runner import CompileError
from autosched.target import Target


def _cuda() -> CudaBackend:
    backend = backend_for("cuda")
    assert isinstance(backend, CudaBackend)
    return backend


def _programs() -> list[tuple[str, asc.Task, asc.Schedule]]:
    mm = asc.Task("matmul", (127, 255, 63), target="cuda")
    relu = asc.Task("relu", (7, 45), target="cuda")
    sm = asc.Task("softmax", (37, 19), target="cuda")
    return [
        ("matmul", mm, matmul_gpu(mm.workload.tensors(), "cuda", block=16, reg=4, k_tile=8)),
        ("relu", relu, elementwise_gpu(relu.workload.tensors(), "cuda", threads=128)),
        ("softmax", sm, softmax_gpu(sm.workload.tensors(), "cuda", threads=64)),
    ]


@pytest.mark.requires("nvrtc")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_hand_written_gpu_schedules_compile_to_ptx(arch: str, tmp_path: Path) -> None:
    for name, task, s in _programs():
        func = lower(s, task.workload.tensors(), gpu=True)
        program = _cuda().program(func, Target.parse(f"cuda -arch={arch}"))
        ptx = nvrtc_compile(program.source, arch, cache_dir=tmp_path).decode()
        assert f".target {arch}" in ptx, name
        for i in range(len(program.launches)):
            assert f".visible .entry default_function_kernel{i}(" in ptx, name
        assert ("bar.sync" in ptx) == (name in ("matmul", "softmax")), name  # shared tiles, tree
        # the very same lowered program is what the OpenCL backend prints
        ocl = OpenCLBackend().program(func, Target.parse("opencl"))
        assert ocl.launches == program.launches


@pytest.mark.requires("nvrtc")
def test_a_rejected_source_is_a_compile_error_with_nvrtcs_log(tmp_path: Path) -> None:
    with pytest.raises(CompileError, match="undefined_name"):
        nvrtc_compile('extern "C" __global__ void k(float* a) { a[0] = undefined_name; }', "sm_80", tmp_path)


@pytest.mark.requires("nvrtc")
def test_compile_only_build_needs_no_gpu(tmp_path: Path) -> None:
    name, task, s = _programs()[0]
    ptx = _cuda().ptx(lower(s, task.workload.tensors(), gpu=True), Target.parse("cuda -arch=sm_90"))
    assert b".entry default_function_kernel0" in ptx


@pytest.mark.requires("pycuda")
@pytest.mark.parametrize("which", [0, 1, 2])
def test_cuda_kernels_match_the_reference_on_a_gpu(which: int) -> None:
    name, task, s = _programs()[which]
    tensors = task.workload.tensors()
    f = asc.build(s, tensors, target="cuda")
    inputs = task.workload.random_inputs(0)
    want = task.workload.reference(*[x.copy() for x in inputs])
    outs = [np.full(w.shape, np.nan, dtype=w.dtype) for w in want]
    f(*inputs, *outs)
    for got, ref in zip(outs, want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    assert all(t > 0 for t in f.time(*inputs, *outs, number=3, repeat=2))


def test_without_nvrtc_a_cuda_build_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)  # as if cuda-bindings were not installed
    with pytest.raises(RuntimeError, match=r'pip install cuda-bindings "nvidia-cuda-nvrtc==13.0.\*"'):
        nvrtc_compile('extern "C" __global__ void k(float* a) { a[0] = 1.0f; }', "sm_80")


def test_without_a_gpu_cuda_tuning_says_so_in_one_line(tmp_path: Path) -> None:
    pytest.importorskip("cuda.bindings.nvrtc", reason="pip install cuda-bindings nvidia-cuda-nvrtc")
    try:
        import pycuda.driver as drv

        drv.init()
        has_gpu = drv.Device.count() > 0
    except Exception:
        has_gpu = False
    if has_gpu:
        pytest.skip("a CUDA device is visible here: this test is for machines without one")
    task = asc.Task("matmul", (64, 64, 64), target="cuda")
    with pytest.raises(RuntimeError, match="no CUDA device is visible") as info:
        asc.tune(task, trials=2, space="template", log=tmp_path / "c.jsonl")
    assert "\n" not in str(info.value)
