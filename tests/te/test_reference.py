"""The generic numpy evaluator of compute DAGs and the generic FLOP counter."""

from __future__ import annotations

import math
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from autosched import expr as te
from autosched import reference
from autosched.flops import count_flops
from autosched.ops import get_workload, workload
from autosched.reference import evaluate

RNG = np.random.default_rng(0)


def _rand(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype(np.float32)


@workload("test.stencil3")
def stencil3(n: int) -> list[te.Tensor]:
    """A 1-D three-point stencil with weights 1, 2, 3."""
    X = te.placeholder((n,), name="X")
    Y = te.compute((n - 2,), lambda i: X[i] + 2.0 * X[i + 1] + 3.0 * X[i + 2], name="Y")
    return [X, Y]


def test_user_stencil_workload() -> None:
    wl = get_workload("test.stencil3", (11,))
    x = np.arange(11, dtype=np.float32) ** 2
    expected = np.array([x[i] + 2 * x[i + 1] + 3 * x[i + 2] for i in range(9)], np.float32)
    (got,) = wl.reference(x)  # no registered reference: the generic evaluator
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == np.float32
    assert wl.flops() == 9 * 4  # two multiplies, two adds per point


def test_padding_select_with_out_of_range_untaken_branch() -> None:
    A = te.placeholder((4, 5), name="A")
    P = te.compute((6, 7), lambda i, j: te.if_then_else(
        te.all(i >= 1, i < 5, j >= 1, j < 6), A[i - 1, j - 1], 0.0), name="P")
    a = _rand(4, 5)
    np.testing.assert_array_equal(evaluate(P, {"A": a})["P"], np.pad(a, 1))


def test_short_circuit_logic_guards_reads() -> None:
    A = te.placeholder((5,), name="A")
    B = te.compute((6,), lambda i: te.if_then_else((i < 5) & (A[te.min(i, 5)] > 0), 1.0, 0.0), name="B")
    a = np.array([1, -1, 2, -2, 3], np.float32)
    np.testing.assert_array_equal(evaluate(B, {"A": a})["B"], [1, 0, 1, 0, 1, 0])


def test_out_of_bounds_read_is_an_error() -> None:
    A = te.placeholder((5,), name="A")
    B = te.compute((5,), lambda i: A[i + 1] * 2.0, name="B")
    with pytest.raises(IndexError, match=r"stage 'B': out-of-bounds read \(A\[\(i \+ 1\)\]\) at i=4"):
        evaluate(B, {"A": np.ones(5)})
    k = te.reduce_axis(4, "k")
    C = te.compute((3,), lambda i: te.sum(A[i * 2 - k], axis=k), name="C")
    with pytest.raises(IndexError, match=r"stage 'C'.* at i=0, k=1"):
        evaluate(C, {"A": np.ones(5)})


def test_reduce_where_begin_and_combiners() -> None:
    A = te.placeholder((6, 9), name="A")
    k = te.reduce_axis((2, 7), "k")
    a = _rand(6, 9)
    S = te.compute((6,), lambda i: te.sum(A[i, k], axis=k, where=te.equal(k % 2, 0)), name="S")
    np.testing.assert_allclose(evaluate(S, {"A": a})["S"], a[:, 2:7:2].sum(axis=1), rtol=1e-6)
    M = te.compute((6,), lambda i: te.max(A[i, k], axis=k, where=k > i), name="M")
    got = evaluate(M, {"A": a})["M"]
    for i in range(6):
        allowed = [a[i, j] for j in range(2, 7) if j > i]
        assert got[i] == (max(allowed) if allowed else -np.inf)
    m = te.reduce_axis(9, "m")
    N = te.compute((6,), lambda i: te.min(A[i, m] * A[i, m], axis=m), name="N")
    np.testing.assert_allclose(evaluate(N, {"A": a})["N"], (a * a).min(axis=1), rtol=1e-6)


def test_integer_floor_semantics_and_gathers() -> None:
    A = te.placeholder((12,), "int32", name="A")
    Q = te.compute((12,), lambda i: (i - 5) // 3 * 100 + (i - 5) % 3, name="Q")
    G = te.compute((4, 3), lambda i, j: A[(i * 3 + j * 5) % 12], name="G")
    a = np.arange(12, dtype=np.int32) * 7
    out = evaluate([Q, G], {A: a})
    idx = np.arange(12)
    np.testing.assert_array_equal(out["Q"], (idx - 5) // 3 * 100 + (idx - 5) % 3)
    i, j = np.ogrid[:4, :3]
    np.testing.assert_array_equal(out["G"], a[(i * 3 + j * 5) % 12])
    assert out["Q"].dtype == np.int32


def test_math_calls_casts_comparisons_logic() -> None:
    X = te.placeholder((7,), name="X")
    x = np.linspace(0.1, 2.0, 7).astype(np.float32)
    funcs = {
        "exp": (te.exp, np.exp), "log": (te.log, np.log), "sqrt": (te.sqrt, np.sqrt),
        "tanh": (te.tanh, np.tanh), "sigmoid": (te.sigmoid, lambda v: 1 / (1 + np.exp(-v))),
        "abs": (lambda v: te.abs(v - 1.0), lambda v: np.abs(v - 1)), "floor": (te.floor, np.floor),
        "ceil": (te.ceil, np.ceil), "erf": (te.erf, np.vectorize(math.erf)),
        "pow": (lambda v: te.pow(v, 1.5), lambda v: v**1.5),
    }

    def stage(name: str, f: Callable[[te.Expr], te.Expr]) -> te.Tensor:
        return te.compute((7,), lambda i: f(X[i]), name=name)

    stages = [stage(name, f) for name, (f, _) in funcs.items()]
    out = evaluate(stages, {"X": x})
    for name, (_, ref) in funcs.items():
        np.testing.assert_allclose(out[name], ref(x.astype(np.float64)), rtol=1e-6, err_msg=name)
        assert out[name].dtype == np.float32
    T = te.compute((7,), lambda i: te.cast(X[i] * 3.0, "int32"), name="T")
    L = te.compute((7,), lambda i: te.if_then_else(
        (X[i] > 0.5) & ~(X[i] >= 1.5) | te.equal(i, 0), 1, 0), name="L")
    B = te.compute((7,), lambda i: te.cast(te.not_equal(i % 2, 0), "float32") + 0.5, name="B")
    out = evaluate([T, L, B], {"X": x})
    np.testing.assert_array_equal(out["T"], (x * np.float32(3)).astype(np.int32))
    expected = ((x > 0.5) & ~(x >= 1.5)) | (np.arange(7) == 0)
    np.testing.assert_array_equal(out["L"], expected.astype(np.int32))
    np.testing.assert_array_equal(out["B"], np.arange(7) % 2 + 0.5)


def test_chunking_does_not_change_results() -> None:
    wl = get_workload("conv2d_nchw", (2, 3, 9, 8, 4, 3, 3, 2, 1))
    arrays = dict(zip(["data", "kernel"], wl.random_inputs(3), strict=True))
    full = evaluate(wl.outputs, arrays)["conv"]
    for budget in (1, 7, 50, 1000):  # 1 and 7 also split the reduce axes of each output point
        chunked = evaluate(wl.outputs, arrays, budget=budget)["conv"]
        np.testing.assert_allclose(chunked, full, rtol=1e-5, atol=1e-6)
    A = te.placeholder((10,), name="A")
    k = te.reduce_axis(10, "k")
    top = te.compute((), lambda: te.max(A[k] - A[9 - k], axis=k), name="top")
    a = _rand(10)
    for budget in (1, 3, 100):
        assert evaluate(top, {"A": a}, budget=budget)["top"] == (a - a[::-1]).max()


def test_input_validation() -> None:
    A = te.placeholder((3, 2), "int32", name="A")
    B = te.compute((3, 2), lambda i, j: A[i, j] + 1, name="B")
    with pytest.raises(ValueError, match=r"missing \['A'\], unknown \['Z'\]"):
        evaluate(B, {"Z": np.zeros((3, 2))})
    with pytest.raises(ValueError, match=r"input 'A': expected shape \(3, 2\), got \(2, 3\)"):
        evaluate(B, {"A": np.zeros((2, 3), np.int32)})
    with pytest.raises(TypeError, match="cannot convert float64 to int32"):
        evaluate(B, {"A": np.zeros((3, 2))})
    np.testing.assert_array_equal(evaluate(B, {"A": [[1, 2], [3, 4], [5, 6]]})["B"], [[2, 3], [4, 5], [6, 7]])


def test_generic_flop_counter() -> None:
    A = te.placeholder((4, 6), name="A")
    k = te.reduce_axis(6, "k")
    S = te.compute((4,), lambda i: te.sum(A[i, k] * A[i, k] + 1.0, axis=k), name="S")  # mul, add, combine
    E = te.compute((4,), lambda i: te.exp(S[i]) / te.max(S[i], 1.0), name="E")  # exp, div, max
    P = te.compute((4, 6), lambda i, j: te.if_then_else(i * 2 + j > 3, A[i, (j + 1) % 6], 0.0), name="P")
    assert count_flops([S]) == 4 * 6 * 3
    assert count_flops([E]) == 4 * 6 * 3 + 4 * 3
    assert count_flops([P]) == 0  # index arithmetic and conditions are not work


def test_resnet_layer_is_evaluated_in_large_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The evaluator works on whole boxes of at most ``DEFAULT_BUDGET`` elements, not point by
    point: a ResNet layer (116 M multiply-adds) takes a few dozen numpy chunks and bounded memory.
    (How long it takes is measured by benchmarks/bench_reference.py, not here.)"""
    sizes: list[int] = []

    class CountingChunk(reference._Chunk):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            sizes.append(math.prod(self.shape))

    monkeypatch.setattr(reference, "_Chunk", CountingChunk)
    wl = get_workload("conv2d_nchw", (1, 64, 56, 56, 64, 3, 3, 1, 1))
    arrays = wl.random_inputs(0)
    (expected,) = wl.reference(*arrays)
    tracemalloc.start()
    (got,) = wl.evaluate(*arrays)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert got.shape == (1, 64, 56, 56) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    work = 64 * 58 * 58 + 64 * 56 * 56 * 64 * 3 * 3  # the padding stage, then the convolution
    assert sum(sizes) == work  # every point once
    assert max(sizes) <= reference.DEFAULT_BUDGET
    assert len(sizes) <= 2 * math.ceil(work / reference.DEFAULT_BUDGET) + 2, len(sizes)
    assert peak < 300e6, f"{peak / 1e6:.0f} MB"
