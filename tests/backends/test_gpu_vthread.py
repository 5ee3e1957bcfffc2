"""Virtual threads on the GPU backends without a GPU: matmul schedules with vthreads run on PoCL's
OpenCL CPU device against numpy (register tiles of several shapes, sizes no tile divides), compile
with NVRTC for sm_80 and sm_90, and assemble (ptxas) with their register tiles in registers: no
stack frame, no spills."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ptxas_tool import ptxas_usage

import autosched as asc
from autosched.backends.cuda import nvrtc_compile
from autosched.backends.gpu_schedules import Pair, matmul_gpu

RNG = np.random.default_rng(0)

#: (m, n, k), (block, reg, k_tile, vthreads): 8x8 in 2x2 and 4x4 virtual threads, 4x8 in 1x2, and
#: shapes that no tile divides (guarded copies, tail blocks with some virtual threads out of range)
CASES: list[tuple[tuple[int, int, int], tuple[int, Pair, int, Pair]]] = [
    ((128, 128, 32), (8, 8, 8, 2)),
    ((64, 64, 16), (4, 8, 4, 4)),
    ((64, 96, 16), (4, (4, 8), 4, (1, 2))),
    ((50, 70, 30), (4, 4, 4, 2)),
    ((33, 65, 17), (4, (8, 4), 8, (2, 1))),
]


@pytest.mark.requires("pyopencl")
@pytest.mark.parametrize("shape, tiles", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_vthread_matmul_matches_numpy_on_pocl(shape: tuple[int, int, int], tiles: tuple) -> None:
    m, n, k = shape
    A, B, C = asc.Task("matmul", shape, target="opencl").workload.tensors()
    s = matmul_gpu([A, B, C], "opencl", *tiles)
    assert "vthread" in [st.thread for st in s.steps if hasattr(st, "thread")]
    f = asc.build(s, [A, B, C], target="opencl")
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, dtype=np.float32)
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def _cuda_source(block: int, reg: Pair, vthreads: Pair) -> str:
    A, B, C = asc.Task("matmul", (2048, 2048, 2048), target="cuda").workload.tensors()
    return asc.emit(matmul_gpu([A, B, C], "cuda", block, reg, 8, vthreads), [A, B, C], target="cuda")


@pytest.mark.requires("nvrtc", "ptxas")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("block, reg, vthreads", [(16, 8, 2), (16, (4, 8), (1, 2)), (8, 8, 4)])
def test_vthread_matmul_compiles_for_sm80_and_sm90_without_spills(
    arch: str, block: int, reg: Pair, vthreads: Pair, tmp_path: Path
) -> None:
    source = _cuda_source(block, reg, vthreads)
    assert "vthread" not in source
    ptx = nvrtc_compile(source, arch, cache_dir=tmp_path)
    text = ptx.decode()
    assert f".target {arch}" in text and "bar.sync" in text
    assert ".local" not in text  # the register tile is no array in local memory
    usage = ptxas_usage(ptx, arch)
    assert usage["stack"] == usage["spill_stores"] == usage["spill_loads"] == 0, usage
    # the accumulators (64 or 32 floats) are registers of their own
    ry, rx = (reg, reg) if isinstance(reg, int) else reg
    assert ry * rx <= usage["registers"] <= 255, usage
