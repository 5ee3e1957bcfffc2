"""The user-facing pipeline: ``asc.lower`` / ``asc.emit`` / ``asc.build`` and the built kernel.

Bad input raises a clear error before any C code runs and leaves the arrays alone; bad targets,
missing compilers and bad argument lists say what is wrong; builds are cached; clang and a cross
compiler work; the IR printer shows the loops; kernels with heap temporaries run repeatedly.
"""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
import autosched.runner.compile as compile_mod
from autosched.lower.ir import For, IfThenElse, PrimFunc, Seq, Stmt
from autosched.runner import (
    CompilerNotFound,
    Kernel,
    LoadError,
    compile_object,
    compile_shared,
    default_cache_dir,
    elf_machine,
)
from autosched.target import Target, TargetError

ROOT = Path(__file__).resolve().parent.parent
CROSS = "c -cc=aarch64-linux-gnu-gcc -mcpu=cortex-a72"

# Kernels built here live for the whole session (see test_dropping_a_parallel_kernel_... below:
# dropping a kernel that ran OpenMP code unloads libgomp under its threads).
KEEP_ALIVE: list[Kernel] = []


def build(*args: object, **kw: object) -> Kernel:
    f = asc.build(*args, **kw)  # type: ignore[arg-type]
    KEEP_ALIVE.append(f)
    return f


def _add(n: int = 6) -> tuple[asc.Schedule, list[asc.Tensor]]:
    A = asc.placeholder((n, n), name="A")
    B = asc.placeholder((n, n), name="B")
    C = asc.compute((n, n), lambda i, j: A[i, j] + 2.0 * B[i, j], name="C")
    s = asc.create_schedule(C)
    s[C].vectorize(C.op.axis[1])
    return s, [A, B, C]


def _matmul(M: int, N: int, K: int) -> tuple[asc.Tensor, asc.Tensor, asc.Tensor]:
    A = asc.placeholder((M, K), name="A")
    B = asc.placeholder((K, N), name="B")
    k = asc.reduce_axis(K, name="k")
    C = asc.compute((M, N), lambda i, j: asc.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def _tiled_matmul(M: int, N: int, K: int) -> tuple[asc.Schedule, list[asc.Tensor]]:
    A, B, C = _matmul(M, N, K)
    s = asc.create_schedule(C)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 8, 16)
    ko, ki = s[C].split(k, 4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    s[C].parallel(io)
    return s, [A, B, C]


def _inputs(*shapes: tuple[int, ...], seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]


@pytest.fixture(scope="module")
def add_kernel() -> Kernel:
    s, args = _add()
    return build(s, args)


# --------------------------------------------------------------------------------------------
# Bad arrays raise before C runs, and nothing is written


def _fresh() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a, b = _inputs((6, 6), (6, 6))
    return a, b, np.full((6, 6), 7.0, np.float32)


def _readonly(x: np.ndarray) -> np.ndarray:
    x.setflags(write=False)
    return x


BAD_CALLS: dict[str, tuple[Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[object, ...]],
                           type[Exception], str]] = {
    "too_few": (lambda a, b, c: (a, c), TypeError, "takes 3 arrays"),
    "too_many": (lambda a, b, c: (a, b, c, c.copy()), TypeError, "takes 3 arrays"),
    "dtype": (lambda a, b, c: (a.astype(np.float64), b, c), TypeError, "float32"),
    "output_dtype": (lambda a, b, c: (a, b, np.zeros((6, 6), np.int32)), TypeError, "float32"),
    "shape": (lambda a, b, c: (a[:5], b, c), ValueError, "shape"),
    "flat": (lambda a, b, c: (a.reshape(-1), b, c), ValueError, "shape"),
    "transposed_input": (lambda a, b, c: (a.T, b, c), ValueError, "contiguous"),
    "strided_input": (lambda a, b, c: (np.zeros((6, 12), np.float32)[:, ::2], b, c), ValueError,
                      "contiguous"),
    "fortran_output": (lambda a, b, c: (a, b, np.asfortranarray(c)), ValueError, "contiguous"),
    "readonly_output": (lambda a, b, c: (a, b, _readonly(np.zeros((6, 6), np.float32))), ValueError,
                        "read-only"),
    "output_is_input": (lambda a, b, c: (a, b, a), ValueError, "shares memory"),
    "list": (lambda a, b, c: (a.tolist(), b, c), TypeError, "ndarray"),
    "scalar": (lambda a, b, c: (a, 1.0, c), TypeError, "ndarray"),
}


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_bad_arrays_raise_before_c_runs(add_kernel: Kernel, case: str) -> None:
    make, exc, words = BAD_CALLS[case]
    a, b, c = _fresh()
    a0, b0 = a.copy(), b.copy()
    call_args = make(a, b, c)
    with pytest.raises(exc, match=re.escape(words)) as info:
        add_kernel(*call_args)  # type: ignore[arg-type]
    assert "default_function" in str(info.value)
    with pytest.raises(exc, match=re.escape(words)):
        add_kernel.time(*call_args, number=1, repeat=1)  # type: ignore[arg-type]
    np.testing.assert_array_equal(c, 7.0)  # the output untouched
    np.testing.assert_array_equal(a, a0)  # and the inputs too (the aliasing case writes to a)
    np.testing.assert_array_equal(b, b0)


@pytest.mark.requires("gcc")
def test_errors_name_the_argument(add_kernel: Kernel) -> None:
    a, b, c = _fresh()
    with pytest.raises(TypeError, match="'B'"):
        add_kernel(a, b.astype(np.float64), c)
    with pytest.raises(ValueError, match="'C'"):
        add_kernel(a, b, c[:, :3])


@pytest.mark.requires("gcc")
def test_output_overlapping_an_input_view_is_refused(add_kernel: Kernel) -> None:
    """A partial overlap (the output is a window of the same buffer as an input) also counts."""
    big = np.zeros((12, 6), np.float32)
    a, b = big[:6], np.ones((6, 6), np.float32)
    c = big[3:9]
    with pytest.raises(ValueError, match="shares memory"):
        add_kernel(a, b, c)
    np.testing.assert_array_equal(big, 0)


@pytest.mark.requires("gcc")
def test_inputs_may_alias_each_other(add_kernel: Kernel) -> None:
    a, _, c = _fresh()
    add_kernel(a, a, c)
    np.testing.assert_allclose(c, 3 * a, rtol=1e-6)


@pytest.mark.requires("gcc")
def test_contiguous_arrays_that_are_not_vector_aligned(add_kernel: Kernel) -> None:
    """Views one element into a buffer are C-contiguous but not 16/32/64-byte aligned."""
    buf = np.random.default_rng(1).uniform(-1, 1, 3 * 36 + 3).astype(np.float32)
    a = buf[1:37].reshape(6, 6)
    b = buf[38:74].reshape(6, 6)
    out = np.zeros(37, np.float32)
    c = out[1:].reshape(6, 6)
    assert a.flags.c_contiguous and a.ctypes.data % 16 != 0
    add_kernel(a, b, c)
    np.testing.assert_allclose(c, a + 2 * b, rtol=1e-6)
    assert out[0] == 0


# --------------------------------------------------------------------------------------------
# Targets, emitters and compilers that are not there


@pytest.mark.parametrize(("target", "words"), [
    ("llvm", ["llvm", "known kinds", "c"]),
    ("c -foo=1", ["-foo", "accepted", "-num-threads"]),
    ("c -num-threads=0", ["num-threads", "positive"]),
    ("c -num-threads", ["-num-threads", "-name=value"]),
    ("", ["empty"]),
])
def test_bad_target_strings(target: str, words: list[str]) -> None:
    s, args = _add()
    for call in (lambda: Target.parse(target), lambda: asc.emit(s, args, target=target),
                 lambda: asc.build(s, args, target=target)):
        with pytest.raises(TargetError) as info:
            call()
        for w in words:
            assert w in str(info.value), (w, str(info.value))
    assert issubclass(TargetError, ValueError)


@pytest.mark.parametrize("kind", ["cuda", "opencl"])
def test_a_cpu_schedule_on_a_gpu_target_says_to_bind(kind: str) -> None:
    s, args = _add()
    with pytest.raises(asc.ScheduleError, match="no loop bound to blockIdx/threadIdx"):
        asc.emit(s, args, target=kind)
    with pytest.raises(asc.ScheduleError, match="no loop bound to blockIdx/threadIdx"):
        asc.build(s, args, target=kind)


def test_missing_compiler_says_what_to_install(tmp_path: Path) -> None:
    s, args = _add()
    with pytest.raises(CompilerNotFound, match="no-such-compiler-xyz") as info:
        asc.build(s, args, target="c -cc=no-such-compiler-xyz")
    assert "install" in str(info.value)
    src = asc.emit(s, args)
    with pytest.raises(CompilerNotFound, match="install"):
        compile_object(src, Target.parse("c -cc=no-such-compiler-xyz"), tmp_path / "k.o")
    with pytest.raises(CompilerNotFound, match="apt-get install gcc-aarch64-linux-gnu"):
        asc.build(s, args, target="c -cc=aarch64-linux-gnu-gcc-no-such-version")
    assert not list(tmp_path.iterdir())


# --------------------------------------------------------------------------------------------
# The build cache


@pytest.mark.requires("gcc")
def test_building_twice_hits_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    s, args = _add(10)
    target = Target.parse("c")
    src = asc.emit(s, args, target=target)
    lib = compile_shared(src, target)
    assert lib.is_file() and lib.parent == default_cache_dir()
    mtime = lib.stat().st_mtime_ns

    def no_compiler(command: list[str], timeout: float) -> None:
        raise AssertionError(f"the compiler ran again: {command}")

    monkeypatch.setattr(compile_mod, "_run", no_compiler)
    assert compile_shared(src, target) == lib
    f1 = build(s, args, target=target)  # same source: served from the cache
    f2 = build(s, args, target="c")
    assert lib.stat().st_mtime_ns == mtime
    a, b = _inputs((10, 10), (10, 10))
    for f in (f1, f2):
        c = np.zeros((10, 10), np.float32)
        f(a, b, c)
        np.testing.assert_allclose(c, a + 2 * b, rtol=1e-6)
    # another source, or another target, is another library
    monkeypatch.undo()
    s2, args2 = _add(11)
    assert compile_shared(asc.emit(s2, args2), target) != lib
    assert compile_shared(src, Target.parse("c -cflags=-O2")) != lib


# --------------------------------------------------------------------------------------------
# clang and a cross compiler


@pytest.mark.requires("clang")
def test_clang_target_builds_correct_kernels() -> None:
    for M, N, K in ((127, 255, 63), (16, 32, 8)):
        s, args = _tiled_matmul(M, N, K)
        f = build(s, args, target="c -cc=clang")
        a, b = _inputs((M, K), (K, N))
        c = np.full((M, N), np.nan, np.float32)
        f(a, b, c)
        np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-5)


def _cross_schedule() -> tuple[asc.Schedule, list[asc.Tensor]]:
    A, B, C = _matmul(20, 36, 9)
    s = asc.create_schedule(C)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    jo, ji = s[C].split(j, 8)
    s[C].reorder(i, jo, k, ji)
    s[C].vectorize(ji)
    s[C].parallel(i)
    return s, [A, B, C]


@pytest.mark.requires("aarch64-linux-gnu-gcc")
def test_cross_target_emits_and_compiles_to_aarch64(tmp_path: Path) -> None:
    target = Target.parse(CROSS)
    assert target.is_cross and target.machine == "aarch64"
    s, args = _cross_schedule()
    src = asc.emit(s, args, target=CROSS)
    assert "asc_float32x4" in src  # 16-byte NEON vectors for the cortex-a72
    obj = compile_object(src, target, tmp_path / "kernel.o", extra_flags=["-Wall", "-Wextra", "-Werror"])
    assert elf_machine(obj) == "aarch64"
    with pytest.raises(LoadError, match="aarch64"):
        asc.build(s, args, target=CROSS)


CROSS_MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
int cross_kernel(float* A, float* B, float* C);
int main(void) {
  static float A[20 * 9], B[9 * 36], C[20 * 36];
  for (int i = 0; i < 20 * 9; ++i) A[i] = (float)((i * 7) % 11) * 0.25f - 1.0f;
  for (int i = 0; i < 9 * 36; ++i) B[i] = (float)((i * 5) % 13) * 0.125f - 0.75f;
  if (cross_kernel(A, B, C) != 0) return 2;
  for (int i = 0; i < 20 * 36; ++i) printf("%.9g\n", C[i]);
  return 0;
}
"""


@pytest.mark.requires("aarch64-linux-gnu-gcc", "qemu-aarch64")
@pytest.mark.parametrize("portable", [True, False])
def test_cross_compiled_kernel_runs_under_qemu(tmp_path: Path, portable: bool) -> None:
    s, args = _cross_schedule()
    src = asc.emit(s, args, target=CROSS, name="cross_kernel", portable=portable)
    (tmp_path / "kernel.c").write_text(src)
    (tmp_path / "main.c").write_text(CROSS_MAIN)
    flags = ["-std=c99", "-pedantic"] if portable else ["-std=gnu11", "-fopenmp"]
    cc = subprocess.run(["aarch64-linux-gnu-gcc", *flags, "-O2", "-mcpu=cortex-a72", "-Wall", "-Werror",
                         "-static", "-o", "prog", "main.c", "kernel.c", "-lm"],
                        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert cc.returncode == 0, cc.stderr
    assert elf_machine(tmp_path / "prog") == "aarch64"
    run = subprocess.run(["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", str(tmp_path / "prog")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    got = np.array([float(x) for x in run.stdout.split()], np.float64).reshape(20, 36)
    a = (np.arange(20 * 9) * 7 % 11 * 0.25 - 1.0).reshape(20, 9)
    b = (np.arange(9 * 36) * 5 % 13 * 0.125 - 0.75).reshape(9, 36)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------------------------
# Argument lists


def _softmax() -> tuple[asc.Workload, asc.Tensor, asc.Tensor]:
    wl = asc.get_workload("softmax", (4, 9))
    data, out = wl.tensors()
    return wl, data, out


def test_argument_list_that_omits_an_input() -> None:
    _, data, out = _softmax()
    s = asc.create_schedule(out)
    for call in (asc.lower, asc.emit, asc.build):
        with pytest.raises(ValueError, match="'data'"):
            call(s, [out])


def _two_outputs() -> tuple[asc.Schedule, asc.Tensor, asc.Tensor, asc.Tensor]:
    X = asc.placeholder((5, 7), name="X")
    T = asc.compute((5, 7), lambda i, j: X[i, j] * 2.0, name="T")
    Y1 = asc.compute((5, 7), lambda i, j: T[i, j] + 1.0, name="Y1")
    Y2 = asc.compute((5, 7), lambda i, j: T[i, j] - X[i, j], name="Y2")
    return asc.create_schedule([Y1, Y2]), X, Y1, Y2


@pytest.mark.requires("gcc")
def test_multi_output_kernel_writes_every_output() -> None:
    s, X, Y1, Y2 = _two_outputs()
    f = build(s, [X, Y1, Y2])
    assert [a.is_output for a in f.args] == [False, True, True]
    (x,) = _inputs((5, 7))
    y1, y2 = np.full((5, 7), np.nan, np.float32), np.full((5, 7), np.nan, np.float32)
    f(x, y1, y2)
    np.testing.assert_allclose(y1, 2 * x + 1, rtol=1e-6)
    np.testing.assert_allclose(y2, x, rtol=1e-6)


def test_argument_list_that_omits_an_output() -> None:
    s, X, Y1, Y2 = _two_outputs()
    for call in (asc.lower, asc.emit, asc.build):
        with pytest.raises(ValueError, match="Y2"):
            call(s, [X, Y1])


@pytest.mark.requires("gcc")
def test_argument_list_with_an_inlined_or_attached_stage_writes_it() -> None:
    """As TVM: an inlined or compute_at intermediate in the arguments becomes a real buffer
    argument, written with its values (its consumers still inline it or compute it in place)."""
    _, data, out = _softmax()
    x = np.random.default_rng(0).random((4, 9)).astype(np.float32)
    e = np.exp(x - x.max(1, keepdims=True))
    s = asc.create_schedule(out)
    s["expval"].compute_inline()
    expval = s["expval"].op.output(0)
    got_e, got = np.zeros_like(x), np.zeros_like(x)
    asc.build(s, [data, expval, out])(x, got_e, got)
    np.testing.assert_allclose(got_e, e, rtol=1e-5)
    np.testing.assert_allclose(got, e / e.sum(1, keepdims=True), rtol=1e-5)
    s = asc.create_schedule(out)
    s["expsum"].compute_at(s[out], out.op.axis[0])
    sums = np.zeros(4, np.float32)
    asc.build(s, [data, s["expsum"].op.output(0), out])(x, sums, got)
    np.testing.assert_allclose(sums, e.sum(1), rtol=1e-5)
    np.testing.assert_allclose(got, e / e.sum(1, keepdims=True), rtol=1e-5)


def test_repeated_argument_is_refused() -> None:
    s, args = _add()
    with pytest.raises(ValueError, match="repeat"):
        asc.lower(s, [args[0], args[0], args[1], args[2]])


@pytest.mark.requires("gcc")
def test_intermediate_stage_passed_as_an_argument_is_written_so_it_is_an_output() -> None:
    """A root intermediate (softmax's ``maxelem``) in the argument list is computed into the
    caller's array, so the kernel must treat it as an output: a read-only array is refused, not
    written behind numpy's back."""
    wl, data, out = _softmax()
    s = asc.create_schedule(out)
    maxelem = s["maxelem"].op.output(0)
    f = build(s, [data, maxelem, out])
    x = wl.random_inputs(0)[0]
    m = np.zeros(4, np.float32)
    m.setflags(write=False)
    o = np.zeros((4, 9), np.float32)
    try:
        f(x, m, o)
    except ValueError as e:
        assert "read-only" in str(e)
    np.testing.assert_array_equal(m, 0, err_msg="the kernel wrote into a read-only array")
    m2 = np.zeros(4, np.float32)
    f(x, m2, o)
    np.testing.assert_allclose(m2, x.max(axis=1))
    np.testing.assert_allclose(o, wl.reference(x)[0], rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------------------------
# The IR printer and loop partitioning


def test_ir_printer_shows_loops_and_their_kinds() -> None:
    s, args = _tiled_matmul(64, 64, 32)
    text = str(asc.lower(s, args, name="mm"))
    assert text.startswith("func mm(A: float32[64, 32], B: float32[32, 64], C: float32[64, 64])")
    for loop in ("C.i.outer", "C.j.outer", "C.k.outer", "C.i.inner", "C.k.inner", "C.j.inner"):
        assert re.search(rf"for {re.escape(loop)} in \[0, \d+\)", text), loop
    assert re.search(r"for C\.i\.outer in \[0, 8\) parallel:", text)
    assert re.search(r"for C\.j\.inner in \[0, 16\) vectorized:", text)
    assert re.search(r"for C\.k\.inner in \[0, 4\) serial:", text)
    assert "C[" in text and "A[" in text and "B[" in text

    X = asc.placeholder((700,), name="X")
    Y = asc.compute((700,), lambda i: X[i] + 1.0, name="Y")
    s2 = asc.create_schedule(Y)
    s2[Y].unroll(Y.op.axis[0])
    assert re.search(r"for Y\.i in \[0, 700\) unrolled:", str(asc.lower(s2, [X, Y])))

    _, data, out = _softmax()
    text = str(asc.lower(asc.create_schedule(out), [data, out]))
    assert re.search(r"allocate maxelem: float32\[4\] global", text)


def _loops(s: Stmt) -> Iterator[For]:
    """Every loop in ``s``, in program order."""
    if isinstance(s, For):
        yield s
        yield from _loops(s.body)
    elif isinstance(s, IfThenElse):
        yield from _loops(s.then)
        if s.otherwise is not None:
            yield from _loops(s.otherwise)
    elif isinstance(s, Seq):
        for x in s.stmts:
            yield from _loops(x)


def _has_if(s: Stmt) -> bool:
    if isinstance(s, IfThenElse):
        return True
    if isinstance(s, For):
        return _has_if(s.body)
    if isinstance(s, Seq):
        return any(_has_if(x) for x in s.stmts)
    return False


@pytest.mark.requires("gcc")
def test_main_partition_of_an_odd_matmul_has_no_guard_in_the_vector_loop() -> None:
    s, args = _tiled_matmul(127, 255, 63)
    func: PrimFunc = asc.lower(s, args)
    vec = [lp for lp in _loops(func.body) if lp.kind == "vectorized" and lp.var.name == "C.j.inner"]
    assert len(vec) >= 2
    assert not _has_if(vec[0].body), str(vec[0])  # the main part: no tail guard
    # the tail: cut to the columns left (255 = 31 x 8 + 7), or guarded
    assert any(_has_if(lp.body) or lp.extent != vec[0].extent for lp in vec[1:])
    # in C, the main part's update is vector statements
    src = asc.emit(s, args, target="c -vector-bytes=32")
    lines = src.splitlines()
    first = next(n for n, line in enumerate(lines) if "for (int C_k_inner" in line)
    assert lines[first + 1].strip().startswith("*(asc_float32x8u*)&C["), "\n".join(lines[first:first + 3])
    f = build(s, args, target="c -vector-bytes=32")
    a, b = _inputs((127, 63), (63, 255))
    c = np.full((127, 255), np.nan, np.float32)
    f(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------------------------
# Heap temporaries, repeated calls, dropped kernels


def _conv_with_root_pad() -> tuple[asc.Workload, asc.Schedule, list[asc.Tensor]]:
    wl = asc.get_workload("conv2d_nchw", (1, 4, 12, 11, 5, 3, 3, 1, 1))
    tensors = wl.tensors()
    return wl, asc.create_schedule(tensors[-1]), tensors


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("op", ["softmax", "conv2d_pad"])
def test_heap_temporaries_run_again_and_again(op: str) -> None:
    if op == "softmax":
        wl = asc.get_workload("softmax", (33, 70))
        tensors = wl.tensors()
        s = asc.create_schedule(tensors[-1])
    else:
        wl, s, tensors = _conv_with_root_pad()
    src = asc.emit(s, tensors)
    assert "asc_alloc(" in src and "free(" in src  # at least one stage lives on the heap
    f = build(s, tensors)
    inputs = wl.random_inputs(2)
    want = wl.reference(*inputs)[0]
    out = tensors[-1]
    first = np.full(out.shape, np.nan, np.float32)
    f(*inputs, first)
    np.testing.assert_allclose(first, want, rtol=1e-4, atol=1e-5)
    for _ in range(3):
        again = np.full(out.shape, np.nan, np.float32)
        f(*inputs, again)
        np.testing.assert_array_equal(again, first)
    times = f.time(*inputs, first, number=50, repeat=2)
    assert len(times) == 2 and all(t > 0 for t in times)
    np.testing.assert_array_equal(first, again)


DROP_SCRIPT = """
import gc, sys
import numpy as np
import autosched as asc

for it in range(60):
    X = asc.placeholder((64, 64), name="X")
    Y = asc.compute((64, 64), lambda i, j: X[i, j] * 2.0 + 1.0, name="Y")
    s = asc.create_schedule(Y)
    s[Y].parallel(Y.op.axis[0])
    f = asc.build(s, [X, Y], target="c -num-threads=2")
    x = np.ones((64, 64), np.float32)
    y = np.zeros_like(x)
    f(x, y)
    assert y[0, 0] == 3.0
    del f
    gc.collect()
print("survived")
"""


@pytest.mark.requires("gcc")
def test_dropping_a_parallel_kernel_does_not_crash_the_process(tmp_path: Path) -> None:
    """Build, run and drop a kernel with an OpenMP loop, again and again (in a child process,
    so that a crash fails this test only)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), AUTOSCHED_CACHE=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(DROP_SCRIPT)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0 and "survived" in proc.stdout, (proc.returncode, proc.stderr[-3000:])


@pytest.mark.requires("gcc")
def test_kernels_are_independent_of_each_other() -> None:
    """Two kernels from the same schedule with different names, and a rebuilt one, all agree."""
    s, args = _add(9)
    f1 = build(s, args, name="first")
    f2 = build(s, args, name="second")
    assert f1.name != f2.name
    a, b = _inputs((9, 9), (9, 9))
    c1, c2 = np.zeros((9, 9), np.float32), np.zeros((9, 9), np.float32)
    f1(a, b, c1)
    f2(a, b, c2)
    np.testing.assert_array_equal(c1, c2)
    gc.collect()
    np.testing.assert_allclose(c1, a + 2 * b, rtol=1e-6)
