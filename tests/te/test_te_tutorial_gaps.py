"""Gaps found by porting TVM's te tutorials (benchmarks/bench_te_tutorials.py): rfactor of a split
symbolic reduce axis, scans over symbolic shapes, ``Select`` / ``indexmod`` / ``Expr.equal``,
and one clear error where two operations share a (default) name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from te_strict import compile_strict

import autosched as asc

pytestmark = pytest.mark.requires("gcc")


def _row_sum(split: str) -> tuple[asc.Schedule, list[asc.Tensor]]:
    n, m = asc.var("n"), asc.var("m")
    A = asc.placeholder((n, m), name="A")
    k = asc.reduce_axis((0, m), "k")
    B = asc.compute((n,), lambda i: asc.sum(A[i, k], axis=k), name="B")
    s = asc.create_schedule(B.op)
    if split == "factor":
        _, ki = s[B].split(B.op.reduce_axis[0], factor=16)
        BF = s.rfactor(B, ki)
    else:
        ko, _ = s[B].split(B.op.reduce_axis[0], nparts=4)
        BF = s.rfactor(B, ko)
    s[BF].parallel(BF.op.axis[0])
    return s, [A, B]


@pytest.mark.parametrize("split", ["factor", "nparts"])
def test_rfactor_of_a_split_symbolic_reduce_axis(split: str, tmp_path: Path) -> None:
    s, args = _row_sum(split)
    compile_strict(s, args, tmp_path)
    f = asc.build(s, args, target="c")
    rng = np.random.default_rng(3)
    for n, m in [(1, 1), (7, 37), (5, 16), (3, 3), (2, 101)]:
        a = rng.random((n, m), dtype=np.float32)
        b = np.zeros(n, np.float32)
        f(a, b)
        np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-5)


def test_scan_over_symbolic_shapes_one_build_every_size(tmp_path: Path) -> None:
    m, n = asc.var("m"), asc.var("n")
    X = asc.placeholder((m, n), name="X")
    state = asc.placeholder((m, n), name="state")
    init = asc.compute((1, n), lambda _, i: X[0, i], name="init")
    s1 = asc.compute((m, n), lambda t, i: state[t - 1, i] * 0.5, name="s1")
    update = asc.compute((m, n), lambda t, i: s1[t, i] + X[t, i], name="update")
    res = asc.scan(init, update, state, inputs=[X])
    s = asc.create_schedule(res.op)
    xo, xi = s[update].split(update.op.axis[1], factor=8)
    s[update].vectorize(xi)
    s[s1].compute_at(s[update], xo)
    compile_strict(s, [X, res], tmp_path)  # -Wall -Werror, and strict C99
    f = asc.build(s, [X, res], target="c")
    rng = np.random.default_rng(5)
    for shape in [(1, 1), (1, 9), (13, 1), (10, 7), (17, 33)]:
        x = rng.random(shape, dtype=np.float32)
        want = x.copy()
        for t in range(1, shape[0]):
            want[t] = want[t - 1] * 0.5 + x[t]
        got = np.zeros_like(x)
        f(x, got)
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_select_indexmod_and_expr_equal() -> None:
    n = asc.var("n")
    A = asc.placeholder((n,), name="A", dtype="int32")
    B = asc.compute(
        (n,),
        lambda i: asc.Select(asc.indexmod(i, 3).equal(0), A[i], A[asc.indexdiv(i, 2)] * 2),
        name="B",
    )
    f = asc.build(asc.create_schedule(B.op), [A, B], target="c")
    a = np.arange(11, dtype=np.int32) * 5 + 1
    b = np.zeros_like(a)
    f(a, b)
    i = np.arange(11)
    np.testing.assert_array_equal(b, np.where(i % 3 == 0, a, a[i // 2] * 2))


@pytest.mark.requires("pyopencl")
@pytest.mark.parametrize(("rows", "cols", "threads"), [(40, 100, 16), (7, 33, 8)])
def test_store_predicate_on_the_thread_axis_of_a_cross_thread_reduction(
    rows: int, cols: int, threads: int
) -> None:
    """The reduction tutorial's schedule: rfactor, the factored axis bound to ``threadIdx.x`` and
    ``set_store_predicate(tx.var.equal(0))`` (the thread variable names the loop bound to it)."""
    X = asc.placeholder((rows, cols), name="X")
    r = asc.reduce_axis((0, cols), "r")
    Y = asc.compute((rows,), lambda i: asc.sum(X[i, r] * 2.0, axis=r), name="Y")
    s = asc.create_schedule(Y.op)
    YF = s.rfactor(Y, s[Y].split(Y.op.reduce_axis[0], factor=threads)[1])
    for ax, tag in zip(s[Y].split(s[Y].op.axis[0], factor=8), ("blockIdx.x", "threadIdx.y"), strict=True):
        s[Y].bind(ax, asc.thread_axis(tag))
    tx = asc.thread_axis((0, threads), "threadIdx.x", name="tx")
    s[Y].bind(s[Y].op.reduce_axis[0], tx)
    s[YF].compute_at(s[Y], s[Y].op.reduce_axis[0])
    s[Y].set_store_predicate(tx.var.equal(0))
    x = np.random.default_rng(7).random((rows, cols), dtype=np.float32)
    y = np.zeros(rows, np.float32)
    asc.build(s, [X, Y], target="opencl")(x, y)
    np.testing.assert_allclose(y, 2 * x.sum(axis=1), rtol=1e-5)
    with pytest.raises(asc.ScheduleError, match=r"uses \['threadIdx.z'\]"):
        s[Y].set_store_predicate(asc.thread_axis("threadIdx.z").var.equal(0))


def test_tvm_names_without_a_counterpart_say_what_to_write() -> None:
    with pytest.raises(AttributeError, match="call_pure_extern"):
        asc.register_intrin_lowering  # noqa: B018 - the attribute access is what is tested
    with pytest.raises(AttributeError, match="numpy arrays"):
        asc.cuda(0)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        asc.no_such_name  # noqa: B018
    with pytest.raises(TypeError, match="use one of int32, int64, float32, float64"):
        asc.var("flag", dtype="bool")
    a = asc.placeholder((4,), name="a")
    c = asc.compute((4,), lambda i: a[i] * 2, name="c")
    with pytest.raises(TypeError, match="C body"):
        asc.decl_tensor_intrin(c.op, lambda ins, outs: outs[0].access_ptr("w"), name="twice4")


def test_tvm_target_constructor_and_pragmas_from_tvm() -> None:
    tgt = asc.Target(target="c", host="c")  # TVM's getting-started guide
    assert tgt == asc.Target.parse("c")
    with pytest.raises(asc.TargetError, match="host is a c target"):
        asc.Target(target="c", host="cuda")
    a = asc.placeholder((16,), name="a")
    b = asc.compute((16,), lambda i: a[i] + 1, name="b")
    s = asc.create_schedule(b.op)
    f = asc.build(s, [a, b], tgt, name="myadd")
    x, y = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    f(x, y)
    np.testing.assert_array_equal(y, x + 1)
    with pytest.raises(asc.ScheduleError, match="no LLVM here"):  # the tensorize tutorial's import
        s[b].pragma(b.op.axis[0], "import_llvm", "; LLVM IR")
    with pytest.raises(asc.ScheduleError, match="unknown pragma 'unroll_explicit'"):
        s[b].pragma(b.op.axis[0], "unroll_explicit", 1)
    with pytest.raises(asc.ScheduleError, match="takes an integer"):
        s[b].pragma(b.op.axis[0], "auto_unroll_max_step", "8")
