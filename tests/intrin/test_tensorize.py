"""tensorize / decl_tensor_intrin: user intrinsics with C bodies (TVM's GEMV tutorial shape), the
(body, reset, update) split across an outer reduction loop, partial tiles, the region check's
errors, strict builds, and replay of the recorded step. Results are checked against numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from te_strict import compile_strict

import autosched as asc
from autosched.runner.compile import compile_object
from autosched.target import Target

GEMV_BODY = """\
  for (int i = 0; i < 16; ++i) {
    float acc = 0.0f;
    for (int k = 0; k < L; ++k) acc += a[k] * b[i * s1 + k];
    c[i] = acc;
  }"""
GEMV_RESET = "  for (int i = 0; i < 16; ++i) c[i] = 0.0f;"
GEMV_UPDATE = """\
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < L; ++k) c[i] += a[k] * b[i * s1 + k];"""


def gemv_intrin(
    l_ext: int, parts: tuple[str | None, str | None, str | None], m: int = 16
) -> asc.TensorIntrin:
    """TVM's tutorial GEMV: c[i] = sum(a[k] * b[i, k]) with b's row stride a variable ``s1``."""
    a = asc.placeholder((l_ext,), name="a")
    b = asc.placeholder((m, l_ext), name="b")
    k = asc.reduce_axis((0, l_ext), name="k")
    c = asc.compute((m,), lambda i: asc.sum(a[k] * b[i, k], axis=k), name="c")
    binds = {
        a: asc.decl_buffer(a.shape, a.dtype, name="a", offset_factor=1, strides=[1]),
        b: asc.decl_buffer(b.shape, b.dtype, name="b", offset_factor=1, strides=[asc.var("s1"), 1]),
        c: asc.decl_buffer(c.shape, c.dtype, name="c", offset_factor=1, strides=[1]),
    }
    text = [None if p is None else p.replace("L", str(l_ext)) for p in parts]

    def fcompute(ins: list[asc.intrin.IntrinBuffer], outs: list[asc.intrin.IntrinBuffer]) -> tuple:
        assert [x.name for x in ins] == ["a", "b"] and outs[0].name == "c"  # TVM-style (ins, outs)
        return tuple(text)

    return asc.decl_tensor_intrin(c.op, fcompute, name=f"gemv{m}x{l_ext}", binds=binds)


def gemv_workload(n: int, m: int, l_ext: int) -> tuple[asc.Tensor, asc.Tensor, asc.Tensor]:
    A = asc.placeholder((n, l_ext), name="A")
    B = asc.placeholder((m, l_ext), name="B")
    k = asc.reduce_axis((0, l_ext), name="k")
    C = asc.compute((n, m), lambda i, j: asc.sum(A[i, k] * B[j, k], axis=k), name="C")
    return A, B, C


def run(sched: asc.Schedule, args: list[asc.Tensor], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    A, B, C = args
    a = rng.standard_normal([int(d) for d in A.shape]).astype("float32")
    b = rng.standard_normal([int(d) for d in B.shape]).astype("float32")
    c = np.full([int(d) for d in C.shape], np.nan, "float32")
    asc.build(sched, args)(a, b, c)
    return c, a, b


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("m", [64, 40])  # 40: the last tile of j is partial (guarded fallback)
def test_gemv_intrin_matches_numpy(m: int) -> None:
    A, B, C = gemv_workload(6, m, 24)
    s = asc.create_schedule(C.op)
    xo, yo = s[C].op.axis
    yo, yi = s[C].split(yo, factor=16)
    s[C].tensorize(yi, gemv_intrin(24, (GEMV_BODY, None, None)))
    src = asc.emit(s, [A, B, C])
    assert src.count("static inline void asc_intrin_gemv16x24") == 1
    c, a, b = run(s, [A, B, C])
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5, atol=1e-5)


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("l_ext", [64, 70])  # 70: the last k tile is partial
def test_reset_update_across_an_outer_reduction_loop(l_ext: int) -> None:
    A, B, C = gemv_workload(5, 48, l_ext)
    s = asc.create_schedule(C.op)
    x, y = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    yo, yi = s[C].split(y, factor=16)
    ko, ki = s[C].split(k, factor=16)
    s[C].reorder(x, yo, ko, yi, ki)
    s[C].tensorize(yi, gemv_intrin(16, (None, GEMV_RESET, GEMV_UPDATE)))
    ir = str(asc.lower(s, [A, B, C]))
    assert "_update(" in ir and "_reset(" not in ir  # autosched's init loop runs before ko
    c, a, b = run(s, [A, B, C])
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-4, atol=1e-4)


@pytest.mark.requires("gcc")
def test_reset_then_update_when_the_region_holds_the_whole_reduction() -> None:
    A, B, C = gemv_workload(3, 32, 20)
    s = asc.create_schedule(C.op)
    _, y = s[C].op.axis
    _, yi = s[C].split(y, factor=16)
    s[C].tensorize(yi, gemv_intrin(20, (None, GEMV_RESET, GEMV_UPDATE)))
    ir = str(asc.lower(s, [A, B, C]))
    assert ir.index("_reset(") < ir.index("_update(")
    c, a, b = run(s, [A, B, C])
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-5, atol=1e-5)


@pytest.mark.requires("gcc")
def test_elementwise_intrin_with_a_partial_tail() -> None:
    n = 4 * 8 + 3
    X = asc.placeholder((3, n), name="X")
    Y = asc.placeholder((3, n), name="Y")
    Z = asc.compute((3, n), lambda i, j: X[i, j] * 2.0 + Y[i, j], name="Z")
    x = asc.placeholder((8,), name="x")
    y = asc.placeholder((8,), name="y")
    z = asc.compute((8,), lambda i: x[i] * 2.0 + y[i], name="z")
    axpy = asc.decl_tensor_intrin(z.op, "  for (int i = 0; i < 8; ++i) z[i] = 2.0f * x[i] + y[i];")
    s = asc.create_schedule(Z.op)
    _, j = s[Z].op.axis
    _, ji = s[Z].split(j, factor=8)
    s[Z].tensorize(ji, axpy)
    rng = np.random.default_rng(1)
    xv, yv = (rng.standard_normal((3, n)).astype("float32") for _ in range(2))
    zv = np.zeros((3, n), "float32")
    asc.build(s, [X, Y, Z])(xv, yv, zv)
    np.testing.assert_allclose(zv, 2 * xv + yv, rtol=1e-6)


def _gemv_schedule(
    factor: int = 16, op: str = "mul", transposed: bool = False
) -> tuple[asc.Schedule, list[asc.Tensor]]:
    A = asc.placeholder((4, 32), name="A")
    B = asc.placeholder((32, 32), name="B")
    k = asc.reduce_axis((0, 32), name="k")

    def body(i, j):  # type: ignore[no-untyped-def]
        rhs = B[k, j] if transposed else B[j, k]
        return asc.sum(A[i, k] * rhs if op == "mul" else A[i, k] + rhs, axis=k)

    C = asc.compute((4, 32), body, name="C")
    s = asc.create_schedule(C.op)
    _, y = s[C].op.axis
    _, yi = s[C].split(y, factor=factor)
    s[C].tensorize(yi, gemv_intrin(32, (GEMV_BODY, None, None)))
    return s, [A, B, C]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"factor": 8}, r"axis j: extent 8 in the region vs 16 in the intrinsic's axis i"),
        ({"op": "add"}, r"the region computes .*'add' vs 'mul'"),
        ({"transposed": True}, r"B moves by 32 per step of loop k.inner|B moves by 32 per step of loop k"),
    ],
)
def test_a_mismatched_region_is_one_clear_error(kwargs: dict, message: str) -> None:
    s, args = _gemv_schedule(**kwargs)
    with pytest.raises(asc.ScheduleError, match=message) as err:
        asc.lower(s, args)
    assert "tensorize C at j.inner with gemv16x32" in str(err.value)
    assert "\n" not in str(err.value)


def test_bad_declarations_are_refused() -> None:
    x = asc.placeholder((4,), name="x")
    y = asc.compute((4,), lambda i: x[i] + 1.0, name="y")
    with pytest.raises(ValueError, match="must be a C identifier"):
        asc.decl_tensor_intrin(y.op, "", binds={x: asc.decl_buffer((4,), name="x; system(0)")})
    with pytest.raises(ValueError, match="give a body, or an update"):
        asc.decl_tensor_intrin(y.op, (None, "y[0] = 0;", None))
    n = asc.size_var("n")
    v = asc.placeholder((n,), name="v")
    w = asc.compute((n,), lambda i: v[i], name="w")
    with pytest.raises(ValueError, match="must be fixed"):
        asc.decl_tensor_intrin(w.op, "")
    s = asc.create_schedule(y.op)
    with pytest.raises(asc.ScheduleError, match="no loop 'nope'"):
        s[y].tensorize("nope", asc.decl_tensor_intrin(y.op, "  y[0] = x[0];", name="copy4"))


def test_tensorize_replays_from_its_recorded_steps() -> None:
    s, args = _gemv_schedule()
    data = asc.steps_to_json(s.steps)
    assert data[-1] == {"kind": "tensorize", "stage": "C", "axis": "j.inner", "intrin": "gemv16x32"}
    again = asc.Schedule.replay(s.source_outputs, asc.steps_from_json(data))
    assert str(asc.lower(again, args)) == str(asc.lower(s, args))


@pytest.mark.requires("gcc")
def test_werror_and_strict_c99_builds(tmp_path: Path) -> None:
    s, args = _gemv_schedule()
    src = asc.emit(s, args)
    compile_object(src, Target.parse("c"), tmp_path / "k.o", extra_flags=["-Wall", "-Wextra", "-Werror"])
    compile_strict(s, args, tmp_path)
