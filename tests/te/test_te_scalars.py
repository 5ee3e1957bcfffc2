"""Scalar kernel arguments (``asc.var`` listed among the arguments of build/lower/emit), as TVM's
extern-op tutorial uses them: ``build(s, [A, B, D, bias])`` called ``f(a, b, d, 10.0)``.

Each kernel is built with gcc and checked against numpy: fixed and symbolic shapes, float32,
float64, int32 and int64 scalars, a scalar in a reduction body, the timing entries; bad input
is one line before any C runs; the C compiles with ``-Werror`` and as strict C99; a flat script
run as a real subprocess calls one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from te_strict import compile_strict

import autosched as asc
from autosched.contrib import cblas
from autosched.runner.compile import compile_object
from autosched.target import Target

pytestmark = pytest.mark.requires("gcc")

TARGET = "c -num-threads=2"
REPO = Path(__file__).resolve().parents[2]
RNG = np.random.default_rng(3)


def bias_add(shape: tuple[asc.Extent, ...]) -> tuple[asc.Schedule, asc.Tensor, asc.Tensor, asc.Var]:
    """The tutorial's ``D = C + bias`` over ``shape``, vectorized and parallel."""
    bias = asc.var("bias", dtype="float32")
    C = asc.placeholder(shape, name="C")
    D = asc.compute(C.shape, lambda i, j: C[i, j] + bias, name="D")
    s = asc.create_schedule(D.op)
    jo, ji = s[D].split(D.op.axis[1], factor=8)
    s[D].vectorize(ji)
    s[D].parallel(D.op.axis[0])
    return s, C, D, bias


def test_tutorial_bias_fixed_shape() -> None:
    s, C, D, bias = bias_add((33, 29))
    assert "bias: float32" in str(asc.lower(s, [C, D, bias]))
    f = asc.build(s, [C, D, bias], target=TARGET)
    c = RNG.random((33, 29), dtype=np.float32)
    d = np.zeros_like(c)
    f(c, d, 10.0)
    np.testing.assert_allclose(d, c + 10.0, rtol=1e-6)
    f(c, d, np.float32(-2.5))  # numpy scalars and ints are numbers too
    np.testing.assert_allclose(d, c - 2.5, rtol=1e-6)
    f(c, d, 3)
    np.testing.assert_allclose(d, c + 3.0, rtol=1e-6)
    assert all(t > 0 for t in f.time(c, d, 1.0, repeat=2))
    assert len(f.bench(c, d, 1.0, repeat=2)) == 2
    np.testing.assert_allclose(d, c + 1.0, rtol=1e-6)  # the timing entries pass the scalar too


def test_tutorial_matmul_then_bias_at_its_place() -> None:
    """The tutorial's ``D = A @ B + bias``, the scalar between arrays of the call."""
    n, kk, m = 16, 8, 11
    bias = asc.var("bias", dtype="float32")
    A = asc.placeholder((n, kk), name="A")
    B = asc.placeholder((kk, m), name="B")
    k = asc.reduce_axis((0, kk), name="k")
    C = asc.compute((n, m), lambda i, j: asc.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = asc.compute(C.shape, lambda i, j: C[i, j] + bias, name="D")
    s = asc.create_schedule(D.op)
    f = asc.build(s, [A, bias, B, D], target=TARGET)
    a, b = RNG.random((n, kk), dtype=np.float32), RNG.random((kk, m), dtype=np.float32)
    d = np.zeros((n, m), np.float32)
    f(a, 10.0, b, d)
    np.testing.assert_allclose(d, a @ b + 10.0, rtol=1e-5)


@pytest.mark.requires("gcc", "openblas")
def test_tutorial_cblas_matmul_then_bias() -> None:
    """The tutorial's second form: ``cblas.matmul`` (an extern stage) read by a compute with a scalar."""
    bias = asc.var("bias", dtype="float32")
    A = asc.placeholder((12, 7), name="A")
    B = asc.placeholder((9, 7), name="B")
    C = cblas.matmul(A, B, transb=True)
    D = asc.compute(C.shape, lambda i, j: C[i, j] + bias, name="D")
    f = asc.build(asc.create_schedule(D.op), [A, B, D, bias], target=TARGET)
    a, b = RNG.random((12, 7), dtype=np.float32), RNG.random((9, 7), dtype=np.float32)
    d = np.zeros((12, 9), np.float32)
    f(a, b, d, 10.0)
    np.testing.assert_allclose(d, a @ b.T + 10.0, rtol=1e-5)
    with pytest.raises(ValueError, match="2-d tensors only"):
        cblas.matmul(asc.placeholder((3,), name="V"), B)


def test_tutorial_bias_symbolic_shape_and_listed_size() -> None:
    n, m = asc.size_var("n"), asc.size_var("m")
    s, C, D, bias = bias_add((n, m))
    f = asc.build(s, [C, n, D, bias], target=TARGET)  # TVM's build(s, [A, n]): n checked, not passed
    for shape in [(1, 1), (5, 17), (32, 40)]:
        c = RNG.random(shape, dtype=np.float32)
        d = np.zeros_like(c)
        f(c, shape[0], d, -1.5)
        np.testing.assert_allclose(d, c - 1.5, rtol=1e-6)
    c, d = np.ones((3, 4), np.float32), np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match="argument 1 'n' is 4 but the arrays give 3"):
        f(c, 4, d, 1.0)
    assert (d == 0).all()  # nothing ran


def test_float64_int32_int64_scalars_and_a_reduction() -> None:
    x = asc.var("x", dtype="float64")
    A = asc.placeholder((10,), "float64", name="A")
    B = asc.compute((10,), lambda i: A[i] * x - 1.0, name="B")
    f = asc.build(asc.create_schedule(B.op), [x, A, B], target=TARGET)
    a, b = RNG.random(10), np.zeros(10)
    f(1.0 / 3.0, a, b)
    np.testing.assert_allclose(b, a * (1.0 / 3.0) - 1.0, rtol=1e-15)

    k32, k64 = asc.var("k32"), asc.var("k64", "int64")
    Iv = asc.placeholder((7,), "int32", name="I")
    J = asc.compute((7,), lambda i: Iv[i] * k32 + 1, name="J")
    L = asc.placeholder((7,), "int64", name="L")
    M = asc.compute((7,), lambda i: L[i] + k64, name="M")
    s = asc.create_schedule([J.op, M.op])
    g = asc.build(s, [Iv, L, k64, J, M, k32], target=TARGET)
    i32, i64 = np.arange(7, dtype=np.int32), np.arange(7, dtype=np.int64)
    j, m = np.zeros(7, np.int32), np.zeros(7, np.int64)
    g(i32, i64, 1 << 40, j, m, -3)
    np.testing.assert_array_equal(j, i32 * -3 + 1)
    np.testing.assert_array_equal(m, i64 + (1 << 40))

    scale = asc.var("scale", "float32")
    X = asc.placeholder((6, 9), name="X")
    r = asc.reduce_axis((0, 9), name="r")
    Y = asc.compute((6,), lambda i: asc.sum(X[i, r] * scale, axis=r), name="Y")
    s = asc.create_schedule(Y.op)
    ro, ri = s[Y].split(r, factor=4)
    h = asc.build(s, [X, Y, scale], target=TARGET)
    xv, y = RNG.random((6, 9), dtype=np.float32), np.zeros(6, np.float32)
    h(xv, y, 0.5)
    np.testing.assert_allclose(y, (xv * 0.5).sum(axis=1), rtol=1e-5)


def test_int_scalar_as_an_index_offset_under_compute_at() -> None:
    """An int32 scalar in an index: the attached producer's region moves with it, guarded."""
    off = asc.var("off")
    A = asc.placeholder((20,), name="A")
    B = asc.compute((20,), lambda i: A[i] * 2.0, name="B")
    C = asc.compute((10,), lambda i: B[i + off], name="C")
    s = asc.create_schedule(C.op)
    xo, _ = s[C].split(C.op.axis[0], factor=4)
    s[B].compute_at(s[C], xo)
    f = asc.build(s, [A, C, off], target=TARGET)
    a, c = RNG.random(20, dtype=np.float32), np.zeros(10, np.float32)
    for value in (0, 3, 10):
        f(a, c, value)
        np.testing.assert_allclose(c, a[value : value + 10] * 2.0, rtol=1e-6)


def test_bad_scalar_input_is_one_line() -> None:
    s, C, D, bias = bias_add((4, 8))
    with pytest.raises(ValueError, match=r"var 'bias' \(float32\) of stage 'D' .* list it in the arguments"):
        asc.build(s, [C, D], target=TARGET)
    with pytest.raises(ValueError, match="var 'bias' is listed twice"):
        asc.lower(s, [C, D, bias, bias])
    other = asc.var("other", "float32")
    with pytest.raises(ValueError, match="var 'other' is among the arguments but the computation does not"):
        asc.emit(s, [C, D, bias, other])
    with pytest.raises(ValueError, match="a float var is a scalar argument, not a size"):
        asc.placeholder((asc.var("f", "float32"), 4), name="F")
    with pytest.raises(TypeError, match="use one of int32, int64, float32, float64"):
        asc.var("h", "float16")
    for target in ["cuda", "opencl"]:
        with pytest.raises(NotImplementedError, match=r"scalar arguments \(bias\) are C-target only"):
            asc.emit(s, [C, D, bias], target=target)

    g = asc.create_schedule(D.op)
    g[D].bind(D.op.axis[0], asc.thread_axis("blockIdx.x"))
    with pytest.raises(NotImplementedError, match="C-target only: GPU schedules cannot take them"):
        asc.lower(g, [C, D, bias])

    f = asc.build(s, [C, D, bias], target=TARGET)
    c, d = np.ones((4, 8), np.float32), np.zeros((4, 8), np.float32)
    with pytest.raises(TypeError, match=r"takes 3 arguments \(C, D, bias\), got 2"):
        f(c, d)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        f(c, d, 1.0, 2.0)
    with pytest.raises(TypeError, match="argument 2 'bias' is a float32 scalar, got str '1'"):
        f(c, d, "1")
    with pytest.raises(TypeError, match="got bool"):
        f.time(c, d, True)
    with pytest.raises(TypeError, match="expected a numpy.ndarray, got float"):
        f(1.0, d, c)
    k = asc.var("k")
    A = asc.placeholder((3,), "int32", name="A")
    B = asc.compute((3,), lambda i: A[i] + k, name="B")
    g = asc.build(asc.create_schedule(B.op), [A, B, k], target=TARGET)
    a, b = np.zeros(3, np.int32), np.zeros(3, np.int32)
    with pytest.raises(TypeError, match="'k' is a int32 scalar, got a float 1.5; pass an int"):
        g(a, b, 1.5)
    with pytest.raises(ValueError, match="got 2147483648, which overflows it"):
        g(a, b, 1 << 31)
    assert (d == 0).all() and (b == 0).all()  # nothing ran

    @asc.workload("test_te_scalars_scaled")
    def scaled(n: int) -> list:
        x = asc.var("x", "float32")
        X = asc.placeholder((n,), name="X")
        return [X, asc.compute((n,), lambda i: X[i] * x, name="Y"), x]

    with pytest.raises(ValueError, match="scalar arguments are for asc.build/lower/emit"):
        asc.Task("test_te_scalars_scaled", (8,), target=TARGET)  # so neither tuning nor export


@pytest.mark.parametrize("portable", [False, True])
def test_emitted_c_compiles_with_werror(portable: bool, tmp_path: Path) -> None:
    n = asc.size_var("n")
    for shape in [(16, 24), (n, 24)]:
        s, C, D, bias = bias_add(shape)
        if portable:
            compile_strict(s, [C, D, bias], tmp_path)
        else:
            src = asc.emit(s, [C, bias, D], target=TARGET)
            flags = ["-Wall", "-Wextra", "-Werror"]
            compile_object(src, Target.parse(TARGET), tmp_path / "kernel.o", extra_flags=flags)


FLAT_SCRIPT = """
import numpy as np
import autosched as asc
from autosched.contrib import cblas
bias = asc.var("bias", dtype="float32")
A = asc.placeholder((5, 3), name="A")
D = asc.compute(A.shape, lambda i, j: A[i, j] * bias, name="D")
f = asc.build(asc.create_schedule(D.op), [A, D, bias], "c")
a = np.arange(15, dtype=np.float32).reshape(5, 3)
d = np.zeros_like(a)
f(a, d, 0.5)
print(float(d.sum()))
"""


def test_flat_script_in_a_subprocess(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(FLAT_SCRIPT)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert float(proc.stdout.strip()) == 0.5 * sum(range(15))
