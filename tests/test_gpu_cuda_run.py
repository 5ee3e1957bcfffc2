"""CUDA specifics: ``float4`` accesses where provably aligned (checked in NVRTC's PTX; the same
lowered program checked for its numbers on OpenCL), the CUBIN cache, and, on a machine with a GPU
(marked: skipped naming pycuda/the driver elsewhere), a CUBIN-loaded run and a faulting launch that
is a device error after which a fresh context runs the next program."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.backends import CudaBackend
from autosched.driver import arg_specs
from autosched.lower import lower
from autosched.runner.cuda import CudaKernel, device_arch, nvrtc_compile
from autosched.runner.gpu_program import DeviceError, GpuProgram, Launch
from autosched.target import Target


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


@pytest.mark.requires("pycuda")
def test_a_faulting_launch_is_a_device_error_and_the_next_program_gets_a_fresh_context() -> None:
    s, args = _axpy(1024, 0)
    specs = arg_specs(asc.create_schedule(args[-1]), args)
    fault = 'extern "C" __global__ void k(float* a, float* b, float* c) { c[threadIdx.x + (1 << 30)] = 1; }'
    bad = GpuProgram("cuda", fault, (Launch("k", (1, 1, 1), (32, 1, 1)),))
    a, b = np.ones(1025, dtype=np.float32), np.ones(1024, dtype=np.float32)
    c = np.zeros(1024, dtype=np.float32)
    with pytest.raises(DeviceError):
        CudaKernel(bad, specs)(a, b, c)
    asc.build(s, args, target="cuda")(a, b, c)  # in the fresh context
    np.testing.assert_array_equal(c, np.full(1024, 3.0, dtype=np.float32))
