"""Low-precision types: uint8/int8 with int32 accumulation and bfloat16 with float32 accumulation,
through expressions, the numpy reference, the C emitter and the runner's argument checks."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import autosched as asc
from autosched.dtypes import accepts, dtype, numpy_dtype
from autosched.reference import evaluate
from autosched.runner.measure_worker import compare

BF16 = ml_dtypes.bfloat16


def test_dtype_table_knows_the_narrow_types() -> None:
    assert dtype("uint8").c_name == "uint8_t" and dtype("int8").c_name == "int8_t"
    assert dtype("bfloat16").c_name == "uint16_t" and dtype("bfloat16").bytes == 2
    assert numpy_dtype("bfloat16") == np.dtype(BF16)
    assert accepts("bfloat16", np.dtype(np.uint16)) and accepts("bfloat16", np.dtype(BF16))
    assert not accepts("bfloat16", np.dtype(np.float16)) and not accepts("uint8", np.dtype(np.int8))


def _int8_matmul(m: int, n: int, k: int) -> list[asc.Tensor]:
    A = asc.placeholder((m, k), dtype="uint8", name="A")
    B = asc.placeholder((k, n), dtype="int8", name="B")
    r = asc.reduce_axis(k, name="r")
    C = asc.compute(
        (m, n), lambda i, j: asc.sum(A[i, r].astype("int32") * B[r, j].astype("int32"), axis=r), name="C"
    )
    return [A, B, C]


@pytest.mark.requires("gcc")
def test_u8_s8_matmul_with_int32_accumulation_is_bit_exact() -> None:
    A, B, C = _int8_matmul(33, 20, 70)  # odd sizes: tails everywhere
    s = asc.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], 8)
    s[C].vectorize(s[C].split(C.op.axis[1], 8)[1])
    f = asc.build(s, [A, B, C], target="c")
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, (33, 70)).astype(np.uint8)
    b = rng.integers(-128, 128, (70, 20)).astype(np.int8)
    c = np.full((33, 20), -7, np.int32)
    f(a, b, c)
    want = a.astype(np.int32) @ b.astype(np.int32)
    np.testing.assert_array_equal(c, want)
    np.testing.assert_array_equal(evaluate([C], {"A": a, "B": b})["C"], want)


@pytest.mark.requires("gcc")
def test_narrowing_int_casts_wrap_as_numpy_does() -> None:
    X = asc.placeholder((8,), dtype="int32", name="X")
    Y = asc.compute((8,), lambda i: X[i].astype("int8"), name="Y")
    Z = asc.compute((8,), lambda i: X[i].astype("uint8"), name="Z")
    f = asc.build(asc.create_schedule([Y.op, Z.op]), [X, Y, Z], target="c")
    x = np.array([0, 127, 128, 255, 256, -1, -129, 300], np.int32)
    y, z = np.zeros(8, np.int8), np.zeros(8, np.uint8)
    f(x, y, z)
    np.testing.assert_array_equal(y, x.astype(np.int8))
    np.testing.assert_array_equal(z, x.astype(np.uint8))


@pytest.mark.requires("gcc")
def test_float_to_bfloat16_rounds_half_to_even_bit_exactly() -> None:
    X = asc.placeholder((12,), name="X")
    Y = asc.compute((12,), lambda i: X[i].astype("bfloat16"), name="Y")
    f = asc.build(asc.create_schedule(Y.op), [X, Y], target="c")
    # 1 + 2^-8 is half-way between bf16 1.0 and 1.0078125 (ties to even: 1.0); 1 + 3*2^-8 ties up
    x = np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 1 + 2**-8 + 2**-20, 3.14159, 1e-40,
                  np.inf, -np.inf, 3.4e38, -0.0, 65504.0, 2.0**-133], np.float32)  # fmt: skip
    y = np.zeros(12, BF16)
    f(x, y)
    np.testing.assert_array_equal(y.view(np.uint16), x.astype(BF16).view(np.uint16))
    x[0] = np.nan
    f(x, y)
    assert np.isnan(y[0].astype(np.float32))


@pytest.mark.requires("gcc")
def test_bfloat16_arithmetic_is_computed_in_float32_and_rounded_like_ml_dtypes() -> None:
    A = asc.placeholder((16, 16), dtype="bfloat16", name="A")
    B = asc.placeholder((16, 16), dtype="bfloat16", name="B")
    D = asc.compute((16, 16), lambda i, j: asc.max((A[i, j] + B[j, i]) * 3.3, A[i, j]), name="D")
    E = asc.compute((16, 16), lambda i, j: asc.if_then_else(D[i, j] > B[i, j], D[i, j], B[i, j]), name="E")
    f = asc.build(asc.create_schedule(E.op), [A, B, E], target="c")
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((16, 16)).astype(BF16) for _ in range(2))
    e = np.zeros((16, 16), BF16)
    f(a, b, e)
    want = evaluate([E], {"A": a, "B": b})["E"]
    assert want.dtype == np.dtype(BF16)
    np.testing.assert_array_equal(e.view(np.uint16), want.view(np.uint16))
    f(a.view(np.uint16), b.view(np.uint16), e.view(np.uint16))  # uint16 views of the bits work too
    np.testing.assert_array_equal(e.view(np.uint16), want.view(np.uint16))


@pytest.mark.requires("gcc")
def test_bfloat16_matmul_accumulates_in_float32() -> None:
    A = asc.placeholder((24, 64), dtype="bfloat16", name="A")
    B = asc.placeholder((64, 16), dtype="bfloat16", name="B")
    r = asc.reduce_axis(64, name="r")
    C = asc.compute(
        (24, 16), lambda i, j: asc.sum(A[i, r].astype("float32") * B[r, j].astype("float32"), r), name="C"
    )
    f = asc.build(asc.create_schedule(C.op), [A, B, C], target="c")
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((24, 64)).astype(BF16), rng.standard_normal((64, 16)).astype(BF16)
    c = np.zeros((24, 16), np.float32)
    f(a, b, c)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)
    assert compare("C", c, want) is None


@pytest.mark.requires("gcc")
def test_wrong_narrow_dtypes_are_one_line_errors_before_any_c_runs() -> None:
    A, B, C = _int8_matmul(4, 4, 4)
    f = asc.build(asc.create_schedule(C.op), [A, B, C], target="c")
    u8, s8, out = np.zeros((4, 4), np.uint8), np.zeros((4, 4), np.int8), np.zeros((4, 4), np.int32)
    with pytest.raises(TypeError, match=r"argument 0 'A': expected dtype uint8, got int8$"):
        f(s8, s8, out)
    with pytest.raises(TypeError, match=r"argument 1 'B': expected dtype int8, got uint8$"):
        f(u8, u8, out)
    X = asc.placeholder((4,), dtype="bfloat16", name="X")
    Y = asc.compute((4,), lambda i: X[i].astype("float32"), name="Y")
    g = asc.build(asc.create_schedule(Y.op), [X, Y], target="c")
    with pytest.raises(TypeError, match=r"argument 0 'X': expected dtype bfloat16, got float16$"):
        g(np.zeros(4, np.float16), np.zeros(4, np.float32))


def test_worker_compares_bfloat16_outputs_as_floats() -> None:
    want = np.array([1.0, 2.0, 3.0], np.float32)
    assert compare("Y", want.astype(BF16), want) is None
    assert compare("Y", np.array([1.0, 2.5, 3.0], BF16), want) is not None
