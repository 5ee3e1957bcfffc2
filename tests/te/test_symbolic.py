"""Symbolic shapes (``asc.var`` / ``asc.size_var``): one kernel for every size.

Kernels are built once per module and called on many sizes (1, primes, sizes below the split
factors), each result checked against numpy; mismatched arrays raise before C runs; the emitted C
compiles with ``-Wall -Werror`` (strict C99 too); schedules found for a fixed size (sampled from
the generated space, as tuning finds them) replay on the symbolic workload; export builds.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from export_cases import FAST, assert_checked_and_timed, make, record_of
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import autosched as asc
from autosched.export.kernel import export_kernel
from autosched.expr import bind, static_shape
from autosched.lower.ir import For, IfThenElse, Seq, Stmt, stmt_children
from autosched.lower.passes import guards
from autosched.runner.compile import compile_object
from autosched.runner.kernel import Kernel
from autosched.space.generated import SketchSpace
from autosched.target import Target
from autosched.task import Task

TARGET = "c -num-threads=2"
SIZES = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
RNG = np.random.default_rng(0)


def rand(*shape: int) -> np.ndarray:
    return RNG.uniform(-1.0, 1.0, shape).astype(np.float32)


def matmul_of_sizes() -> tuple[asc.Tensor, asc.Tensor, asc.Tensor]:
    """A, B and C = A @ B over the size variables M, N, K."""
    M, N, K = asc.size_var("M"), asc.size_var("N"), asc.size_var("K")
    A = asc.placeholder((M, K), name="A")
    B = asc.placeholder((K, N), name="B")
    k = asc.reduce_axis(K, name="k")
    return A, B, asc.compute((M, N), lambda i, j: asc.sum(A[i, k] * B[k, j], axis=k), name="C")


def symbolic_matmul() -> tuple[asc.Schedule, list[asc.Tensor]]:
    """Matmul over M, N, K with a hand-written schedule: split 32/8, vectorized inner, parallel outer."""
    A, B, C = matmul_of_sizes()
    s = asc.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, ii = s[C].split(i, 32)
    jo, ji = s[C].split(j, 8)
    ko, ki = s[C].split(k, 8)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    s[C].parallel(io)
    return s, [A, B, C]


def readme_matmul(M: object, N: object, K: object) -> tuple[asc.Schedule, list[asc.Tensor]]:
    """The README's hand-written schedule (register tile, compute_at, unrolled reduction)."""
    A = asc.placeholder((M, K), name="A")  # type: ignore[arg-type]
    B = asc.placeholder((K, N), name="B")  # type: ignore[arg-type]
    k = asc.reduce_axis(K, name="k")  # type: ignore[arg-type]
    C = asc.compute((M, N), lambda i, j: asc.sum(A[i, k] * B[k, j], axis=k), name="C")  # type: ignore[arg-type]
    s = asc.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 6, 64)
    s[CC].compute_at(s[C], io)
    ci, cj = s[CC].op.axis
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], 4)
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].unroll(ki)
    s[CC].unroll(ci)
    s[CC].vectorize(cj)
    s[C].vectorize(ji)
    s[C].parallel(io)
    return s, [A, B, C]


@pytest.fixture(scope="module")
def matmul_kernel() -> Kernel:
    s, args = symbolic_matmul()
    return asc.build(s, args, target=TARGET)


def check_matmul(f: Kernel, m: int, n: int, k: int) -> None:
    a, b = rand(m, k), rand(k, n)
    c = np.full((m, n), np.nan, np.float32)
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4 * k)


@pytest.mark.requires("gcc")
@SIZES
@given(st.integers(1, 97), st.integers(1, 97), st.integers(1, 97))
@example(1, 1, 1)
@example(31, 7, 5)  # primes below the split factors
@example(97, 89, 83)
@example(64, 64, 64)  # dividing sizes: no tail at all
def test_matmul_any_size(matmul_kernel: Kernel, m: int, n: int, k: int) -> None:
    check_matmul(matmul_kernel, m, n, k)


def guards_in(s: Stmt) -> int:
    return int(isinstance(s, IfThenElse)) + sum(guards_in(x) for x in stmt_children(s))


def vector_loops(s: Stmt, guarded: bool = False) -> list[tuple[For, bool]]:
    """Vectorized loops of ``s``, each with whether a guard encloses or is inside it (the test of
    a parallel loop for its guard-free main part, an ``if`` with an ``else``, is no guard)."""
    if isinstance(s, For) and s.kind == "vectorized":
        return [(s, guarded or guards_in(s.body) > 0)]
    inner = guarded or (isinstance(s, IfThenElse) and s.otherwise is None)
    return [v for x in stmt_children(s) for v in vector_loops(x, inner)]


def test_split_of_symbolic_extent_is_partitioned_and_main_part_vectorizes() -> None:
    s, args = symbolic_matmul()
    func = asc.lower(s, args)
    text = str(func)
    assert "A: float32[M, K], B: float32[K, N], C: float32[M, N], M: int32, K: int32, N: int32" in text
    assert "(N // 8)" in text and "((N + 7) // 8)" in text  # main part of j.outer, then its tail
    loops = vector_loops(func.body)
    assert any(not guarded and loop.extent == 8 for loop, guarded in loops)  # a guard-free main body
    # and tails: the vector loop cut to the columns left (N's last partial vector), or guarded
    assert any(guarded or not isinstance(loop.extent, int) for loop, guarded in loops)
    src = asc.emit(s, args, target=TARGET)
    sig = ("int default_function(const float* restrict A, const float* restrict B, float* restrict C, "
           "int M, int K, int N)")
    assert sig in src
    assert "asc_float32x8" in src or "asc_float32x4" in src  # vector statements in the main part


@pytest.mark.requires("gcc")
def test_a_vector_loop_cut_inside_an_unrolled_loop_names_the_unrolled_values() -> None:
    """A vector loop cut to the columns left (its extent names the loop around it) inside a loop
    that is unrolled: each copy's extent gets that loop's value (a sampled program once emitted
    the unrolled loop's variable, undeclared)."""
    A, B, C = matmul_of_sizes()
    s = asc.create_schedule(C.op)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, ii = s[C].split(i, 8)
    jo, ji = s[C].split(j, 12)
    jio, jii = s[C].split(ji, 3)
    s[C].reorder(io, jo, k, ii, jio, jii)
    s[C].unroll(jio)
    s[C].vectorize(jii)
    s[C].parallel(io)
    f = asc.build(s, [A, B, C], target=TARGET)
    for m, n, kk in [(8, 12, 4), (9, 13, 5), (3, 7, 2), (17, 25, 3)]:
        check_matmul(f, m, n, kk)


@pytest.mark.requires("gcc")
def test_readme_schedule_with_symbolic_sizes() -> None:
    s, args = readme_matmul(asc.size_var("M"), asc.size_var("N"), asc.size_var("K"))
    f = asc.build(s, args, target=TARGET)
    for m, n, k in [(1, 1, 1), (5, 63, 3), (13, 130, 9), (6, 64, 4), (37, 71, 41)]:
        check_matmul(f, m, n, k)


@pytest.mark.requires("gcc")
def test_elementwise_and_expression_shapes() -> None:
    n, m = asc.size_var("n"), asc.var("m")
    A = asc.placeholder((n, m), name="A")
    B = asc.placeholder((n, m), name="B")
    C = asc.compute((n, m), lambda i, j: A[i, j] + B[i, j] * 2.0, name="C")
    s = asc.create_schedule(C.op)
    fused = s[C].fuse(*s[C].op.axis)
    outer, inner = s[C].split(fused, 16)
    s[C].vectorize(inner)
    s[C].parallel(outer)
    f = asc.build(s, [A, B, C], target=TARGET)
    for shape in [(1, 1), (3, 5), (17, 31), (4, 16)]:
        a, b = rand(*shape), rand(*shape)
        c = np.empty(shape, np.float32)
        f(a, b, c)
        np.testing.assert_allclose(c, a + b * 2, rtol=1e-6)

    X = asc.placeholder((n,), name="X")  # a shape that is an expression of a variable
    Y = asc.compute((n - 2,), lambda i: X[i] + X[i + 1] + X[i + 2], name="Y")
    s = asc.create_schedule(Y.op)
    yo, yi = s[Y].split(Y.op.axis[0], 8)
    s[Y].vectorize(yi)
    g = asc.build(s, [X, Y], target=TARGET)
    for size in (3, 4, 11, 64):
        x = rand(size)
        y = np.empty(size - 2, np.float32)
        g(x, y)
        np.testing.assert_allclose(y, x[:-2] + x[1:-1] + x[2:], rtol=1e-5)
    with pytest.raises(ValueError, match=r"expected shape \(8,\), got \(9,\)"):
        g(rand(10), np.empty(9, np.float32))


@pytest.mark.requires("gcc")
def test_reductions_over_symbolic_axes() -> None:
    n, m = asc.size_var("n"), asc.size_var("m")
    A = asc.placeholder((n, m), name="A")
    k = asc.reduce_axis(m, name="k")
    S = asc.compute((n,), lambda i: asc.sum(A[i, k], axis=k), name="S")
    r = asc.reduce_axis(m, name="r")
    X = asc.compute((n,), lambda i: asc.max(A[i, r], axis=r), name="X")
    s = asc.create_schedule([S.op, X.op])
    ko, ki = s[S].split(k, 4)
    s[S].unroll(ki)
    io, ii = s[X].split(X.op.axis[0], 8)
    s[X].parallel(io)
    f = asc.build(s, [A, S, X], target=TARGET)
    for shape in [(1, 1), (2, 3), (9, 13), (16, 8)]:
        a = rand(*shape)
        sums, maxes = np.empty(shape[0], np.float32), np.empty(shape[0], np.float32)
        f(a, sums, maxes)
        np.testing.assert_allclose(sums, a.sum(axis=1), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(maxes, a.max(axis=1))


@pytest.mark.requires("gcc")
def test_mismatched_sizes_raise_before_c_runs(matmul_kernel: Kernel) -> None:
    a, b = rand(4, 5), rand(6, 3)
    c = np.full((4, 3), 7.0, np.float32)
    with pytest.raises(ValueError, match="variable 'K' is 5 in argument 0 'A' .* but 6 in argument 1 'B'"):
        matmul_kernel(a, b, c)
    assert (c == 7.0).all()  # nothing ran
    with pytest.raises(ValueError, match=r"'N' is 3 in argument 1 'B' \(dimension 1\) but 2 in argument 2"):
        matmul_kernel(a, rand(5, 3), np.empty((4, 2), np.float32))
    with pytest.raises(ValueError, match=r"expected shape \(M, K\), got \(20,\)"):
        matmul_kernel(a.reshape(-1), rand(5, 3), c)
    with pytest.raises(ValueError, match="shape variable 'M'"):
        matmul_kernel.time(a, rand(5, 3), np.empty((3, 3), np.float32))


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("portable", [False, True])
def test_emitted_c_compiles_with_werror(portable: bool, tmp_path: Path) -> None:
    flags = ["-std=c99", "-pedantic"] * portable + ["-Wall", "-Wextra", "-Werror"]
    sizes = asc.size_var("M"), asc.size_var("N"), asc.size_var("K")
    for s, args in [symbolic_matmul(), readme_matmul(*sizes)]:
        src = asc.emit(s, args, target=TARGET, portable=portable)
        compile_object(src, Target.parse(TARGET), tmp_path / "kernel.o", extra_flags=flags)


def test_bad_symbolic_definitions() -> None:
    n = asc.size_var("n")
    A = asc.placeholder((n,), name="A")
    with pytest.raises(ValueError, match="also shape variables"):
        asc.compute((n,), lambda n: A[n], name="B")
    with pytest.raises(ValueError, match="positive ints or integer expressions"):
        asc.placeholder((asc.var("x", "int32") * 1.5,), name="F")  # type: ignore[operator]
    with pytest.raises(TypeError, match="integer dtype"):
        asc.size_var("f", "float32")
    with pytest.raises(ValueError, match="a float var is a scalar argument, not a size"):
        asc.placeholder((asc.var("f", "float32"),), name="F")
    hidden = asc.placeholder((n + 1,), name="H")  # n is in no dimension by itself
    D = asc.compute((n + 1,), lambda i: hidden[i] * 2.0, name="D")
    with pytest.raises(ValueError, match=r"\['n'\] are no dimension of any argument by themselves"):
        asc.build(asc.create_schedule(D.op), [hidden, D], target=TARGET)


@asc.workload("test_symbolic_mm")
def symbolic_mm(M: int, N: int, K: int) -> list[asc.Tensor]:
    A = asc.placeholder((M, K), name="A")
    B = asc.placeholder((K, N), name="B")
    k = asc.reduce_axis(K, name="k")
    return [A, B, asc.compute((M, N), lambda i, j: asc.sum(A[i, k] * B[k, j], axis=k), name="C")]


@pytest.mark.requires("gcc")
def test_schedules_tuned_at_one_size_serve_every_size() -> None:
    """Programs of the generated space of a fixed-size task (what tuning measures) replay on the
    workload with symbolic sizes and are correct at other sizes."""
    task = Task("test_symbolic_mm", (48, 40, 24), target=TARGET)
    space = SketchSpace(task.workload, task.target)
    tensors, sizes = task.workload.symbolic_tensors()
    assert sizes == {"M": 48, "N": 40, "K": 24}
    rng = random.Random(3)
    for _ in range(4):
        steps = space.steps(space.sample(rng))
        s = asc.Schedule.replay(tensors[2:], steps)
        f = asc.build(s, tensors, target=TARGET)
        for m, n, k in [(48, 40, 24), (1, 1, 1), (13, 29, 7)]:
            check_matmul(f, m, n, k)


@pytest.mark.requires("gcc")
def test_tune_at_one_size_then_the_best_schedule_serves_every_size(tmp_path: Path) -> None:
    """``asc.tune`` end to end on a task that names its size; its best steps replay on the
    symbolic workload and the one kernel is correct at other sizes (1 and primes too)."""
    task = Task("test_symbolic_mm", (40, 24, 16), target=TARGET)
    option = asc.MeasureOption(repeat=2, min_repeat_ms=1.0, run_timeout=10.0)
    result = asc.tune(task, trials=3, log=tmp_path / "mm.jsonl", tuner="random", seed=2,
                      option=option, remeasure=0)  # fmt: skip
    assert result.valid_trials >= 1 and result.best_steps, result.errors
    tensors, _ = task.workload.symbolic_tensors()
    f = asc.build(asc.Schedule.replay(tensors[2:], list(result.best_steps)), tensors, target=TARGET)
    for m, n, k in [(40, 24, 16), (1, 1, 1), (13, 29, 7), (97, 5, 3)]:
        check_matmul(f, m, n, k)


@pytest.mark.requires("gcc", "make")
def test_symbolic_export_builds_and_runs(tmp_path: Path) -> None:
    task = Task("test_symbolic_mm", (33, 40, 17), target="c -num-threads=1")
    steps = SketchSpace(task.workload, task.target).steps(
        SketchSpace(task.workload, task.target).sample(random.Random(0))
    )
    out = export_kernel(record_of(task, steps), tmp_path / "k", symbolic=True)
    header = (out / "kernel.h").read_text()
    assert "test_symbolic_mm_kernel(const float* A, const float* B, float* C, int M, int K, int N);" in header
    assert "then the sizes as int: M, K, N" in header
    assert "test_symbolic_mm_kernel(a0, a1, a2, 33, 17, 40)" in (out / "main.c").read_text()
    built = make(out)
    assert built.returncode == 0, built.stderr
    assert_checked_and_timed(make(out, "run", FAST), task.flops())


def test_bind_makes_a_fixed_size_dag() -> None:
    n, m = asc.size_var("n"), asc.size_var("m")
    X = asc.placeholder((n, m), name="X")
    k = asc.reduce_axis(m, name="k")
    Y = asc.compute((n - 2,), lambda i: asc.sum(X[i, k] + X[i + 2, k], axis=k), name="Y")
    (fixed,) = bind([Y], {"n": 10, "m": 3})
    assert fixed.shape == (8,) and fixed.op.reduce_axis[0].extent == 3
    assert fixed.op.input_tensors[0].shape == (10, 3)
    with pytest.raises(ValueError, match="name no shape variable"):
        bind([Y], {"q": 4})
    with pytest.raises(ValueError, match="symbolic here"):
        static_shape(Y.shape)


def test_parallel_row_loop_runs_its_main_part_without_guards() -> None:
    """The README schedule's parallel row loop over a symbolic extent stays one parallel loop whose
    body tests once whether the row block is whole: that branch has no row guard (those of the
    k and j tails remain, inside their own tail loops)."""
    s, args = readme_matmul(asc.size_var("M"), asc.size_var("N"), asc.size_var("K"))
    body = asc.lower(s, args).body
    loop = body.stmts[0] if isinstance(body, Seq) else body
    assert isinstance(loop, For) and loop.kind == "parallel"
    assert isinstance(loop.body, IfThenElse) and str(loop.body.cond) == "(C.i.outer < (M // 6))"
    row_guards = [g for g in guards(loop.body.then) if "M" in str(g)]
    assert row_guards == [] and loop.body.otherwise is not None
    assert any("M" in str(g) for g in guards(loop.body.otherwise))  # the partial row block keeps them
