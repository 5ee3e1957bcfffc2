"""The library's GEMM micro-kernel intrinsic: matmuls tensorized with it against numpy (dividing and
non-dividing shapes, each ISA that runs here and the forced portable fallback), builds with
``-Werror`` and without ``-march=native`` (gcc and clang), strict C99, and NEON cross-built for
aarch64 and run under qemu."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from te_strict import compile_strict

import autosched as asc
from autosched.expr import Extent

CROSS = "c -cc=aarch64-linux-gnu-gcc -mcpu=cortex-a72"


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return {f for line in text.splitlines() if line.startswith("flags") for f in line.split(":")[1].split()}


def matmul(m: Extent, n: Extent, k: Extent, dtype: str = "float32") -> list[asc.Tensor]:
    A = asc.placeholder((m, k), dtype, name="A")
    B = asc.placeholder((k, n), dtype, name="B")
    r = asc.reduce_axis(k, name="r")
    C = asc.compute((m, n), lambda i, j: asc.sum(A[i, r] * B[r, j], axis=r), name="C")
    return [A, B, C]


def check(s: asc.Schedule, args: list[asc.Tensor], target: str = "c") -> None:
    A, B, C = args
    rng = np.random.default_rng(7)
    a = rng.standard_normal([int(d) for d in A.shape]).astype(A.dtype)
    b = rng.standard_normal([int(d) for d in B.shape]).astype(B.dtype)
    c = np.full([int(d) for d in C.shape], np.nan, C.dtype)
    asc.build(s, args, target=target)(a, b, c)
    tol = 1e-4 if C.dtype == "float32" else 1e-10
    np.testing.assert_allclose(c, a.astype("float64") @ b.astype("float64"), rtol=tol, atol=tol)


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("isa", ["auto", "portable"])
@pytest.mark.parametrize("shape", [(48, 64, 64), (50, 70, 45)])  # dividing; every block partial at the end
def test_ukernel_matmul_matches_numpy(shape: tuple[int, int, int], isa: str) -> None:
    args = matmul(*shape)
    s = asc.intrin.matmul_ukernel(args, mr=6, nr=16, kc=32, isa=isa, target="c -num-threads=2")
    src = asc.emit(s, args)
    assert ("__builtin_cpu_supports" in src) == (isa == "auto")
    check(s, args, "c -num-threads=2")


@pytest.mark.requires("gcc")
def test_symbolic_shapes_bind_the_stride_variables() -> None:
    M, N, K = (asc.size_var(n) for n in "MNK")
    args = matmul(M, N, K)
    s = asc.intrin.matmul_ukernel(args, mr=4, nr=8, kc=16)
    assert "&B.local[0], K, 8, N)" in str(asc.lower(s, args))  # lda = K, ldb = the panel's 8, ldc = N
    f = asc.build(s, args)
    rng = np.random.default_rng(3)
    for m, n, k in [(13, 21, 37), (32, 64, 48), (1, 1, 1)]:
        a = rng.standard_normal((m, k)).astype("float32")
        b = rng.standard_normal((k, n)).astype("float32")
        c = np.full((m, n), np.nan, "float32")
        f(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.requires("gcc")
def test_float64_ukernel_with_the_whole_reduction_in_the_region() -> None:
    args = matmul(13, 24, 20, "float64")
    s = asc.create_schedule(args[2])
    i, j = s[args[2]].op.axis
    io, ii = s[args[2]].split(i, 4)
    jo, ji = s[args[2]].split(j, 8)
    s[args[2]].reorder(io, jo, ii, ji)
    s[args[2]].tensorize(ii, asc.intrin.gemm_ukernel(4, 8, 20, "float64"))
    assert "_body(" in str(asc.lower(s, args))  # no outer reduction loop: the intrinsic starts at 0
    check(s, args)


@pytest.mark.requires("gcc")
@pytest.mark.skipif("avx512f" not in _cpu_flags(), reason="hardware-bound: needs a CPU with AVX-512F")
def test_avx512_kernel_on_an_avx512_cpu() -> None:
    args = matmul(30, 64, 40)
    check(asc.intrin.matmul_ukernel(args, mr=6, nr=32, kc=16, isa="avx512"), args)


@pytest.mark.requires("gcc", "clang")
@pytest.mark.parametrize("cc", ["gcc", "clang"])
def test_werror_build_without_march_native(tmp_path: Path, cc: str) -> None:
    args = matmul(50, 70, 45)
    src = asc.emit(asc.intrin.matmul_ukernel(args, nr=32, kc=16), args)
    assert "_avx512(" in src and "_avx2(" in src and "_neon(" in src
    (tmp_path / "k.c").write_text(src)
    done = subprocess.run(
        [cc, "-std=gnu11", "-fopenmp", "-O2", "-Wall", "-Wextra", "-Werror", "-c", "k.c"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.requires("gcc")
def test_strict_c99_build_uses_the_fallback_only(tmp_path: Path) -> None:
    args = matmul(50, 70, 45)
    s = asc.intrin.matmul_ukernel(args, kc=16)
    src = asc.emit(s, args, portable=True)
    assert "immintrin" not in src and "__builtin" not in src and "_c(C, A, B" in src
    compile_strict(s, args, tmp_path)


MAIN = r"""
#include <stdio.h>
int cross_kernel(float* A, float* B, float* C);
int main(void) {
  static float A[M * K], B[K * N], C[M * N];
  for (int i = 0; i < M * K; ++i) A[i] = (float)((i * 7) % 11) * 0.25f - 1.0f;
  for (int i = 0; i < K * N; ++i) B[i] = (float)((i * 5) % 13) * 0.125f - 0.75f;
  if (cross_kernel(A, B, C) != 0) return 2;
  for (int i = 0; i < M * N; ++i) printf("%.9g\n", C[i]);
  return 0;
}
"""


@pytest.mark.requires("aarch64-linux-gnu-gcc", "qemu-aarch64")
@pytest.mark.parametrize(
    ("portable", "shape"),
    [
        (False, (16, 32, 16)),
        (False, (14, 36, 21)),
        (True, (14, 36, 21)),
    ],  # 4 x 8 x 8 blocks: dividing, partial
)
def test_neon_kernel_cross_built_runs_under_qemu(
    tmp_path: Path, portable: bool, shape: tuple[int, int, int]
) -> None:
    m, n, k = shape
    args = matmul(m, n, k)
    s = asc.intrin.matmul_ukernel(args, mr=4, nr=8, kc=8, target=CROSS)
    src = asc.emit(s, args, target=CROSS, name="cross_kernel", portable=portable)
    assert ("vfmaq_n_f32" in src) != portable
    (tmp_path / "kernel.c").write_text(src)
    (tmp_path / "main.c").write_text(f"#define M {m}\n#define N {n}\n#define K {k}\n{MAIN}")
    std = ["-std=c99", "-pedantic"] if portable else ["-std=gnu11", "-fopenmp"]
    cc = subprocess.run(
        [
            "aarch64-linux-gnu-gcc",
            *std,
            "-O2",
            "-mcpu=cortex-a72",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-static",
            "-o",
            "prog",
            "main.c",
            "kernel.c",
            "-lm",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cc.returncode == 0, cc.stderr
    run = subprocess.run(
        ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", str(tmp_path / "prog")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    got = np.array([float(x) for x in run.stdout.split()]).reshape(m, n)
    a = (np.arange(m * k) * 7 % 11 * 0.25 - 1.0).reshape(m, k)
    b = (np.arange(k * n) * 5 % 13 * 0.125 - 0.75).reshape(k, n)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)


def test_bad_ukernel_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="isa must be one of"):
        asc.intrin.gemm_ukernel(6, 16, 32, isa="sse9")
    with pytest.raises(ValueError, match="dtype must be float32 or float64"):
        asc.intrin.gemm_ukernel(6, 16, 32, "int8")
    with pytest.raises(ValueError, match="kc must be an int"):
        asc.intrin.gemm_ukernel(6, 16, 0)
