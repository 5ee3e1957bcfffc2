"""Quantize / dequantize / requantize as expressions: round half to even, saturation, per-tensor and
per-channel scales and zero points, fused as the epilogue of an int8 matmul; bit-exact in C and in
the numpy reference against numpy written independently."""

from __future__ import annotations

import numpy as np
import pytest

import autosched as asc
from autosched.reference import evaluate

RNG = np.random.default_rng(5)


def _np_quantize(x: np.ndarray, scale: np.ndarray | float, zp: np.ndarray | int, dtype: type) -> np.ndarray:
    info = np.iinfo(dtype)
    q = np.rint((x / np.float32(scale)).astype(np.float64)) + zp
    return np.clip(q, info.min, info.max).astype(dtype)


@pytest.mark.requires("gcc")
def test_quantize_per_tensor_rounds_half_to_even_and_saturates() -> None:
    X = asc.placeholder((64,), name="X")
    Q = asc.compute((64,), lambda i: asc.quantize(X[i], 0.25, 3, "int8"), name="Q")
    f = asc.build(asc.create_schedule(Q.op), [X, Q], target="c")
    ties = np.arange(-16, 16, dtype=np.float32) * 0.125  # x / 0.25 = k / 2: every half-way case
    x = np.concatenate(
        [ties, np.float32([1e6, -1e6, 31.9, -32.9]), RNG.standard_normal(28).astype(np.float32)]
    )
    q = np.zeros(64, np.int8)
    f(x, q)
    want = _np_quantize(x, 0.25, 3, np.int8)
    np.testing.assert_array_equal(q, want)
    np.testing.assert_array_equal(evaluate([Q], {"X": x})["Q"], want)
    assert q[32] == 127 and q[33] == -128  # saturated, not wrapped


@pytest.mark.requires("gcc")
def test_per_channel_quantize_and_dequantize() -> None:
    X = asc.placeholder((6, 16), name="X")
    S = asc.placeholder((16,), name="S")
    Z = asc.placeholder((16,), dtype="uint8", name="Z")
    Q = asc.compute((6, 16), lambda i, j: asc.quantize(X[i, j], S[j], Z[j], "uint8"), name="Q")
    D = asc.compute((6, 16), lambda i, j: asc.dequantize(Q[i, j], S[j], Z[j]), name="D")
    f = asc.build(asc.create_schedule(D.op), [X, S, Z, Q, D], target="c")
    x = RNG.standard_normal((6, 16)).astype(np.float32) * 4
    s = RNG.uniform(0.01, 0.1, 16).astype(np.float32)
    z = RNG.integers(0, 256, 16).astype(np.uint8)
    q, d = np.zeros((6, 16), np.uint8), np.zeros((6, 16), np.float32)
    f(x, s, z, q, d)
    want = _np_quantize(x, s, z.astype(np.int64), np.uint8)
    np.testing.assert_array_equal(q, want)
    np.testing.assert_array_equal(d, (want.astype(np.float32) - z.astype(np.float32)) * s)


@pytest.mark.requires("gcc")
def test_requantize_fuses_as_the_epilogue_of_an_int8_matmul() -> None:
    A = asc.placeholder((20, 32), dtype="uint8", name="A")
    B = asc.placeholder((32, 24), dtype="int8", name="B")
    M = asc.placeholder((24,), name="M")  # per output channel: sa * sw[j] / so
    k = asc.reduce_axis(32, name="k")
    C = asc.compute(
        (20, 24), lambda i, j: asc.sum(A[i, k].astype("int32") * B[k, j].astype("int32"), axis=k), "C"
    )
    Y = asc.compute((20, 24), lambda i, j: asc.requantize(C[i, j], M[j], -5, "int8"), name="Y")
    s = asc.create_schedule(Y.op)
    yo, yi = s[Y].split(Y.op.axis[0], 4)
    s[C].compute_at(s[Y], yo)  # the accumulator lives in a local tile: requantized as it is made
    f = asc.build(s, [A, B, M, Y], target="c")
    a = RNG.integers(0, 256, (20, 32)).astype(np.uint8)
    b = RNG.integers(-128, 128, (32, 24)).astype(np.int8)
    m = RNG.uniform(1e-4, 2e-3, 24).astype(np.float32)
    y = np.zeros((20, 24), np.int8)
    f(a, b, m, y)
    acc = a.astype(np.int64) @ b.astype(np.int64)
    want = np.clip(np.rint(acc * m.astype(np.float64)) - 5, -128, 127).astype(np.int8)
    np.testing.assert_array_equal(y, want)


def test_round_half_even_is_exact_for_float32_just_below_a_half() -> None:
    X = asc.placeholder((4,), name="X")
    R = asc.compute((4,), lambda i: asc.round_half_even(X[i]), name="R")
    x = np.float32([0.49999997, 2.5, -2.5, 3.5])
    np.testing.assert_array_equal(evaluate([R], {"X": x})["R"], np.rint(x.astype(np.float64)))


def test_bad_scales_and_types_are_one_line_errors() -> None:
    X = asc.placeholder((4,), name="X")
    I32 = asc.placeholder((4,), dtype="int32", name="I")
    with pytest.raises(ValueError, match="quantize: the scale must be a finite non-zero number, got 0"):
        asc.quantize(X[0], 0.0)
    with pytest.raises(ValueError, match="requantize: the scale must be a finite non-zero number, got nan"):
        asc.requantize(I32[0], float("nan"))
    with pytest.raises(
        ValueError, match="quantize: dtype must be one of int8, uint8, int16, int32, got 'float32'"
    ):
        asc.quantize(X[0], 0.5, dtype="float32")
    with pytest.raises(ValueError, match="quantize: x must be a float expression, got int32"):
        asc.quantize(I32[0], 0.5)
