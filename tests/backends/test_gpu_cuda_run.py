"""CUDA specifics: ``float4`` accesses where provably aligned (checked in NVRTC's PTX; the same
lowered program checked for its numbers on OpenCL), the CUBIN cache, and, on a machine with a GPU
(marked: skipped naming pycuda/the driver elsewhere), a CUBIN-loaded run and a faulting launch that
is a device error, followed by a clear outcome for the next program."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.backends import CudaBackend
from autosched.backends.cuda import device_arch, nvrtc_compile
from autosched.lower import lower
from autosched.target import Target

ROOT = Path(__file__).resolve().parents[2]


def _axpy(n: int, offset: int) -> tuple[asc.Schedule, list[asc.Tensor]]:
    """C[i] = A[i + offset] * 2 + B[i], vectorized by 4 inside each of 32 threads per block."""
    A = asc.placeholder((n + 1,), name="A")
    B = asc.placeholder((n,), name="B")
    C = asc.compute((n,), lambda i: A[i + offset] * 2.0 + B[i], name="C")
    s = asc.create_schedule(C)
    block, lanes = s[C].split(C.op.axis[0], factor=128)
    thread, v = s[C].split(lanes, factor=4)
    for loop, tag in ((block, "blockIdx.x"), (thread, "threadIdx.x")):
        s[C].bind(loop, asc.thread_axis(tag))
    s[C].vectorize(v)
    return s, [A, B, C]


@pytest.mark.parametrize(("n", "offset", "vector_loads"), [(1024, 0, 2), (1024, 1, 1), (1000, 0, 0)])
def test_aligned_contiguous_accesses_become_float4(n: int, offset: int, vector_loads: int) -> None:
    s, args = _axpy(n, offset)
    source = asc.emit(s, args, target="cuda")
    # A[i + 1] is not 16-byte aligned: read per lane; a tail guard (n = 1000) keeps the loop scalar
    assert source.count("= *(const float4*)&") == vector_loads
    assert ("*(float4*)&C[" in source) == (n % 128 == 0)


@pytest.mark.requires("nvrtc")
def test_float4_accesses_compile_to_vector_loads_and_stores(tmp_path: Path) -> None:
    s, args = _axpy(1024, 0)
    program = CudaBackend().program(lower(s, args, gpu=True), Target.parse("cuda"))
    ptx = nvrtc_compile(program.source, "sm_90", cache_dir=tmp_path).decode()
    assert ptx.count(".v4.f32") == 3 and "st.global.v4.f32" in ptx


@pytest.mark.requires("pyopencl")
def test_the_vectorized_program_is_right_on_opencl() -> None:
    for offset in (0, 1):
        s, args = _axpy(1024, offset)
        a, b = (np.random.default_rng(offset).standard_normal(n).astype(np.float32) for n in (1025, 1024))
        c = np.full(1024, np.nan, dtype=np.float32)
        asc.build(s, args, target="opencl")(a, b, c)
        np.testing.assert_allclose(c, a[offset : offset + 1024] * 2 + b, rtol=1e-6)


@pytest.mark.requires("nvrtc")
def test_cubins_are_compiled_for_real_architectures_and_cached_by_content(tmp_path: Path) -> None:
    source = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] *= 2.0f; }'
    cubin = nvrtc_compile(source, "sm_90", cache_dir=tmp_path, cubin=True)
    assert cubin[:4] == b"\x7fELF"
    (cached,) = (tmp_path / "cuda").glob("*.cubin")
    cached.write_bytes(b"\x7fELF from the cache")  # a second compile of the same source reads it
    assert nvrtc_compile(source, "sm_90", cache_dir=tmp_path, cubin=True) == b"\x7fELF from the cache"
    assert nvrtc_compile(source, "sm_80", cache_dir=tmp_path, cubin=True)[:4] == b"\x7fELF"
    assert nvrtc_compile(source, "sm_90", cache_dir=tmp_path).startswith(b"//")  # PTX is cached apart
    with pytest.raises(ValueError, match="a CUBIN is for a real architecture"):
        nvrtc_compile(source, "compute_90", cache_dir=tmp_path, cubin=True)


@pytest.mark.requires("pycuda")
def test_a_cubin_built_for_the_device_runs() -> None:
    s, args = _axpy(1024, 1)
    f = asc.build(s, args, target=f"cuda -arch={device_arch()}")
    a, b = np.arange(1025, dtype=np.float32), np.ones(1024, dtype=np.float32)
    c = np.zeros(1024, dtype=np.float32)
    f(a, b, c)
    np.testing.assert_array_equal(c, a[1:] * 2 + 1)


FAULT_SCRIPT = """
import numpy as np
import autosched as asc
from autosched.driver import arg_specs
from autosched.backends.cuda import CudaKernel
from autosched.runner.gpu_program import DeviceError, GpuProgram, Launch

A = asc.placeholder((1024,), name="A")
B = asc.compute((1024,), lambda i: A[i] * 2.0, name="B")
s = asc.create_schedule(B)
block, thread = s[B].split(B.op.axis[0], factor=128)
s[B].bind(block, asc.thread_axis("blockIdx.x"))
s[B].bind(thread, asc.thread_axis("threadIdx.x"))
good = asc.build(s, [A, B], target="cuda")
a, b = np.ones(1024, dtype=np.float32), np.zeros(1024, dtype=np.float32)
good(a, b)
print("before:", float(b.sum()))
fault = 'extern "C" __global__ void k(float* a, float* b) { b[threadIdx.x + (1 << 30)] = 1; }'
bad = CudaKernel(GpuProgram("cuda", fault, (Launch("k", (1, 1, 1), (32, 1, 1)),)), arg_specs(s, [A, B]))
try:
    bad(a, b)
except DeviceError as e:
    print("fault:", e)
b[:] = 0
try:
    good(a, b)
    print("after:", float(b.sum()))
except DeviceError as e:
    print("after:", e)
"""


@pytest.mark.requires("pycuda")
def test_a_faulting_launch_is_a_device_error_and_what_follows_is_clear(tmp_path: Path) -> None:
    """In a process of its own (a fault can spoil CUDA for the whole process): the fault is a
    device error; the next program then runs in a fresh context, or, where the driver refuses one
    (as NVIDIA's 580 driver on an H200 does), fails with one line saying why and what to do."""
    script = tmp_path / "fault.py"
    script.write_text(FAULT_SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines())
    assert lines["before"] == "2048.0" and re.search(r"cu\w+ failed", lines["fault"]), done.stdout
    assert lines["after"] == "2048.0" or (
        "CUDA is unusable in this process after a kernel fault" in lines["after"]
        and "run again in a new process" in lines["after"]
    ), done.stdout
