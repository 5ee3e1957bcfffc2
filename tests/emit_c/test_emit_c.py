"""The C emitter: what it prints compiles cleanly, computes the right numbers, and is safe to print.

Every schedule in ``CASES`` is emitted, compiled with ``-Wall -Wextra -Werror`` (gcc, and clang
where it is installed) and built and run against an independent numpy reference. ``portable=True``
output is checked as strict C99 and run from a hand-written ``main.c``. Names that users choose
(tensor and function names) must never reach the C source unsanitized.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.runner import CompileError, compile_object
from autosched.target import Target

STRICT = ["-Wall", "-Wextra", "-Werror"]
PORTABLE_FLAGS = ["-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror"]
C_TYPES = {"float32": "float", "float64": "double", "int8": "int8_t", "int32": "int32_t",
           "int64": "int64_t", "bool": "uint8_t"}
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# --------------------------------------------------------------------------------------------
# Cases: a schedule, its arguments, inputs and the expected outputs (independent numpy code)


@dataclass
class Case:
    sched: asc.Schedule
    args: list[asc.Tensor]
    inputs: list[np.ndarray]
    expected: list[np.ndarray]
    target: str = "c"
    rtol: float = 1e-4
    atol: float = 1e-5

    def outputs(self) -> list[np.ndarray]:
        """Fresh output arrays, filled with NaN (or a sentinel) so unwritten elements show."""
        outs = []
        for t in self.args[len(self.inputs):]:
            dt = np.dtype(t.dtype)
            fill = np.nan if dt.kind == "f" else -12345
            outs.append(np.full(t.shape, fill, dtype=dt))
        return outs

    def check(self, got: list[np.ndarray]) -> None:
        for t, g, e in zip(self.args[len(self.inputs):], got, self.expected, strict=True):
            if np.dtype(t.dtype).kind == "f":
                np.testing.assert_allclose(g, e, rtol=self.rtol, atol=self.atol, err_msg=t.name)
            else:
                np.testing.assert_array_equal(g, e, err_msg=t.name)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _matmul(M: int, N: int, K: int, dtype: str = "float32") -> tuple[asc.Tensor, ...]:
    A = asc.placeholder((M, K), dtype, name="A")
    B = asc.placeholder((K, N), dtype, name="B")
    k = asc.reduce_axis(K, name="k")
    C = asc.compute((M, N), lambda i, j: asc.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def _matmul_case(s: asc.Schedule, A: asc.Tensor, B: asc.Tensor, C: asc.Tensor, target: str = "c") -> Case:
    a = rng(1).uniform(-1, 1, A.shape).astype(A.dtype)
    b = rng(2).uniform(-1, 1, B.shape).astype(B.dtype)
    ref = (a.astype(np.float64) @ b.astype(np.float64)).astype(C.dtype)
    return Case(s, [A, B, C], [a, b], [ref], target)


def case_matmul_default() -> Case:
    A, B, C = _matmul(33, 20, 17)
    return _matmul_case(asc.create_schedule(C), A, B, C)


def _tiled_matmul(M: int, N: int, K: int,
                  dtype: str = "float32") -> tuple[asc.Schedule, tuple[asc.Tensor, ...]]:
    A, B, C = _matmul(M, N, K, dtype)
    s = asc.create_schedule(C)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 8, 16)
    ko, ki = s[C].split(k, 4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    s[C].parallel(io)
    return s, (A, B, C)


def case_matmul_tiled_127x255x63() -> Case:
    s, (A, B, C) = _tiled_matmul(127, 255, 63)
    return _matmul_case(s, A, B, C, "c -vector-bytes=32")


def case_matmul_float64_tiled() -> Case:
    s, (A, B, C) = _tiled_matmul(37, 45, 19, "float64")
    case = _matmul_case(s, A, B, C, "c -vector-bytes=32")
    case.rtol, case.atol = 1e-12, 1e-12
    return case


def case_matmul_unrolled() -> Case:
    A, B, C = _matmul(24, 20, 12)
    s = asc.create_schedule(C)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 4)
    ko, ki = s[C].split(k, 3)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].unroll(ki)
    s[C].unroll(ii)
    s[C].vectorize(ji)
    return _matmul_case(s, A, B, C)


def case_pragma_auto_unroll() -> Case:
    A, B, C = _matmul(21, 13, 9)
    s = asc.create_schedule(C)
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 4)
    s[C].pragma(io, "auto_unroll_max_step", 16)
    return _matmul_case(s, A, B, C)


def case_unroll_large_loop() -> Case:
    n = 700  # too many copies to unroll in the IR: printed as a pragma
    X = asc.placeholder((n,), name="X")
    Y = asc.compute((n,), lambda i: X[i] * 2.0 + 1.0, name="Y")
    s = asc.create_schedule(Y)
    s[Y].unroll(Y.op.axis[0])
    x = rng().uniform(-1, 1, n).astype(np.float32)
    return Case(s, [X, Y], [x], [x * 2 + 1])


def case_parallel_fused() -> Case:
    A = asc.placeholder((37, 29), name="A")
    B = asc.placeholder((37, 29), name="B")
    C = asc.compute((37, 29), lambda i, j: A[i, j] * B[i, j] - A[i, j], name="C")
    s = asc.create_schedule(C)
    f = s[C].fuse(*s[C].op.axis)
    fo, fi = s[C].split(f, 64)
    s[C].parallel(fo)
    s[C].vectorize(fi)
    a, b = rng(1).uniform(-1, 1, (2, 37, 29)).astype(np.float32)
    return Case(s, [A, B, C], [a, b], [a * b - a], "c -num-threads=2")


def case_cache_write_compute_at() -> Case:
    A, B, C = _matmul(61, 45, 40)
    s = asc.create_schedule(C)
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 8, 16)
    s[CL].compute_at(s[C], jo)
    ci, cj = s[CL].op.axis
    (ck,) = s[CL].op.reduce_axis
    s[CL].reorder(ck, ci, cj)
    s[CL].vectorize(cj)
    s[C].vectorize(ji)
    s[C].parallel(io)
    return _matmul_case(s, A, B, C, "c -vector-bytes=32")


def case_cache_read_packing() -> Case:
    A, B, C = _matmul(40, 48, 32)
    s = asc.create_schedule(C)
    BB = s.cache_read(B, "local", [C])
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 8, 16)
    ko, ki = s[C].split(k, 8)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[BB].compute_at(s[C], ko)
    s[BB].vectorize(s[BB].op.axis[1])
    s[C].vectorize(ji)
    return _matmul_case(s, A, B, C)


def _conv_case(args: tuple[int, ...], schedule: Callable[[asc.Schedule, asc.Tensor], None]) -> Case:
    wl = asc.get_workload("conv2d_nchw", args)
    tensors = wl.tensors()
    out = tensors[-1]
    s = asc.create_schedule(out)
    schedule(s, out)
    inputs = wl.random_inputs(3)
    return Case(s, tensors, inputs, wl.reference(*inputs))


def case_conv_pad_inlined() -> Case:
    def sched(s: asc.Schedule, out: asc.Tensor) -> None:
        s["pad"].compute_inline()
        n, f, y, x = s[out].op.axis
        rc, ry, rx = s[out].op.reduce_axis
        s[out].reorder(n, f, y, rc, ry, rx, x)
        s[out].vectorize(x)

    return _conv_case((1, 3, 10, 9, 4, 3, 3, 1, 1), sched)


def case_conv_pad_root_strided() -> Case:
    return _conv_case((1, 3, 11, 10, 5, 3, 3, 2, 1), lambda s, out: None)


def _softmax_ref(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(x.dtype)


def case_softmax() -> Case:
    wl = asc.get_workload("softmax", (7, 37))
    data, out = wl.tensors()
    x = wl.random_inputs(0)[0] * 4
    return Case(asc.create_schedule(out), [data, out], [x], [_softmax_ref(x)])


def case_softmax_scheduled() -> Case:
    wl = asc.get_workload("softmax", (6, 56))
    data, out = wl.tensors()
    s = asc.create_schedule(out)
    s["maxelem"].compute_at(s["expval"], s["expval"].op.axis[0])
    s["expsum"].compute_at(s[out], out.op.axis[0])
    s["expval"].vectorize(s["expval"].op.axis[1])
    s[out].vectorize(out.op.axis[1])
    s[out].parallel(out.op.axis[0])
    x = wl.random_inputs(1)[0] * 4
    return Case(s, [data, out], [x], [_softmax_ref(x)], "c -vector-bytes=32")


def case_dense_relu() -> Case:
    wl = asc.get_workload("dense", (9, 21, 13))
    data, weight, bias, out = wl.tensors()
    s = asc.create_schedule(out)
    dense = s["dense"]
    dense.compute_at(s[out], out.op.axis[0])
    dj = dense.op.axis[1]
    (dk,) = dense.op.reduce_axis
    dense.reorder(dk, dj)
    dense.vectorize(dj)
    s[out].vectorize(out.op.axis[1])
    inputs = wl.random_inputs(4)
    d, w, b = inputs
    ref = np.maximum(d.astype(np.float64) @ w.T.astype(np.float64) + b, 0).astype(np.float32)
    return Case(s, [data, weight, bias, out], inputs, [ref], "c -vector-bytes=16")


def _math_case(dtype: str) -> Case:
    X = asc.placeholder((5, 13), dtype, name="X")

    def body(i: asc.Tensor, j: asc.Tensor) -> object:
        x = X[i, j]
        return (asc.exp(x) + asc.log(x) + asc.sqrt(x) + asc.tanh(x) + asc.sigmoid(x)
                + asc.abs(x - 1.0) + asc.pow(x, 1.5) + asc.erf(x))

    Y = asc.compute((5, 13), body, name="Y")
    s = asc.create_schedule(Y)
    s[Y].vectorize(Y.op.axis[1])
    x = rng(5).uniform(0.1, 3.0, (5, 13)).astype(dtype)
    xd = x.astype(np.float64)
    import math

    erf = np.vectorize(math.erf)(xd)
    ref = (np.exp(xd) + np.log(xd) + np.sqrt(xd) + np.tanh(xd) + 1 / (1 + np.exp(-xd))
           + np.abs(xd - 1) + xd**1.5 + erf).astype(dtype)
    tol = 1e-5 if dtype == "float32" else 1e-12
    return Case(s, [X, Y], [x], [ref], rtol=tol, atol=tol)


def case_math_float32() -> Case:
    return _math_case("float32")


def case_math_float64() -> Case:
    return _math_case("float64")


def case_if_then_else() -> Case:
    X = asc.placeholder((6, 11), name="X")
    Y = asc.compute(
        (6, 11),
        lambda i, j: asc.if_then_else(X[i, j] > 0.0, X[i, j] * 2.0, 0.0 - X[i, j])
        + asc.if_then_else(i < j, 1.0, 0.5) + asc.cast(X[i, j] < -0.5, "float32"),
        name="Y",
    )
    s = asc.create_schedule(Y)
    s[Y].vectorize(Y.op.axis[1])
    x = rng(6).uniform(-1, 1, (6, 11)).astype(np.float32)
    ii, jj = np.indices((6, 11))
    ref = np.where(x > 0, 2 * x, -x) + np.where(ii < jj, 1.0, 0.5) + (x < -0.5)
    return Case(s, [X, Y], [x], [ref.astype(np.float32)])


def case_int_floordiv_floormod() -> Case:
    n = 40
    X = asc.placeholder((n,), "int32", name="X")
    D = asc.placeholder((n,), "int32", name="D")
    Y = asc.compute(
        (n,),
        lambda i: X[i] // 3 + (X[i] % 5) * 7 + (i - 17) // 4 * 11 + (i - 17) % 6 * 13
        + X[i] // D[i] * 17 + (X[i] % D[i]) * 19 + X[i] // -3 * 23 + (X[i] % -4) * 29,
        name="Y",
    )
    s = asc.create_schedule(Y)
    x = rng(7).integers(-50, 50, n).astype(np.int32)
    d = rng(8).choice(np.array([-7, -3, -2, -1, 1, 2, 5, 9]), n).astype(np.int32)
    i = np.arange(n)
    ref = (x // 3 + (x % 5) * 7 + (i - 17) // 4 * 11 + (i - 17) % 6 * 13 + x // d * 17 + (x % d) * 19
           + x // -3 * 23 + (x % -4) * 29)
    return Case(s, [X, D, Y], [x, d], [ref.astype(np.int32)])


def case_int64_abs_minmax() -> Case:
    n = 16
    X = asc.placeholder((n,), "int64", name="X")
    Z = asc.placeholder((n,), "int64", name="Z")
    Y = asc.compute((n,), lambda i: asc.abs(X[i]) + asc.max(X[i], Z[i]) - asc.min(X[i], Z[i]), name="Y")
    s = asc.create_schedule(Y)
    x = rng(9).integers(-(2**40), 2**40, n).astype(np.int64)
    z = rng(10).integers(-(2**40), 2**40, n).astype(np.int64)
    return Case(s, [X, Z, Y], [x, z], [np.abs(x) + np.maximum(x, z) - np.minimum(x, z)])


def case_rfactor() -> Case:
    X = asc.placeholder((9, 50), name="X")
    k = asc.reduce_axis(50, name="k")
    Y = asc.compute((9,), lambda i: asc.sum(X[i, k], axis=k), name="Y")
    s = asc.create_schedule(Y)
    ko, ki = s[Y].split(k, 8)
    YF = s.rfactor(Y, ki)
    s[YF].vectorize(s[YF].op.axis[0])
    x = rng(11).uniform(-1, 1, (9, 50)).astype(np.float32)
    return Case(s, [X, Y], [x], [x.astype(np.float64).sum(axis=1).astype(np.float32)])


def _vector_case(n: int, vector_bytes: int, dtype: str = "float32") -> Case:
    """Contiguous loads, a broadcast, a gather and max/min on a vectorized loop of extent ``n``."""
    A = asc.placeholder((3, n), dtype, name="A")
    B = asc.placeholder((n,), dtype, name="B")
    S = asc.placeholder((3,), dtype, name="S")
    C = asc.compute(
        (3, n),
        lambda i, j: asc.max(A[i, j] * B[j] + A[i, (j * 3 + 1) % n], asc.const(0.25, dtype))
        - asc.min(A[i, j], S[i]) * S[i],
        name="C",
    )
    s = asc.create_schedule(C)
    s[C].vectorize(C.op.axis[1])
    r = rng(n)
    a = r.uniform(-1, 1, (3, n)).astype(dtype)
    b = r.uniform(-1, 1, n).astype(dtype)
    sc = r.uniform(-1, 1, 3).astype(dtype)
    gather = a[:, (np.arange(n) * 3 + 1) % n]
    ref = np.maximum(a * b + gather, 0.25) - np.minimum(a, sc[:, None]) * sc[:, None]
    tol = 1e-6 if dtype == "float32" else 1e-14
    return Case(s, [A, B, S, C], [a, b, sc], [ref.astype(dtype)], f"c -vector-bytes={vector_bytes}",
                rtol=tol, atol=tol)


def case_vector_split_tail() -> Case:
    """A vectorized inner loop of a split that does not divide (28 = 3 * 8 + 4)."""
    X = asc.placeholder((5, 28), name="X")
    Y = asc.compute((5, 28), lambda i, j: X[i, j] * 3.0 + X[i, 27 - j], name="Y")
    s = asc.create_schedule(Y)
    jo, ji = s[Y].split(Y.op.axis[1], 8)
    s[Y].vectorize(ji)
    x = rng(12).uniform(-1, 1, (5, 28)).astype(np.float32)
    return Case(s, [X, Y], [x], [x * 3 + x[:, ::-1]], "c -vector-bytes=32")


CASES: dict[str, Callable[[], Case]] = {
    name[len("case_"):]: fn for name, fn in dict(globals()).items() if name.startswith("case_")
}
for _n in (8, 16, 56, 7, 3, 28, 200):
    for _vb in (16, 32, 64):
        CASES[f"vector_n{_n}_vb{_vb}"] = lambda n=_n, vb=_vb: _vector_case(n, vb)
for _n in (56, 7, 3):
    CASES[f"vector_float64_n{_n}_vb32"] = lambda n=_n: _vector_case(n, 32, "float64")

# the cases whose portable C99 version is also compiled and run from a main()
PORTABLE_CASES = ["matmul_tiled_127x255x63", "matmul_float64_tiled", "matmul_unrolled", "parallel_fused",
                  "cache_write_compute_at", "cache_read_packing", "conv_pad_inlined", "conv_pad_root_strided",
                  "softmax_scheduled", "dense_relu", "math_float32", "math_float64", "if_then_else",
                  "int_floordiv_floormod", "rfactor", "vector_n56_vb32", "vector_n7_vb16"]


def compile_strict(source: str, target: str, tmp_path: Path) -> None:
    """Compile ``source`` for ``target`` to an object with ``-Wall -Wextra -Werror``."""
    try:
        compile_object(source, Target.parse(target), tmp_path / "kernel.o", extra_flags=STRICT)
    except CompileError as e:  # show the source lines the compiler complained about
        pytest.fail(f"{e}\n--- source ---\n{_numbered(source)}")


def _numbered(source: str, limit: int = 120) -> str:
    lines = source.splitlines()
    shown = "\n".join(f"{n + 1:4d} {line[:200]}" for n, line in enumerate(lines[:limit]))
    return shown + (f"\n... ({len(lines) - limit} more lines)" if len(lines) > limit else "")


# Built kernels are kept for the whole session: dropping a kernel that ran an OpenMP loop unloads
# libgomp under its live worker threads and crashes the process later, at a random place (see
# test_build_api.py::test_dropping_a_parallel_kernel_does_not_crash_the_process). Keeping them
# confines that bug to the test that shows it.
KEEP_ALIVE: list[object] = []


def run_built(case: Case, **kw: str) -> list[np.ndarray]:
    f = asc.build(case.sched, case.args, target=case.target, **kw)
    KEEP_ALIVE.append(f)
    outs = case.outputs()
    f(*case.inputs, *outs)
    return outs


# --------------------------------------------------------------------------------------------
# Compiles cleanly, runs correctly


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("name", list(CASES))
def test_gcc_compiles_without_warnings(name: str, tmp_path: Path) -> None:
    case = CASES[name]()
    compile_strict(asc.emit(case.sched, case.args, target=case.target), case.target, tmp_path)


CLANG_CASES = [n for n in CASES if not n.startswith("vector_")] + [
    "vector_n56_vb32", "vector_n7_vb16", "vector_n3_vb64", "vector_n200_vb16", "vector_float64_n7_vb32"]


@pytest.mark.requires("clang")
@pytest.mark.parametrize("name", CLANG_CASES)
def test_clang_compiles_without_warnings(name: str, tmp_path: Path) -> None:
    case = CASES[name]()
    target = f"{case.target} -cc=clang"
    compile_strict(asc.emit(case.sched, case.args, target=target), target, tmp_path)


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("name", list(CASES))
def test_kernel_matches_numpy(name: str) -> None:
    case = CASES[name]()
    case.check(run_built(case))


@pytest.mark.requires("gcc")
def test_vector_widths_wider_than_the_cpu_still_compile_cleanly(tmp_path: Path) -> None:
    """-vector-bytes=64 on a CPU without AVX-512 (and 32 without AVX): GCC's vector extensions
    allow any width, so the emitted helpers must not trip -Wpsabi under -Werror."""
    for target in ("c -mcpu=haswell -vector-bytes=64", "c -mcpu=nehalem -vector-bytes=32"):
        case = _vector_case(56, 64)
        compile_strict(asc.emit(case.sched, case.args, target=target), target, tmp_path)


def test_vectorized_loops_print_vector_statements() -> None:
    """Contiguous vectorized loops become vector code, with power-of-two tails and a chunk loop."""
    for n, vb, want in ((56, 32, "asc_float32x8"), (7, 16, "asc_float32x4"), (3, 64, "asc_float32x2"),
                        (16, 64, "asc_float32x16"), (56, 32, "asc_float64x4")):
        dtype = "float64" if "float64" in want else "float32"
        case = _vector_case(n, vb, dtype)
        src = asc.emit(case.sched, case.args, target=case.target)
        assert want in src, (n, vb, want)
    case = _vector_case(200, 16)  # 50 vectors of 4: a loop over chunks, not 50 statements
    src = asc.emit(case.sched, case.args, target=case.target)
    assert src.count("*(asc_float32x4u*)&C[") < 10
    assert re.search(r"for \(int \w+ = 0; \w+ < 50; ", src)


# --------------------------------------------------------------------------------------------
# portable=True: strict C99, no extensions, same numbers from a plain main()


def _main_c(func: str, args: list[asc.Tensor]) -> str:
    """A main() that reads every argument from the file named on the command line, calls
    ``func`` and writes the outputs back to their files."""
    protos = ", ".join(f"{C_TYPES[t.dtype]}* a{i}" for i, t in enumerate(args))
    lines = [
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "#include <stdint.h>",
        f"int {func}({protos});",
        "static void* load(const char* path, size_t bytes) {",
        "  void* p = malloc(bytes ? bytes : 1);",
        "  FILE* f = fopen(path, \"rb\");",
        "  if (!p || !f || fread(p, 1, bytes, f) != bytes) {",
        "    fprintf(stderr, \"cannot read %s\\n\", path);",
        "    exit(3);",
        "  }",
        "  fclose(f);",
        "  return p;",
        "}",
        "static void save(const char* path, const void* p, size_t bytes) {",
        "  FILE* f = fopen(path, \"wb\");",
        "  if (!f || fwrite(p, 1, bytes, f) != bytes) {",
        "    fprintf(stderr, \"cannot write %s\\n\", path);",
        "    exit(4);",
        "  }",
        "  fclose(f);",
        "}",
        "int main(int argc, char** argv) {",
        f"  if (argc != {len(args) + 1}) return 1;",
    ]
    for i, t in enumerate(args):
        size = int(np.prod(t.shape))
        lines.append(f"  {C_TYPES[t.dtype]}* a{i} = ({C_TYPES[t.dtype]}*)load(argv[{i + 1}], "
                     f"{size} * sizeof({C_TYPES[t.dtype]}));")
    lines.append(f"  if ({func}({', '.join(f'a{i}' for i in range(len(args)))}) != 0) return 2;")
    for i, t in enumerate(args):
        size = int(np.prod(t.shape))
        lines.append(f"  save(argv[{i + 1}], a{i}, {size} * sizeof({C_TYPES[t.dtype]}));")
        lines.append(f"  free(a{i});")
    lines += ["  return 0;", "}", ""]
    return "\n".join(lines)


def _gcc(args: list[str], cwd: Path) -> None:
    out = subprocess.run(["gcc", *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        source = (cwd / "kernel.c").read_text() if (cwd / "kernel.c").exists() else ""
        pytest.fail(f"gcc {' '.join(args)} failed:\n{out.stderr}\n--- kernel.c ---\n{_numbered(source)}")


def run_portable(case: Case, tmp_path: Path, func: str = "portable_kernel") -> list[np.ndarray]:
    """Compile the portable source with a main() as a strict C99 program, run it, read the outputs."""
    (tmp_path / "kernel.c").write_text(asc.emit(case.sched, case.args, name=func, portable=True))
    (tmp_path / "main.c").write_text(_main_c(func, case.args))
    _gcc([*PORTABLE_FLAGS, "-O2", "-o", "prog", "main.c", "kernel.c", "-lm"], tmp_path)
    files = []
    arrays = [*case.inputs, *case.outputs()]
    for i, arr in enumerate(arrays):
        path = tmp_path / f"arg{i}.bin"
        np.ascontiguousarray(arr).tofile(path)
        files.append(str(path))
    proc = subprocess.run([str(tmp_path / "prog"), *files], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    outs = []
    for t, path in zip(case.args[len(case.inputs):], files[len(case.inputs):], strict=True):
        outs.append(np.fromfile(path, dtype=np.dtype(t.dtype)).reshape(t.shape))
    return outs


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("name", PORTABLE_CASES)
def test_portable_source_is_strict_c99(name: str, tmp_path: Path) -> None:
    case = CASES[name]()
    src = asc.emit(case.sched, case.args, target=case.target, portable=True)
    for banned in ("__attribute__", "#pragma", "vector_size"):
        assert banned not in src, banned
    (tmp_path / "kernel.c").write_text(src)
    _gcc([*PORTABLE_FLAGS, "-O2", "-c", "-o", "kernel.o", "kernel.c"], tmp_path)


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("name", PORTABLE_CASES)
def test_portable_source_with_handwritten_main_matches_numpy(name: str, tmp_path: Path) -> None:
    case = CASES[name]()
    case.check(run_portable(case, tmp_path))


# --------------------------------------------------------------------------------------------
# Names: nothing a user names reaches C unsanitized

HOSTILE_NAMES = [
    'A; system("rm -rf /"); //',
    "int",
    "__x",
    "1abc",
    "a b",
    "kernel",
    "Ωmega",
    "*/ int evil; /*",
    "x\ny",
    "#include <stdio.h>",
    "x" * 200,
]

# identifiers that are valid C but already mean something in the emitted translation unit: the
# timing harness's locals and parameters, a libm function the kernel calls, a macro that gcc
# predefines in gnu11 mode, a GNU keyword, and macros from <math.h> and <time.h>
TAKEN_IDENTIFIERS = ["r", "number", "t0", "expf", "linux", "asm", "INFINITY", "CLOCK_MONOTONIC"]

C_RESERVED = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
    "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return",
    "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
    "volatile", "while", "asm", "typeof", "main", "linux", "unix",
}


def _is_identifier(name: str) -> bool:
    return IDENT.fullmatch(name) is not None


def _params(src: str, func: str) -> list[str]:
    """Parameter names of the kernel ``func`` in the emitted source."""
    m = re.search(rf"^int {re.escape(func)}\(([^)]*)\)", src, re.M)
    assert m is not None, f"no definition of {func} in:\n{src}"
    return [p.split()[-1] for p in m.group(1).split(",")]


def _elementwise(x_name: str, y_name: str) -> tuple[asc.Schedule, list[asc.Tensor], Case]:
    X = asc.placeholder((4, 24), name=x_name)
    Y = asc.compute((4, 24), lambda i, j: asc.exp(X[i, j]) * 0.5 + X[i, j], name=y_name)
    s = asc.create_schedule(Y)
    s[Y].vectorize(Y.op.axis[1])
    x = rng(13).uniform(-1, 1, (4, 24)).astype(np.float32)
    case = Case(s, [X, Y], [x], [(np.exp(x.astype(np.float64)) * 0.5 + x).astype(np.float32)])
    return s, [X, Y], case


def _assert_not_in_code(src: str, name: str) -> None:
    """The raw ``name`` does not reach the source: a name made of word characters never appears
    as a whole token (``1abc`` may live on inside ``v_1abc``), any other name not at all."""
    if re.fullmatch(r"[A-Za-z0-9_]+", name):
        assert not re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", src), name
    else:
        assert name not in src, name


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=[ascii(n)[1:-1][:30] for n in HOSTILE_NAMES])
def test_hostile_tensor_names(name: str, tmp_path: Path) -> None:
    s, args, case = _elementwise(name, name + "?out")
    src = asc.emit(s, args)
    if name not in C_RESERVED:  # a keyword such as int is checked through the parameter names
        _assert_not_in_code(src, name)
    assert name + "?out" not in src
    params = _params(src, "default_function")
    assert len(set(params)) == 2 and all(_is_identifier(p) and p not in C_RESERVED for p in params), params
    assert not any(p.startswith("_") for p in params), params
    compile_strict(src, "c", tmp_path)
    case.check(run_built(case))


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("name", TAKEN_IDENTIFIERS)
def test_tensor_names_that_are_taken_identifiers(name: str, tmp_path: Path) -> None:
    s, args, case = _elementwise(name, "Y")
    compile_strict(asc.emit(s, args), "c", tmp_path)
    case.check(run_built(case))


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("names", [("a.b", "a_b"), ("é", "ü"), ("x-1", "x+1"), ("A", "a")])
def test_names_that_sanitize_alike_stay_distinct(names: tuple[str, str], tmp_path: Path) -> None:
    X1 = asc.placeholder((3, 8), name=names[0])
    X2 = asc.placeholder((3, 8), name=names[1])
    Y = asc.compute((3, 8), lambda i, j: X1[i, j] - 2.0 * X2[i, j], name="Y")
    s = asc.create_schedule(Y)
    src = asc.emit(s, [X1, X2, Y])
    params = _params(src, "default_function")
    assert len(set(params)) == 3, params
    compile_strict(src, "c", tmp_path)
    a, b = rng(14).uniform(-1, 1, (2, 3, 8)).astype(np.float32)
    case = Case(s, [X1, X2, Y], [a, b], [a - 2 * b])
    case.check(run_built(case))


@pytest.mark.requires("gcc")
def test_tensor_named_like_the_function_and_like_loop_variables(tmp_path: Path) -> None:
    X = asc.placeholder((4, 6), name="default_function")
    Z = asc.placeholder((4, 6), name="Y_i")  # what loop variable Y.i becomes in C
    Y = asc.compute((4, 6), lambda i, j: X[i, j] + Z[i, j] * 3.0, name="Y")
    s = asc.create_schedule(Y)
    compile_strict(asc.emit(s, [X, Z, Y]), "c", tmp_path)
    a, b = rng(15).uniform(-1, 1, (2, 4, 6)).astype(np.float32)
    case = Case(s, [X, Z, Y], [a, b], [a + 3 * b])
    case.check(run_built(case))


HOSTILE_FUNCTION_NAMES = ['A; system("rm -rf /"); //', "int", "1abc", "my kernel!", "kernel", "main", "é",
                          "*/ int evil; /*", "f" * 120, "__time"]
TAKEN_FUNCTION_NAMES = ["exp", "free", "time", "r", "linux"]


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("func", HOSTILE_FUNCTION_NAMES + TAKEN_FUNCTION_NAMES,
                         ids=[ascii(n)[1:-1][:30] for n in HOSTILE_FUNCTION_NAMES + TAKEN_FUNCTION_NAMES])
def test_hostile_function_names(func: str, tmp_path: Path) -> None:
    s, args, case = _elementwise("X", "Y")
    src = asc.emit(s, args, name=func)
    compile_strict(src, "c", tmp_path)
    if func in HOSTILE_FUNCTION_NAMES and func not in C_RESERVED:
        _assert_not_in_code(src, func)
    if func in ("exp", "free", "time", "linux"):  # declared by the included headers: renamed
        assert not re.search(rf"^int {func}\(", src, re.M)
    assert not re.search(rf"^int ({'|'.join(sorted(C_RESERVED))})\(", src, re.M)
    f = asc.build(s, args, name=func)
    KEEP_ALIVE.append(f)
    assert _is_identifier(f.name) and f.name not in C_RESERVED
    outs = case.outputs()
    f(*case.inputs, *outs)
    case.check(outs)


@pytest.mark.requires("gcc")
def test_first_line_is_a_comment_and_the_symbol_loads() -> None:
    s, args, case = _elementwise("X", "Y")
    for func in ("my kernel!", "*/ int evil; /*", "x\n#include <stdio.h>"):
        src = asc.emit(s, args, name=func)
        first = src.splitlines()[0]
        assert first.startswith("/*") and first.endswith("*/") and first.count("*/") == 1, first
        assert "int evil;" not in src and "<stdio.h>" not in src
    f = asc.build(s, args, name="my kernel!")
    KEEP_ALIVE.append(f)
    outs = case.outputs()
    f(*case.inputs, *outs)
    case.check(outs)
    assert IDENT.fullmatch(f.name)
    assert f"int {f.name}(" in asc.emit(s, args, name="my kernel!")


@pytest.mark.requires("gcc")
def test_gcc_if_conversion_workaround() -> None:
    """A padded conv whose padding is inlined (a guarded load inside the reduction): gcc 12.2 with
    -O3 -march=native on AVX-512 computed wrong values until the C target turned off loop
    if-conversion. Hypothesis found it (conv2d_nchw(1,1,3,3,1,2,1,1,2,1), pad inlined)."""
    wl = asc.get_workload("conv2d_nchw", (1, 1, 3, 3, 1, 2, 1, 1, 2, 1))
    s = asc.create_schedule(wl.outputs)
    s.stages["pad"].compute_inline()
    f = asc.build(s, wl.tensors(), "c")
    KEEP_ALIVE.append(f)
    data, kernel = wl.random_inputs(0)
    out = np.zeros(wl.outputs[0].shape, np.float32)
    f(data, kernel, out)
    np.testing.assert_allclose(out, wl.reference(data, kernel)[0], rtol=1e-5, atol=1e-5)
