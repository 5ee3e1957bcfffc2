"""comm_reducer (single and tuple-valued), min_value/max_value and tuple computes, against numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from te_strict import compile_strict

import autosched as asc
from autosched.reference import evaluate

pytestmark = pytest.mark.requires("gcc")


def _argmax() -> asc.expr.Reducer:
    def combine(x, y):  # type: ignore[no-untyped-def]
        keep = x[1] >= y[1]  # ties keep the accumulator: the first index wins, as numpy.argmax
        return asc.if_then_else(keep, x[0], y[0]), asc.if_then_else(keep, x[1], y[1])

    def identity(t0: str, t1: str) -> tuple[asc.expr.Expr, asc.expr.Expr]:
        return asc.const(-1, t0), asc.min_value(t1)

    return asc.comm_reducer(combine, identity, name="argmax")


def _argmin() -> asc.expr.Reducer:
    def combine(x, y):  # type: ignore[no-untyped-def]
        keep = x[1] <= y[1]
        return asc.if_then_else(keep, x[0], y[0]), asc.if_then_else(keep, x[1], y[1])

    return asc.comm_reducer(combine, lambda t0, t1: (asc.const(-1, t0), asc.max_value(t1)), name="argmin")


def _arg_dag(reducer: asc.expr.Reducer, m: int, n: int) -> tuple[asc.Tensor, ...]:
    val = asc.placeholder((m, n), name="val")
    k = asc.reduce_axis((0, n), "k")
    t0, t1 = asc.compute((m,), lambda i: reducer((k, val[i, k]), axis=k), name="T")
    return val, t0, t1


@pytest.mark.parametrize("m,n,factor", [(16, 8, 4), (13, 9, 4), (7, 1, 3)])
def test_argmax_and_argmin_with_ties_pick_the_first_index(m: int, n: int, factor: int) -> None:
    rng = np.random.default_rng(m * n)
    v = rng.integers(0, 3, (m, n)).astype(np.float32)  # many ties
    for reducer, ref_idx, ref_val in ((_argmax(), v.argmax(1), v.max(1)), (_argmin(), v.argmin(1), v.min(1))):
        val, t0, t1 = _arg_dag(reducer, m, n)
        s = asc.create_schedule(t0.op)
        assert s[t0] is s[t1] and t0.op is t1.op and (t0.name, t1.name) == ("T.v0", "T.v1")
        assert (t0.dtype, t1.dtype) == ("int32", "float32")
        _, ko = s[t0].split(t0.op.axis[0], factor=factor)
        s[t1].split(t0.op.reduce_axis[0], factor=factor)  # the same stage through the other output
        o0, o1 = np.zeros(m, np.int32), np.zeros(m, np.float32)
        asc.build(s, [val, t0, t1])(v, o0, o1)
        np.testing.assert_array_equal(o0, ref_idx)
        np.testing.assert_array_equal(o1, ref_val)


def test_single_comm_reducers_int_and_float_with_where() -> None:
    m, n = 11, 13
    b = np.random.default_rng(1).integers(-50, 50, (m, n)).astype(np.int32)
    B = asc.placeholder((m, n), dtype="int32", name="B")
    mysum = asc.comm_reducer(lambda x, y: x + y, lambda t: asc.const(0, t), name="mysum")
    mymin = asc.comm_reducer(lambda x, y: asc.min(x, y), lambda t: asc.max_value(t), name="mymin")
    k = asc.reduce_axis((0, n), "k")
    S = asc.compute((m,), lambda i: mysum(B[i, k] * 2, axis=k), name="S")
    k2 = asc.reduce_axis((0, n), "k2")
    M = asc.compute((m,), lambda i: mymin(B[i, k2], axis=[k2], where=k2 > 2), name="M")
    s = asc.create_schedule([S.op, M.op])
    s[S].split(S.op.axis[0], factor=4)
    so, mo = np.zeros(m, np.int32), np.zeros(m, np.int32)
    asc.build(s, [B, S, M])(b, so, mo)
    np.testing.assert_array_equal(so, (2 * b).sum(1))
    np.testing.assert_array_equal(mo, b[:, 3:].min(1))
    F = asc.placeholder((m, n), name="F")
    prod = asc.comm_reducer(lambda x, y: x * y, lambda t: asc.const(1, t), name="prod")
    k3 = asc.reduce_axis((0, n), "k3")
    P = asc.compute((m,), lambda i: prod(F[i, k3], axis=k3), name="P")
    f = np.random.default_rng(2).uniform(0.5, 1.5, (m, n)).astype(np.float32)
    po = np.zeros(m, np.float32)
    asc.build(asc.create_schedule(P.op), [F, P])(f, po)
    np.testing.assert_allclose(po, f.prod(1), rtol=1e-5)


def test_min_and_max_value() -> None:
    assert asc.min_value("int32").value == -(2**31) and asc.max_value("int32").value == 2**31 - 1
    assert asc.min_value("float32").value == float(np.finfo(np.float32).min)
    assert asc.max_value("float64").value == float(np.finfo(np.float64).max)
    assert asc.min_value("int8").type == "int8"


@pytest.mark.parametrize("n,m", [(8, 8), (10, 7)])
def test_tuple_compute_is_one_stage_in_one_nest(n: int, m: int) -> None:
    A = asc.placeholder((n, m), name="A")
    X, Y = asc.compute((n, m), lambda i, j: (A[i, j] * 2, (A[i, j] + 1).astype("float64")), name="XY")
    Z = asc.compute((n, m), lambda i, j: X[i, j] - Y[i, j].astype("float32"), name="Z")
    s = asc.create_schedule(Z.op)
    assert s[X] is s[Y] and X.op is Y.op and Y.dtype == "float64"
    zo, zi = s[Z].split(Z.op.axis[0], factor=4)
    s[X].compute_at(s[Z], zo)
    jo, ji = s[Z].split(Z.op.axis[1], factor=4)
    s[Z].vectorize(ji)
    text = str(asc.lower(s, [A, Z]))
    assert text.count("for XY.j") == text.count("for XY.i")  # one nest writes both outputs
    a = np.random.default_rng(n).random((n, m)).astype(np.float32)
    z = np.zeros_like(a)
    asc.build(s, [A, Z])(a, z)
    np.testing.assert_allclose(z, a * 2 - (a + 1), rtol=1e-6)
    # both outputs as arguments of a root tuple stage
    s2 = asc.create_schedule([X.op, Z.op])
    x, y = np.zeros_like(a), np.zeros((n, m), np.float64)
    asc.build(s2, [A, X, Y, Z])(a, x, y, z)
    np.testing.assert_allclose(x, a * 2)
    np.testing.assert_allclose(y, a + 1.0)


def test_bad_tuples_and_reducers_are_clear_errors() -> None:
    A = asc.placeholder((4, 5), name="A")
    k = asc.reduce_axis((0, 5), "k")
    with pytest.raises(ValueError, match="tuple of outputs"):
        asc.compute((4,), lambda i: (asc.sum(A[i, k], axis=k), A[i, 0]), name="mixed")
    with pytest.raises(ValueError, match="share one shape"):
        asc.compute(((4,), (5,)), lambda i: (A[i, 0], A[i, 1]), name="two_shapes")
    bad = asc.comm_reducer(lambda x, y: x[0] + y[0], lambda a, b: (asc.const(0, a), asc.const(0, b)))
    with pytest.raises(ValueError, match="combine gave 1 values for a reduction of 2"):
        bad((k, A[0, k]), axis=k)
    _, t0, _ = _arg_dag(_argmax(), 4, 5)
    s = asc.create_schedule(t0.op)
    with pytest.raises(asc.ScheduleError, match="output stage cannot be inlined"):
        s[t0].compute_inline()
    with pytest.raises(asc.ScheduleError, match="'i' is not a reduction axis"):
        s.rfactor(t0, "i")


def test_reducers_build_as_strict_c99(tmp_path: Path) -> None:
    val, t0, t1 = _arg_dag(_argmax(), 9, 7)
    B = asc.placeholder((9, 7), dtype="int32", name="B")
    k = asc.reduce_axis((0, 7), "k2")
    M = asc.compute((9,), lambda i: asc.comm_reducer(asc.max, asc.min_value)(B[i, k], axis=k), name="M")
    s = asc.create_schedule([t0.op, M.op])
    s[t0].split(t0.op.axis[0], factor=4)
    compile_strict(s, [val, B, t0, t1, M], tmp_path)


@pytest.mark.parametrize("n", [16, 19])
def test_tuple_reduction_with_vectorized_and_parallel_data_loops(n: int) -> None:
    m, K = 6, 5
    V = asc.placeholder((m, K, n), name="V")
    k = asc.reduce_axis((0, K), "k")
    t0, t1 = asc.compute((m, n), lambda i, j: _argmax()((k, V[i, k, j]), axis=k), name="T")
    s = asc.create_schedule(t0.op)
    i, j = t0.op.axis
    jo, ji = s[t0].split(j, factor=8)
    s[t0].reorder(i, jo, k, ji)
    s[t0].vectorize(ji)
    s[t0].parallel(i)
    v = np.random.default_rng(n).integers(0, 3, (m, K, n)).astype(np.float32)
    o0, o1 = np.zeros((m, n), np.int32), np.zeros((m, n), np.float32)
    asc.build(s, [V, t0, t1])(v, o0, o1)
    np.testing.assert_array_equal(o0, v.argmax(1))
    np.testing.assert_array_equal(o1, v.max(1))


def test_comm_reducer_applied_to_values_element_by_element() -> None:
    n = 13
    A, B = asc.placeholder((n,), name="A"), asc.placeholder((n,), name="B")
    absmax = asc.comm_reducer(
        lambda x, y: asc.max(asc.abs(x), asc.abs(y)), lambda t: asc.const(0, t), name="am"
    )
    C = asc.compute((n,), lambda i: absmax(A[i], B[i], 0.5), name="C")  # combine(combine(a, b), 0.5)
    s = asc.create_schedule(C.op)
    _, ci = s[C].split(C.op.axis[0], factor=4)
    s[C].vectorize(ci)
    rng = np.random.default_rng(4)
    a, b = (rng.uniform(-1, 1, n).astype(np.float32) for _ in range(2))
    c = np.zeros(n, np.float32)
    asc.build(s, [A, B, C])(a, b, c)
    np.testing.assert_array_equal(c, np.maximum(np.maximum(np.abs(a), np.abs(b)), 0.5))
    np.testing.assert_array_equal(evaluate(C, {"A": a, "B": b})["C"], c)
    with pytest.raises(TypeError, match="one at a time"):
        absmax((A[0], B[0]), A[1])
