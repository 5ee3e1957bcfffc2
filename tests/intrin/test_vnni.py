"""Dot-product intrinsics through tensorize: the packed layout, the portable C path (bit-exact on any
CPU), AVX-512 VNNI and AVX512-BF16 where the CPU has them, the target's -mattr, and kernels or
records needing an extension this CPU lacks."""

from __future__ import annotations

import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import autosched as asc
from autosched.hardware import ISA_FLAGS
from autosched.intrin.by_name import library_intrin
from autosched.intrin.dot import dot_intrin, numpy_reference, pack_b, packed_tensors
from autosched.intrin.isa import host_extensions, steps_extensions, target_extensions
from autosched.intrin.lowp import matmul_lowp, pick_path
from autosched.lower.tensorize import TensorizeError
from autosched.records import Record, RecordWarning, append_records, best_record
from autosched.runner.load import LoadError, kernel_extensions
from autosched.runner.measure import MeasureInput, MeasureResult
from autosched.schedule.steps import TensorizeStep
from autosched.target import Target, TargetError
from autosched.task import Task
from autosched.te.intrin import INTRINS, lookup_intrin

RNG = np.random.default_rng(7)


def _int8(m: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    return RNG.integers(0, 256, (m, k)).astype(np.uint8), RNG.integers(-128, 128, (k, n)).astype(np.int8)


def test_pack_b_lays_k_groups_of_16_columns_side_by_side() -> None:
    b = np.arange(8 * 32).reshape(8, 32)
    p = pack_b(b, 4)
    assert p.shape == (2, 2, 16, 4) and p.flags.c_contiguous
    for jo, ko, ji, ki in np.ndindex(*p.shape):
        assert p[jo, ko, ji, ki] == b[ko * 4 + ki, jo * 16 + ji]
    with pytest.raises(ValueError, match="N=20 must divide by 16"):
        pack_b(np.zeros((8, 20)), 4)


def test_panels_of_32_columns_for_the_x86_blocks_of_two_vectors() -> None:
    b = np.arange(4 * 64).reshape(4, 64)
    p = pack_b(b, 2, cols=32)
    assert p.shape == (2, 2, 32, 2)
    for jo, ko, ji, ki in np.ndindex(*p.shape):
        assert p[jo, ko, ji, ki] == b[ko * 2 + ki, jo * 32 + ji]
    for bad in (lambda: pack_b(np.zeros((8, 48)), 4, cols=32), lambda: packed_tensors(8, 48, 8, cols=32),
                lambda: pack_b(np.zeros((8, 64)), 4, cols=64), lambda: dot_intrin("sdot", 4, 16, cols=32),
                lambda: dot_intrin("vnni", 15, 16, cols=32)):  # fmt: skip
        with pytest.raises(ValueError, match="N=48 must divide by 32|cols must|accumulators"):
            bad()
    T = packed_tensors(8, 64, 8, "vnni", cols=32)
    with pytest.raises(ValueError, match="panels of 32 columns have only the dot path"):
        matmul_lowp(T, "c -mattr=avx2", path="avx2")


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("kind", ["vnni", "bf16"])
def test_blocks_of_32_columns_equal_numpy(kind: str) -> None:
    """Two vectors of columns per block (each broadcast of A used twice): the portable path on any
    CPU, and the vector path where the CPU has the extension; partial row blocks, two k blocks."""
    m, n, k = 37, 96, 128
    if kind == "vnni":
        a, b = _int8(m, n, k)
        a[0, :], b[:, 0] = 255, -128
        want = a.astype(np.int32) @ b.astype(np.int32)
    else:
        a = RNG.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
        b = RNG.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
        want = a.astype(np.float32) @ b.astype(np.float32)
    group = 4 if kind == "vnni" else 2
    T = packed_tensors(m, n, k, kind, cols=32)
    paths = ["portable"] + (["dot"] if pick_path(kind) == "dot" else [])
    for path in paths:
        s = matmul_lowp(T, "c -num-threads=2", path=path, mr=6, kc=64)
        f = asc.build(s, T, "c -num-threads=2")
        c = np.zeros((m, n), want.dtype)
        f(a, pack_b(b, group, cols=32), c)
        tol = 0 if kind == "vnni" else 1e-4
        np.testing.assert_allclose(c, want, rtol=tol / 10, atol=tol)
        suffix = "_n32" + ("_portable" if path == "portable" else "")
        assert any(st.kind == "tensorize" and st.intrin.endswith(suffix) for st in s.steps)


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("m, kc", [(40, 64), (13, 128)])  # two k blocks (update), partial row tiles
def test_portable_vnni_path_is_bit_exact(m: int, kc: int) -> None:
    a, b = _int8(m, 48, 128)
    a[0, :] = 255  # extreme values: 255 * -128 products summed
    b[:, 0] = -128
    T = packed_tensors(m, 48, 128, "vnni")
    f = asc.build(matmul_lowp(T, "c -num-threads=1", path="portable", mr=8, kc=kc), T, "c -num-threads=1")
    c = np.zeros((m, 48), np.int32)
    f(a, pack_b(b, 4), c)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))
    assert kernel_extensions(_loaded_path(f)) == ()


@pytest.mark.requires("gcc")
def test_portable_bf16_dot_path_matches_float32_sums() -> None:
    a = RNG.standard_normal((20, 64)).astype(ml_dtypes.bfloat16)
    b = RNG.standard_normal((64, 32)).astype(ml_dtypes.bfloat16)
    T = packed_tensors(20, 32, 64, "bf16")
    f = asc.build(matmul_lowp(T, "c", path="portable", mr=4, kc=32), T, "c")
    c = np.zeros((20, 32), np.float32)
    f(a, pack_b(b, 2), c)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5, atol=1e-4)


def test_a_stage_that_widens_otherwise_does_not_match() -> None:
    A = asc.placeholder((8, 16), "uint8", name="A")
    B = asc.placeholder((1, 4, 16, 4), "int8", name="B")
    ko, ki = asc.reduce_axis(4, name="ko"), asc.reduce_axis(4, name="ki")
    C = asc.compute(
        (8, 16),
        lambda i, j: asc.sum(A[i, ko * 4 + ki].astype("int16") * B[j // 16, ko, j % 16, ki].astype("int16"),
                             axis=[ko, ki]),
        name="C",
    )  # fmt: skip
    s = asc.create_schedule(C.op)
    s[C].tensorize(C.op.axis[0], dot_intrin("vnni", 8, 16, portable=True))
    with pytest.raises(TensorizeError, match="int16 vs int32"):
        asc.lower(s, [A, B, C])


def test_dot_intrin_rejects_bad_shapes_in_one_line() -> None:
    with pytest.raises(ValueError, match="kc must be a positive multiple of 4 for vnni, got 30"):
        dot_intrin("vnni", 8, 30)
    with pytest.raises(ValueError, match=r"mr must be an int in \[1, 28\]"):
        dot_intrin("bf16", 40, 32)
    with pytest.raises(ValueError, match="N=40 must divide by 16"):
        packed_tensors(8, 40, 64)


def test_target_mattr_says_which_extensions_kernels_may_use() -> None:
    assert target_extensions(Target.parse("c -mattr=+avx512_vnni")) == ("avx512_vnni",)
    assert target_extensions(Target.parse("c -mattr=none")) == ()
    t = Target.parse("c -mattr=amx_tile,amx_int8,avx512_vnni")
    assert Target.parse(str(t)) == t and "-mattr=amx_int8,amx_tile,avx512_vnni" in str(t)
    assert pick_path("vnni", t) == "amx" and pick_path("bf16", t) == "portable"
    assert pick_path("vnni", "c -mattr=avx512_vnni") == "dot"
    assert pick_path("vnni", "c -mattr=none") == "portable"
    with pytest.raises(TargetError, match=r"unknown CPU extension\(s\) \['amx'\]"):
        Target.parse("c -mattr=amx")
    host = set(target_extensions(Target.parse("c")))
    lowp = {"avx2", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16"}
    assert host == host_extensions() & lowp
    assert pick_path("vnni", "c -mattr=avx2") == "avx2"  # an x86 CPU without VNNI
    assert pick_path("vnni", "c -mattr=avx2,avx512_vnni") == "dot"
    assert pick_path("bf16", "c -mattr=avx2") == "portable"


def _loaded_path(f: object) -> str:
    from autosched.runner.load import _LOADED

    return next(key[0] for key, (_, lib) in _LOADED.items() if lib is f._lib)  # type: ignore[attr-defined]


def _lacking() -> str:
    return sorted(ISA_FLAGS - host_extensions() - {"neon", "asimd"})[0]


def _needing(ext: str) -> asc.TensorIntrin:
    x = asc.placeholder((4,), name="x")
    y = asc.compute((4,), lambda i: x[i] * 2.0, name="y")
    body = "for (int i = 0; i < 4; ++i) y[i] = x[i] * 2.0f;"
    return asc.decl_tensor_intrin(y.op, body, name=f"double4_{ext}", requires=(ext,))


@pytest.mark.requires("gcc")
def test_a_kernel_needing_an_extension_this_cpu_lacks_refuses_to_load() -> None:
    ext = _lacking()
    X = asc.placeholder((8,), name="X")
    Y = asc.compute((8,), lambda i: X[i] * 2.0, name="Y")
    s = asc.create_schedule(Y.op)
    s[Y].tensorize(s[Y].split(Y.op.axis[0], 4)[1], _needing(ext))
    assert f'asc_cpu_extensions[] = "{ext}"' in asc.emit(s, [X, Y], target="c")
    with pytest.raises(LoadError, match=rf"uses CPU extension\(s\) {ext}, which this CPU lacks"):
        asc.build(s, [X, Y], target="c")


def test_records_needing_a_missing_extension_are_passed_over(tmp_path: Path) -> None:
    task = Task("matmul", (8, 8, 8), target="c -num-threads=1")
    (C,) = task.workload.outputs
    plain = asc.create_schedule(C.op)
    plain[C].split(C.op.axis[0], 4)
    fancy = asc.create_schedule(C.op)
    ext = _lacking()
    fancy[C].tensorize(fancy[C].split(C.op.axis[1], 4)[1], _needing(ext))  # replays; needs ext to run
    steps = fancy.steps
    assert steps_extensions(steps) == (ext,)
    log = tmp_path / "log.jsonl"
    fast = Record.from_measure(MeasureInput(task, steps), MeasureResult((1e-6,)))
    slow = Record.from_measure(MeasureInput(task, plain.steps), MeasureResult((1e-3,)))
    append_records(log, [fast, slow])
    with pytest.warns(RecordWarning, match=rf"need CPU extension\(s\) {ext}, which this CPU lacks"):
        assert best_record(log, task).steps == tuple(plain.steps)


@pytest.mark.requires("gcc", "avx512_vnni")
def test_vnni_kernel_is_bit_exact_and_names_its_extension() -> None:
    a, b = _int8(70, 64, 256)
    T = packed_tensors(70, 64, 256, "vnni")
    f = asc.build(matmul_lowp(T, "c -num-threads=2", path="dot", mr=12, kc=128), T, "c -num-threads=2")
    c = np.zeros((70, 64), np.int32)
    f(a, pack_b(b, 4), c)
    np.testing.assert_array_equal(c, numpy_reference(a, pack_b(b, 4), "vnni"))
    assert kernel_extensions(_loaded_path(f)) == ("avx512_vnni",)


@pytest.mark.requires("gcc", "avx2")
@pytest.mark.parametrize("m, mr, kc", [(70, 2, 128), (13, 3, 64), (5, 1, 256)])
def test_avx2_int8_kernel_is_bit_exact_and_names_its_extension(m: int, mr: int, kc: int) -> None:
    a, b = _int8(m, 48, 256)  # partial row blocks; one or several k blocks (the update part)
    a[:2, :] = 255  # the largest pair sums: 255 x -128 and 255 x 127, which vpmaddubsw would saturate
    b[:, 0], b[:, 1] = -128, 127
    T = packed_tensors(m, 48, 256, "vnni")
    f = asc.build(matmul_lowp(T, "c -num-threads=2", path="avx2", mr=mr, kc=kc), T, "c -num-threads=2")
    c = np.zeros((m, 48), np.int32)
    f(a, pack_b(b, 4), c)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))
    assert kernel_extensions(_loaded_path(f)) == ("avx2",)
    source = asc.emit(matmul_lowp(T, "c -num-threads=2", path="avx2", mr=mr, kc=kc), T, "c -num-threads=2")
    assert "_mm256_madd_epi16" in source and "maddubs" not in source


@pytest.mark.requires("gcc", "avx2")
@pytest.mark.parametrize(
    "kind, a_range, b_range", [("sdot", (-128, 128), (-128, 128)), ("udot", (0, 256), (0, 256))]
)
def test_avx2_signed_and_unsigned_pairs_are_bit_exact_too(
    kind: str, a_range: tuple[int, int], b_range: tuple[int, int]
) -> None:
    """s8 x s8 and u8 x u8 (the NEON kinds' types) on x86 take the AVX2 path, each operand widened
    by its own sign."""
    assert pick_path(kind, "c -mattr=avx2") == "avx2" and pick_path(kind, "c -mattr=none") == "portable"
    a_type = np.int8 if a_range[0] < 0 else np.uint8
    a = RNG.integers(*a_range, (21, 64)).astype(a_type)
    b = RNG.integers(*b_range, (64, 32)).astype(a_type)
    a[0, :], b[:, 0] = a_range[0] if kind == "sdot" else 255, b_range[0] if kind == "sdot" else 255
    b[:, 1] = b_range[1] - 1
    T = packed_tensors(21, 32, 64, kind)
    f = asc.build(matmul_lowp(T, "c -mattr=avx2", mr=3, kc=32), T, "c -mattr=avx2")
    c = np.zeros((21, 32), np.int32)
    f(a, pack_b(b, 4), c)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))
    assert kernel_extensions(_loaded_path(f)) == ("avx2",)


@pytest.mark.requires("gcc", "avx512_bf16")
def test_avx512_bf16_kernel_matches_float32_sums() -> None:
    a = RNG.standard_normal((33, 128)).astype(ml_dtypes.bfloat16)
    b = RNG.standard_normal((128, 48)).astype(ml_dtypes.bfloat16)
    T = packed_tensors(33, 48, 128, "bf16")
    f = asc.build(matmul_lowp(T, "c", path="dot", mr=8, kc=64), T, "c")
    c = np.zeros((33, 48), np.float32)
    f(a, pack_b(b, 2), c)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-5, atol=1e-4)
    assert kernel_extensions(_loaded_path(f)) == ("avx512_bf16",)


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(
    "kind, target",
    [
        ("vnni", "c -mattr=avx512_vnni"),
        ("bf16", "c -mattr=avx512_bf16"),
        ("vnni", "c -mattr=amx_int8,amx_tile"),
        ("vnni", "c -mattr=avx2"),
    ],
)
def test_x86_dot_and_amx_kernels_build_without_warnings(kind: str, target: str, tmp_path: Path) -> None:
    if Target.parse(target).machine != "x86_64":
        pytest.skip("x86 intrinsics: this host's gcc builds for another architecture")
    T = packed_tensors(64, 32, 128, kind)  # AMX: 32-row blocks
    (tmp_path / "k.c").write_text(asc.emit(matmul_lowp(T, target), T, target))
    flags = [
        *Target.parse(target).cflags(shared=False),
        "-Wall",
        "-Wextra",
        "-Werror",
        "-c",
        "-o",
        str(tmp_path / "k.o"),
    ]
    cc = subprocess.run(["gcc", *flags, str(tmp_path / "k.c")], capture_output=True, text=True, timeout=120)
    assert cc.returncode == 0, cc.stderr  # the vector path compiles (no CPU extension needed to build)


def test_library_intrinsics_are_declared_again_from_their_recorded_names() -> None:
    """A record names its intrinsic; a process that never built the schedule declares it from the
    name (so a tuned record replays anywhere), and a name no pattern reads is not the library's."""
    for name in ("dot_avx2_3x256", "dot_avx2_sdot_2x64", "dot_vnni_8x512", "dot_sdot_4x64_portable",
                 "dot_vnni_8x512_n32", "dot_bf16_6x64_n32_portable",
                 "amx_bf16_32x512", "gemm_ukernel_6x16x256_float32_auto"):  # fmt: skip
        INTRINS.pop(name, None)
        intrin = lookup_intrin(name)
        assert intrin is not None and intrin.name == name and INTRINS[name] is intrin
    assert steps_extensions([TensorizeStep("C", "i.inner", "dot_avx2_2x128")]) == ("avx2",)
    for name in ("dot_avx2_99x128", "dot_vnni_8x30", "dot_avx2_2x128; rm -rf /", "amx_vnni_20x64",
                 "dot_vnni_16x64_n32", "dot_sdot_4x64_n32", "dot_vnni_4x64_n16",
                 "gemm_ukernel_0x16x4_float32_auto", "dot_avx2_02x128"):  # fmt: skip
        assert library_intrin(name) is None, name
