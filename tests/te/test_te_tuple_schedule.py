"""Tuple computes and comm_reducers under compute_inline, cache_read, cache_write and rfactor:
every output of the operation moves together (TVM's argmax-with-rfactor case), against numpy."""

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
        keep = x[1] >= y[1]
        return asc.if_then_else(keep, x[0], y[0]), asc.if_then_else(keep, x[1], y[1])

    return asc.comm_reducer(combine, lambda a, b: (asc.const(-1, a), asc.min_value(b)), name="argmax")


def _argmax_dag(m: int, n: int) -> tuple[asc.Tensor, asc.Tensor, asc.Tensor]:
    val = asc.placeholder((m, n), name="val")
    k = asc.reduce_axis((0, n), "k")
    t0, t1 = asc.compute((m,), lambda i: _argmax()((k, val[i, k]), axis=k), name="T")
    return val, t0, t1


def _unique(m: int, n: int, seed: int) -> np.ndarray:
    """Distinct values: with rfactor, partial maxima merge in another order, so ties could pick
    another index of the maximum (as in TVM); without ties the answer is numpy's."""
    return np.random.default_rng(seed).permutation(m * n).reshape(m, n).astype(np.float32)


def _run_argmax(s: asc.Schedule, val: asc.Tensor, t0: asc.Tensor, t1: asc.Tensor, v: np.ndarray) -> None:
    m = v.shape[0]
    o0, o1 = np.zeros(m, np.int32), np.zeros(m, np.float32)
    asc.build(s, [val, t0, t1])(v, o0, o1)
    np.testing.assert_array_equal(o0, v.argmax(1))
    np.testing.assert_array_equal(o1, v.max(1))


@pytest.mark.parametrize("m,n,factor_axis", [(16, 32, 0), (13, 37, 1)])
def test_argmax_rfactor_as_in_tvm(m: int, n: int, factor_axis: int) -> None:
    val, t0, t1 = _argmax_dag(m, n)
    s = asc.create_schedule(t0.op)
    ko, ki = s[t0].split(t0.op.reduce_axis[0], factor=8)
    rf = s.rfactor(t0, ki, factor_axis=factor_axis)
    assert [t.name for t in rf] == ["T.rf.v0", "T.rf.v1"] and s[rf[0]] is s[rf[1]]
    assert rf[0].shape == ((8, m) if factor_axis == 0 else (m, 8)) and rf[0].dtype == "int32"
    io, ii = s[t0].split(t0.op.axis[0], factor=4)
    s[t0].parallel(io)
    s[rf[0]].compute_at(s[t0], io)
    _run_argmax(s, val, t0, t1, _unique(m, n, n))
    steps = list(s.steps)
    val2, u0, u1 = _argmax_dag(m, n)  # the recorded steps replay on a fresh DAG
    _run_argmax(asc.Schedule.replay([u0, u1], steps), val2, u0, u1, _unique(m, n, 1))


def test_rfactor_of_a_whole_axis_with_where_and_of_a_single_comm_reducer() -> None:
    m, k1, k2 = 7, 6, 5
    V = asc.placeholder((m, k1, k2), name="V")
    a, b = asc.reduce_axis((0, k1), "a"), asc.reduce_axis((0, k2), "b")
    t0, t1 = asc.compute(
        (m,), lambda i: _argmax()((a * k2 + b, V[i, a, b]), axis=[a, b], where=b > 0), name="T"
    )
    s = asc.create_schedule(t0.op)
    s.rfactor(t0, "b")  # the where clause moves to the partial stage, with the identity elsewhere
    v = _unique(m, k1 * k2, 3).reshape(m, k1, k2)
    o0, o1 = np.zeros(m, np.int32), np.zeros(m, np.float32)
    asc.build(s, [V, t0, t1])(v, o0, o1)
    ref = evaluate([t0, t1], {"V": v})
    np.testing.assert_array_equal(o0, ref["T.v0"])
    np.testing.assert_array_equal(o1, ref["T.v1"])
    B = asc.placeholder((m, 19), dtype="int32", name="B")
    k = asc.reduce_axis((0, 19), "k")
    mysum = asc.comm_reducer(lambda x, y: x + y, lambda t: asc.const(0, t), name="mysum")
    S = asc.compute((m,), lambda i: mysum(B[i, k], axis=k), name="S")
    s2 = asc.create_schedule(S.op)
    _, ki = s2[S].split(k, factor=4)
    srf = s2.rfactor(S, ki)
    assert srf.name == "S.rf"
    bv = np.random.default_rng(0).integers(-9, 9, (m, 19)).astype(np.int32)
    out = np.zeros(m, np.int32)
    asc.build(s2, [B, S])(bv, out)
    np.testing.assert_array_equal(out, bv.sum(1))


@pytest.mark.parametrize("as_list", [True, False])
def test_cache_write_of_a_tuple_reduction_moves_both_outputs(as_list: bool) -> None:
    m, n = 10, 9
    val, t0, t1 = _argmax_dag(m, n)
    s = asc.create_schedule(t0.op)
    cache = s.cache_write([t0, t1] if as_list else t1, "local")
    if as_list:
        assert [c.name for c in cache] == ["T.local.v0", "T.local.v1"]
    else:
        assert cache.name == "T.local.v1"
    io, _ = s[t0].split(t0.op.axis[0], factor=4)
    s[cache[0] if as_list else cache].compute_at(s[t0], io)
    v = np.random.default_rng(m).integers(0, 3, (m, n)).astype(np.float32)  # ties: first index
    _run_argmax(s, val, t0, t1, v)


def test_compute_inline_and_cache_read_of_a_tuple_compute() -> None:
    m, n = 11, 10
    A = asc.placeholder((m, n), name="A")
    X, Y = asc.compute((m, n), lambda i, j: (A[i, j] * 2, (A[i, j] + 1).astype("float64")), name="XY")
    Z = asc.compute((m, n), lambda i, j: X[i, j] - Y[i, j].astype("float32") * 3, name="Z")
    a = np.random.default_rng(2).random((m, n)).astype(np.float32)
    want = a * 2 - (a + 1) * 3
    s = asc.create_schedule(Z.op)
    s[X].compute_inline()  # both outputs: the tuple stage is gone
    assert "XY" not in str(asc.lower(s, [A, Z]))
    z = np.zeros_like(a)
    asc.build(s, [A, Z])(a, z)
    np.testing.assert_allclose(z, want, rtol=1e-6)
    s = asc.create_schedule(Z.op)
    cy = s.cache_read(Y, "local", [Z])
    assert cy.name == "XY.local.v1" and cy.dtype == "float64" and s[cy].op.num_outputs == 2
    zo, zi = s[Z].split(Z.op.axis[0], factor=4)
    s[cy].compute_at(s[Z], zo)
    s[Z].vectorize(Z.op.axis[1])
    z = np.zeros_like(a)
    asc.build(s, [A, Z])(a, z)
    np.testing.assert_allclose(z, want, rtol=1e-6)


def test_tuple_reduction_cannot_be_inlined_and_builds_strict(tmp_path: Path) -> None:
    val, t0, t1 = _argmax_dag(9, 7)
    R = asc.compute((9,), lambda i: t1[i] + t0[i].astype("float32"), name="R")
    s = asc.create_schedule(R.op)
    with pytest.raises(asc.ScheduleError, match="reduction cannot be inlined"):
        s[t0].compute_inline()
    _, ki = s[t0].split(t0.op.reduce_axis[0], factor=4)
    rf = s.rfactor(t1, ki)
    s.cache_write(rf, "local")
    compile_strict(s, [val, R], tmp_path)
