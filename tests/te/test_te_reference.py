"""The numpy reference (``asc.reference.evaluate``) of scans, tuple computes and comm_reducers,
checked against numpy written here and against the built C kernels."""

from __future__ import annotations

import numpy as np
import pytest

import autosched as asc
from autosched.ops import workload
from autosched.reference import evaluate

pytestmark = pytest.mark.requires("gcc")


def _argmax() -> asc.expr.Reducer:
    def combine(x, y):  # type: ignore[no-untyped-def]
        keep = x[1] >= y[1]  # ties keep the accumulator: the first index wins
        return asc.if_then_else(keep, x[0], y[0]), asc.if_then_else(keep, x[1], y[1])

    return asc.comm_reducer(combine, lambda a, b: (asc.const(-1, a), asc.min_value(b)), name="argmax")


def _argmax_dag(m: int, k1: int, k2: int) -> tuple[asc.Tensor, asc.Tensor, asc.Tensor]:
    """Argmax over two reduce axes (flattened index ``a * k2 + b``), skipping ``b == 0``."""
    V = asc.placeholder((m, k1, k2), name="V")
    a = asc.reduce_axis((0, k1), "a")
    b = asc.reduce_axis((0, k2), "b")
    t0, t1 = asc.compute(
        (m,), lambda i: _argmax()((a * k2 + b, V[i, a, b]), axis=[a, b], where=b > 0), name="T"
    )
    return V, t0, t1


@pytest.mark.parametrize("budget", [1 << 22, 7])
def test_tuple_comm_reducer_with_where_over_two_axes(budget: int) -> None:
    m, k1, k2 = 11, 5, 3
    V, t0, t1 = _argmax_dag(m, k1, k2)
    v = np.random.default_rng(3).integers(0, 4, (m, k1, k2)).astype(np.float32)  # many ties
    got = evaluate([t0, t1], {"V": v}, budget=budget)
    masked = np.where(np.arange(k2) > 0, v, -np.inf).reshape(m, k1 * k2)
    np.testing.assert_array_equal(got["T.v0"], masked.argmax(1))
    np.testing.assert_array_equal(got["T.v1"], masked.max(1))
    assert got["T.v0"].dtype == np.int32 and got["T.v1"].dtype == np.float32
    s = asc.create_schedule(t0.op)
    s[t0].split(t0.op.axis[0], factor=4)  # non-dividing
    o0, o1 = np.zeros(m, np.int32), np.zeros(m, np.float32)
    asc.build(s, [V, t0, t1])(v, o0, o1)
    np.testing.assert_array_equal(o0, got["T.v0"])
    np.testing.assert_array_equal(o1, got["T.v1"])


def test_single_comm_reducers_int_float_and_a_consumer() -> None:
    m, n = 6, 9
    B = asc.placeholder((m, n), dtype="int32", name="B")
    F = asc.placeholder((m, n), name="F")
    k, k2 = asc.reduce_axis((0, n), "k"), asc.reduce_axis((0, n), "k2")
    mysum = asc.comm_reducer(lambda x, y: x + y, lambda t: asc.const(0, t), name="mysum")
    prod = asc.comm_reducer(lambda x, y: x * y, lambda t: asc.const(1, t), name="prod")
    S = asc.compute((m,), lambda i: mysum(B[i, k] * 2, axis=k, where=k % 3 > 0), name="S")
    P = asc.compute((m,), lambda i: prod(F[i, k2], axis=k2), name="P")
    R = asc.compute((m,), lambda i: S[i].astype("float32") + P[i], name="R")
    b = np.random.default_rng(1).integers(-50, 50, (m, n)).astype(np.int32)
    f = np.random.default_rng(2).uniform(0.5, 1.5, (m, n)).astype(np.float32)
    got = evaluate([S, P, R], {B: b, F: f})
    np.testing.assert_array_equal(got["S"], (2 * b)[:, np.arange(n) % 3 != 0].sum(1))
    np.testing.assert_allclose(got["P"], f.prod(1), rtol=1e-5)
    np.testing.assert_allclose(got["R"], got["S"] + got["P"], rtol=1e-6)


def test_tuple_compute_and_its_consumer() -> None:
    n, m = 7, 10
    A = asc.placeholder((n, m), name="A")
    X, Y = asc.compute((n, m), lambda i, j: (A[i, j] * 2, (A[i, j] + 1).astype("float64")), name="XY")
    Z = asc.compute((n, m), lambda i, j: X[i, (j + 1) % m] - Y[i, j].astype("float32"), name="Z")
    a = np.random.default_rng(n).random((n, m)).astype(np.float32)
    got = evaluate([X, Y, Z], {"A": a}, budget=8)
    np.testing.assert_allclose(got["XY.v0"], a * 2)
    assert got["XY.v1"].dtype == np.float64
    np.testing.assert_allclose(got["XY.v1"], a + 1.0)
    np.testing.assert_allclose(got["Z"], np.roll(a, -1, axis=1) * 2 - (a + 1), rtol=1e-6)


@workload("test_te_ref_recurrence")
def recurrence(m: int, n: int) -> list[asc.Tensor]:
    """``y[t] = 2 y[t-1] + y[t-2] + f[t]`` from two init rows, then a scaled copy."""
    F = asc.placeholder((m, n), dtype="int32", name="F")
    st = asc.placeholder((m, n), dtype="int32", name="st")
    ini = asc.compute((2, n), lambda t, i: F[t, i], name="ini")
    upd = asc.compute((m, n), lambda t, i: st[t - 1, i] * 2 + st[t - 2, i] + F[t, i], name="upd")
    sc = asc.scan(ini, upd, st, name="rec")
    Y = asc.compute((m, n), lambda t, i: sc[t, i] * 3, name="Y")
    return [F, Y]


@pytest.mark.parametrize("m,n", [(12, 3), (2, 1), (9, 8)])
def test_scan_reference_matches_numpy_and_the_kernel(m: int, n: int) -> None:
    wl = asc.ops.get_workload("test_te_ref_recurrence", (m, n))
    (f,) = wl.random_inputs(m)
    want = f.copy()
    for t in range(2, m):
        want[t] = 2 * want[t - 1] + want[t - 2] + f[t]
    (got,) = wl.reference(f)  # no reference= given: the generic evaluator
    np.testing.assert_array_equal(got, 3 * want)
    F, Y = wl.tensors()
    out = np.zeros_like(f)
    asc.build(asc.create_schedule(Y.op), [F, Y])(f, out)
    np.testing.assert_array_equal(out, got)


def test_scan_cumsum_chunked_and_extern_still_refused() -> None:
    m, n = 8, 6
    X = asc.placeholder((m, n), name="X")
    state = asc.placeholder((m, n), name="s_state")
    init = asc.compute((1, n), lambda _, i: X[0, i], name="s_init")
    update = asc.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="s_update")
    res = asc.scan(init, update, state, inputs=[X])
    x = np.random.default_rng(0).random((m, n)).astype(np.float32)
    np.testing.assert_allclose(evaluate(res, {"X": x}, budget=4)["scan"], np.cumsum(x, axis=0), rtol=1e-6)
    C = asc.compute((m, n), lambda i, j: asc.call_pure_extern("float32", "my_f", X[i, j]), name="C")
    with pytest.raises(NotImplementedError, match="C called by extern/call_extern"):
        evaluate(C, {"X": x})
