"""Extern stages (``asc.extern``), C calls in expressions (``call_extern``, ``call_pure_extern``,
``call_intrin``, ``call_packed``), ``decl_buffer`` and ``ir_builder``: built with the real
compiler (and OpenBLAS) and checked against numpy, on dividing and non-dividing shapes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.runner.compile import compile_object
from autosched.target import Target

TARGET = "c -num-threads=1"

#: the tutorial's extern function: b = a + 1 over n elements (static: see CCode)
ADD_ONE = """\
static void add_one(const float* a, float* b, int n) {
  for (int i = 0; i < n; ++i) b[i] = a[i] + 1.0f;
}"""

LEAKY = "static inline float my_act(float x) { return x > 0.0f ? x : 0.125f * x; }"


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def add_one_stage(src: asc.Tensor, name: str = "B") -> asc.Tensor:
    """``src + 1`` computed by the user's C function ``add_one``."""
    return asc.extern(
        src.shape,
        [src],
        lambda ins, outs: asc.call_extern("void", "add_one", ins[0].data, outs[0].data, ins[0].shape[0]),
        name=name,
        c_source=ADD_ONE,
    )


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("n", [64, 37])
def test_extern_stage_feeds_a_scheduled_compute(n: int) -> None:
    A = asc.placeholder((n,), name="A")
    B = add_one_stage(A)
    C = asc.compute((n,), lambda i: B[i] * 2.0, name="C")
    s = asc.create_schedule(C.op)
    _, inner = s[C].split(C.op.axis[0], factor=8)
    s[C].vectorize(inner)
    assert f"add_one(&A[0], &B[0], {n})" in str(asc.lower(s, [A, C]))
    f = asc.build(s, [A, C], target=TARGET)
    a, c = rand(n), np.zeros(n, np.float32)
    f(a, c)
    np.testing.assert_allclose(c, (a + 1) * 2, rtol=1e-6)


@pytest.mark.requires("gcc")
def test_extern_stage_reads_a_compute_and_several_outputs() -> None:
    n, m = 13, 6
    A = asc.placeholder((n, m), name="A")
    D = asc.compute((n, m), lambda i, j: A[i, j] * 3.0, name="D")
    src = """\
static void split_sum(const float* d, float* rows, float* total, int n, int m) {
  *total = 0.0f;
  for (int i = 0; i < n; ++i) {
    rows[i] = 0.0f;
    for (int j = 0; j < m; ++j) rows[i] += d[i * m + j];
    *total += rows[i];
  }
}"""
    rows, total = asc.extern(
        [(n,), (1,)],
        [D],
        lambda ins, outs: asc.call_extern(
            "void", "split_sum", ins[0], outs[0], outs[1], ins[0].shape[0], ins[0].shape[1]
        ),
        name="S",
        c_source=src,
    )
    E = asc.compute((n,), lambda i: rows[i] - total[0], name="E")
    s = asc.create_schedule(E.op)
    f = asc.build(s, [A, E], target=TARGET)
    a, e = rand(n, m), np.zeros(n, np.float32)
    f(a, e)
    r = (3 * a).sum(axis=1)
    np.testing.assert_allclose(e, r - r.sum(), rtol=1e-4, atol=1e-4)


@pytest.mark.requires("gcc", "openblas")
@pytest.mark.parametrize(("m", "n", "k"), [(64, 32, 48), (33, 17, 29)])
@pytest.mark.parametrize(("ta", "tb"), [(False, False), (True, True)])
def test_call_packed_cblas_matmul(m: int, n: int, k: int, ta: bool, tb: bool) -> None:
    A = asc.placeholder((k, m) if ta else (m, k), name="A")
    B = asc.placeholder((n, k) if tb else (k, n), name="B")
    C = asc.extern(
        (m, n),
        [A, B],
        lambda ins, outs: asc.call_packed("tvm.contrib.cblas.matmul", ins[0], ins[1], outs[0], ta, tb),
        name="C",
    )
    D = asc.compute((m, n), lambda i, j: asc.max(C[i, j], 0.0), name="D")
    s = asc.create_schedule(D.op)
    _, ji = s[D].split(D.op.axis[1], factor=8)
    s[D].vectorize(ji)
    s[D].parallel(D.op.axis[0])
    f = asc.build(s, [A, B, D], target="c -num-threads=2")
    a, b = rand(*A.shape, seed=1), rand(*B.shape, seed=2)
    d = np.zeros((m, n), np.float32)
    f(a, b, d)
    want = (a.T if ta else a) @ (b.T if tb else b)
    np.testing.assert_allclose(d, np.maximum(want, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.requires("gcc", "openblas")
def test_call_extern_sgemm_with_a_symbolic_size() -> None:
    """cblas_sgemm named directly (header and library given), over a symbolic M."""
    M, N, K = asc.size_var("M"), 24, 16
    A = asc.placeholder((M, K), name="A")
    B = asc.placeholder((K, N), name="B")
    C = asc.extern(
        (M, N),
        [A, B],
        lambda ins, outs: asc.call_extern(
            "void", "cblas_sgemm", 101, 111, 111, ins[0].shape[0], N, K, 1.0,
            ins[0].data, K, ins[1].data, N, 0.0, outs[0].data, N,
        ),
        name="C",
        headers=["cblas.h"],
        libs=["openblas"],
    )  # fmt: skip
    s = asc.create_schedule(C.op)
    f = asc.build(s, [A, B, C], target=TARGET)
    b = rand(K, N, seed=3)
    for m in (1, 7, 40):
        a, c = rand(m, K, seed=m), np.zeros((m, N), np.float32)
        f(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("n", [32, 30])
def test_call_extern_per_element_and_call_intrin(n: int) -> None:
    P = asc.placeholder((n,), name="P")
    Q = asc.compute(
        (n,),
        lambda i: asc.call_pure_extern("float32", "my_act", P[i] * 2.0, c_source=LEAKY)
        + asc.call_intrin("float32", "tir.exp", P[i]),
        name="Q",
    )
    s = asc.create_schedule(Q.op)
    _, inner = s[Q].split(Q.op.axis[0], factor=8)
    s[Q].vectorize(inner)
    f = asc.build(s, [P, Q], target=TARGET)
    p, q = rand(n), np.zeros(n, np.float32)
    f(p, q)
    x = 2 * p
    np.testing.assert_allclose(q, np.where(x > 0, x, 0.125 * x) + np.exp(p), rtol=1e-5)


def prefix_pairs(n: asc.Extent) -> tuple[asc.Tensor, asc.Tensor]:
    """``Y[i] = X[i] + X[i - 1]`` (``Y[0] = X[0]``) written with ir_builder over ``decl_buffer``s."""
    X = asc.placeholder((n,), name="X")
    xb = asc.decl_buffer((n,), "float32", name="xb")
    yb = asc.decl_buffer((n,), "float32", name="yb")

    def body(ins: list, outs: list) -> object:
        ib = asc.ir_builder.create()
        x, y = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, ins[0].shape[0], name="i") as i:
            with ib.if_scope(i > 0):
                y[i] = x[i] + x[i - 1]
            with ib.else_scope():
                y[i] = x[i]
        return ib.get()

    Y = asc.extern((n,), [X], body, name="Y", in_buffers=[xb], out_buffers=[yb])
    return X, Y


@pytest.mark.requires("gcc")
def test_ir_builder_loop_fixed_and_symbolic() -> None:
    for n, sizes in ((12, [12]), (asc.size_var("n"), [1, 5, 64])):
        X, Y = prefix_pairs(n)
        s = asc.create_schedule(Y.op)
        f = asc.build(s, [X, Y], target=TARGET)
        for size in sizes:
            x, y = rand(size), np.full(size, np.nan, np.float32)
            f(x, y)
            want = x.copy()
            want[1:] += x[:-1]
            np.testing.assert_allclose(y, want, rtol=1e-6)


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("portable", [False, True])
def test_extern_constructs_compile_with_werror(portable: bool, tmp_path: Path) -> None:
    flags = ["-std=c99", "-pedantic"] * portable + ["-Wall", "-Wextra", "-Werror"]
    n = 40
    A = asc.placeholder((n,), name="A")
    B = add_one_stage(A)
    C = asc.compute((n,), lambda i: asc.call_pure_extern("float32", "my_act", B[i], c_source=LEAKY), name="C")
    X, Y = prefix_pairs(n)
    for s, args in [(asc.create_schedule(C.op), [A, C]), (asc.create_schedule(Y.op), [X, Y])]:
        src = asc.emit(s, args, target=TARGET, portable=portable)
        compile_object(src, Target.parse(TARGET), tmp_path / "kernel.o", extra_flags=flags)


def test_dag_key_and_lowered_code_follow_the_c() -> None:
    A = asc.placeholder((8,), name="A")

    def stage(src: str, libs: list[str]) -> asc.Tensor:
        call = lambda ins, outs: asc.call_extern("void", "f", ins[0].data, outs[0].data)  # noqa: E731
        return asc.extern((8,), [A], call, name="B", c_source=src, libs=libs)

    variants = [("int a;", []), ("int b;", []), ("int a;", ["m"])]
    assert len({asc.expr.dag_key([stage(src, libs)]) for src, libs in variants}) == 3
    B = stage("int a;", ["m"])
    func = asc.lower(asc.create_schedule(B.op), [A, B])
    assert func.code.sources == ("int a;",) and func.code.libs == ("m",) and func.code.symbols == ("f",)
