"""Math functions in vector loops: exp, log, tanh, erf, sigmoid, pow, sqrt, abs stay vector code
(a helper per function, which gcc turns into glibc's vector math, libmvec, on x86_64), within
float32 accuracy of numpy over wide ranges; the same source builds with clang and for aarch64;
gcc on x86_64 glibc links -lmvec, in the kernel cache and in exported Makefiles, nothing else
does; the portable (strict C99) header declares nothing."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.backends.c import math_libs
from autosched.emit_c import HEADER, PORTABLE_HEADER
from autosched.export.makefile import make_settings
from autosched.runner.compile import compile_object
from autosched.target import Target

N = 1000
#: each function's te builder, numpy reference and input range (wide: overflow, saturation, tails)
FUNCTIONS = {
    "exp": (asc.exp, np.exp, (-90.0, 90.0)),
    "log": (asc.log, np.log, (1e-30, 1e30)),
    "tanh": (asc.tanh, np.tanh, (-12.0, 12.0)),
    "erf": (asc.erf, None, (-6.0, 6.0)),
    "sigmoid": (asc.sigmoid, lambda x: 1 / (1 + np.exp(-x)), (-100.0, 100.0)),
    "sqrt": (asc.sqrt, np.sqrt, (0.0, 1e6)),
    "abs": (asc.abs, np.abs, (-5.0, 5.0)),
}
GLIBC_GCC_X86 = platform.machine() == "x86_64" and platform.libc_ver()[0] == "glibc"


def _erf(x: np.ndarray) -> np.ndarray:
    import math

    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _kernel(fn: str, dtype: str) -> tuple[asc.Schedule, list[asc.Tensor]]:
    x = asc.placeholder((N,), dtype, name="x")
    y = asc.compute((N,), lambda i: FUNCTIONS[fn][0](x[i]) * asc.const(2.0, dtype), name="y")
    s = asc.create_schedule(y)
    _, inner = s[y].split(s[y].op.axis[0], 64)
    s[y].vectorize(inner)
    return s, [x, y]


def _inputs(fn: str, dtype: str) -> np.ndarray:
    lo, hi = FUNCTIONS[fn][2]
    if fn == "log":
        return np.geomspace(lo, hi, N).astype(dtype)
    return np.linspace(lo, hi, N).astype(dtype)


def _want(fn: str, x: np.ndarray) -> np.ndarray:
    ref = FUNCTIONS[fn][1] or _erf
    with np.errstate(over="ignore"):
        return (2.0 * ref(x.astype(np.float64))).astype(x.dtype)  # inf where the type overflows


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fn", list(FUNCTIONS))
def test_math_in_a_vector_loop_stays_vector_code_and_matches_numpy(fn: str, dtype: str) -> None:
    s, args = _kernel(fn, dtype)
    lanes = 16 if dtype == "float32" else 8
    source = asc.emit(s, args, target="c -vector-bytes=64")
    assert f"asc_{dtype}x{lanes}_{'exp' if fn == 'sigmoid' else fn}(" in source
    f = asc.build(s, args, "c")
    x = _inputs(fn, dtype)
    y = np.zeros(N, dtype)
    f(x, y)
    want = _want(fn, x)
    # libmvec is within 4 ulp; the tests of the operators compare at rtol 1e-5
    np.testing.assert_allclose(y, want, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-37)


@pytest.mark.requires("gcc")
def test_pow_of_two_vectors() -> None:
    a, b = asc.placeholder((N,), name="a"), asc.placeholder((N,), name="b")
    y = asc.compute((N,), lambda i: asc.pow(a[i], b[i]), name="y")
    s = asc.create_schedule(y)
    s[y].vectorize(s[y].split(s[y].op.axis[0], 16)[1])
    f = asc.build(s, [a, b, y], "c")
    x, e = np.linspace(0.01, 20, N).astype(np.float32), np.linspace(-4, 4, N).astype(np.float32)
    out = np.zeros(N, np.float32)
    f(x, e, out)
    np.testing.assert_allclose(out, np.power(x.astype(np.float64), e), rtol=1e-5)


@pytest.mark.requires("gcc")
@pytest.mark.skipif(not GLIBC_GCC_X86, reason="libmvec: gcc on x86_64 glibc")
def test_gcc_calls_glibcs_vector_math(tmp_path: Path) -> None:
    functions = ("exp", "log", "tanh", "erf")
    x = asc.placeholder((N,), name="x")
    y = asc.compute((N,), lambda i: sum(FUNCTIONS[fn][0](x[i]) for fn in functions), name="y")
    s = asc.create_schedule(y)
    s[y].vectorize(s[y].split(s[y].op.axis[0], 64)[1])
    obj = compile_object(asc.emit(s, [x, y], target="c"), Target.parse("c"), tmp_path / "k.o")
    symbols = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout
    for fn in functions:
        assert f"v_{fn}f" in symbols and "_ZGV" in symbols, symbols


@pytest.mark.requires("clang")
@pytest.mark.parametrize("fn", ["exp", "erf", "tanh"])
def test_clang_builds_the_same_vector_loops(fn: str) -> None:
    s, args = _kernel(fn, "float32")
    f = asc.build(s, args, "c -cc=clang")
    x = _inputs(fn, "float32")
    y = np.zeros(N, np.float32)
    f(x, y)
    np.testing.assert_allclose(y, _want(fn, x), rtol=1e-5, atol=1e-37)


@pytest.mark.requires("aarch64-linux-gnu-gcc")
def test_an_aarch64_cross_build_compiles_the_vector_math(tmp_path: Path) -> None:
    s, args = _kernel("erf", "float32")
    target = Target.parse("c -cc=aarch64-linux-gnu-gcc")
    source = asc.emit(s, args, target=target)
    compile_object(source, target, tmp_path / "k.o", extra_flags=["-Wall", "-Werror"])
    assert (tmp_path / "k.o").stat().st_size > 0


def test_only_gcc_on_x86_64_glibc_links_libmvec() -> None:
    cross = Target.parse("c -cc=aarch64-linux-gnu-gcc")
    assert math_libs(cross) == ["-lm"]
    assert math_libs(Target.parse("c -cc=clang")) == ["-lm"]
    assert math_libs(Target.parse("c -cc=clang -mtriple=aarch64-linux-gnu")) == ["-lm"]
    native = Target.parse("c")
    assert math_libs(native) == (["-lmvec", "-lm"] if GLIBC_GCC_X86 else ["-lm"])
    # linked only while make's CC builds for x86_64 glibc (make CC=aarch64-linux-gnu-gcc links none)
    assert ("-lmvec" in make_settings(native, False, True)) == GLIBC_GCC_X86
    assert "-lmvec" not in make_settings(cross, False, True)
    assert "-fno-math-errno" in native.cflags()


def test_the_portable_header_declares_no_vector_math() -> None:
    assert "__simd__" in HEADER and "__clang__" in HEADER
    assert "__simd__" not in PORTABLE_HEADER
