"""te schedule API parity: store predicates, storage_align, normalize, create_group, intermediate
tensors as arguments, integral float shapes, split(nparts=), thread_axis, lower(simple_mode=)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from te_strict import compile_strict

import autosched as asc
from autosched.lower import lower_loops
from autosched.lower.ir import For, Stmt, stmt_children

pytestmark = pytest.mark.requires("gcc")


def _chain(n: int, m: int) -> tuple[asc.Tensor, ...]:
    A = asc.placeholder((n, m), name="A")
    B = asc.compute((n, m), lambda i, j: A[i, j] + 1, name="B")
    C = asc.compute((n, m), lambda i, j: B[i, j] * 2, name="C")
    D = asc.compute((n, m), lambda i, j: C[i, j] - 3, name="D")
    return A, B, C, D


def _loops(s: Stmt) -> list[For]:
    own = [s] if isinstance(s, For) else []
    return own + [f for x in stmt_children(s) for f in _loops(x)]


@pytest.mark.parametrize("n,m", [(8, 8), (10, 7)])
def test_store_predicate_and_storage_align(n: int, m: int) -> None:
    A, B, C, _ = _chain(n, m)
    s = asc.create_schedule(C.op)
    s[B].storage_align(B.op.axis[0], 16, 3)
    io, ii = s[C].split(C.op.axis[0], factor=4)
    s[C].set_store_predicate(asc.all(C.op.axis[0] < n - 2, C.op.axis[1] >= 1))
    text = str(asc.lower(s, [A, C]))
    assert "B.i * 19" in text  # the row stride of B padded from m to 16k + 3
    a = np.random.default_rng(n).random((n, m)).astype(np.float32)
    c = np.full((n, m), -7.0, np.float32)
    asc.build(s, [A, C])(a, c)
    want = np.full((n, m), -7.0, np.float32)
    want[: n - 2, 1:] = ((a + 1) * 2)[: n - 2, 1:]
    np.testing.assert_allclose(c, want, rtol=1e-6)
    # both are replayable steps that survive a JSON round trip
    data = json.loads(json.dumps(asc.steps_to_json(s.steps)))
    s2 = asc.Schedule.replay([C], asc.steps_from_json(data))
    assert str(asc.lower(s2, [A, C])) == text


def test_store_predicate_and_align_steps_from_untrusted_logs_are_checked() -> None:
    A, B, C, _ = _chain(4, 4)
    good = {
        "kind": "store_predicate",
        "stage": "C",
        "predicate": '["cmp", "lt", ["var", "i", "int32"], ["const", 2, "int32"]]',
    }
    asc.Schedule.replay([C], asc.steps_from_json([good]))
    deep = "[" * 5000 + "]" * 5000
    for text in (
        "not json",
        '["call", "system", [], "int32"]',
        deep,
        '["var", "nope", "int32"]',
        '["const", 1, "int32"]',
    ):
        step = asc.steps_from_json([{**good, "predicate": text}])
        with pytest.raises(asc.ScheduleError, match="store_predicate"):
            asc.Schedule.replay([C], step)
    with pytest.raises(ValueError, match="factor"):
        asc.steps_from_json(
            [{"kind": "storage_align", "stage": "B", "axis": "i", "factor": "16", "offset": 1}]
        )
    for factor, offset in ((0, 0), (8, 8), (8, -1)):
        step = asc.steps_from_json(
            [{"kind": "storage_align", "stage": "B", "axis": "i", "factor": factor, "offset": offset}]
        )
        with pytest.raises(asc.ScheduleError, match="storage_align"):
            asc.Schedule.replay([C], step)
    with pytest.raises(asc.ScheduleError, match="tensor reads|not A"):
        asc.create_schedule(C.op)[C].set_store_predicate(A[0, 0] > 0)


def test_normalize_and_create_group_compute_at() -> None:
    n, m = 10, 6
    A, B, C, D = _chain(n, m)
    s = asc.create_schedule(D.op)
    assert s.normalize() is s
    g = s.create_group(outputs=C, inputs=A)
    assert g.members == ("B", "C")
    assert s.create_group(outputs=C, inputs=B, include_inputs=True).members == ("B", "C")
    assert s.create_group(outputs=C, inputs=B).members == ("C",)
    do, di = s[D].split(D.op.axis[0], factor=4)
    g.compute_at(s[D], do)
    assert s[B].attach == ("at", "D", "i.outer") and s[C].attach == ("at", "D", "i.outer")
    a = np.random.default_rng(0).random((n, m)).astype(np.float32)
    d = np.zeros_like(a)
    asc.build(s, [A, D])(a, d)
    np.testing.assert_allclose(d, (a + 1) * 2 - 3, rtol=1e-6)
    s2 = asc.Schedule.replay([D], s.steps)  # a group is recorded as ordinary steps
    assert str(asc.lower(s2, [A, D])) == str(asc.lower(s, [A, D]))


@pytest.mark.parametrize("n,m", [(8, 8), (9, 5)])
def test_intermediate_tensors_as_arguments(n: int, m: int) -> None:
    A, B, C, D = _chain(n, m)
    s = asc.create_schedule(D.op)
    do, di = s[D].split(D.op.axis[0], factor=4)
    s[C].compute_at(s[D], do)
    s[B].compute_inline()
    a = np.random.default_rng(n).random((n, m)).astype(np.float32)
    b, c, d = (np.zeros_like(a) for _ in range(3))
    asc.build(s, [A, B, C, D])(a, b, c, d)
    np.testing.assert_allclose(b, a + 1, rtol=1e-6)
    np.testing.assert_allclose(c, (a + 1) * 2, rtol=1e-6)
    np.testing.assert_allclose(d, (a + 1) * 2 - 3, rtol=1e-6)


def test_integral_float_shapes_and_split_nparts() -> None:
    N, bn, K = 12, 4, 5
    A = asc.placeholder((N / bn, K, bn), name="A")
    k = asc.reduce_axis((0, K / 1), "k")
    assert A.shape == (3, 5, 4)
    B = asc.compute((N / bn, bn), lambda x, y: asc.sum(A[x, k, y], axis=k), name="B")
    a = np.random.default_rng(0).random((3, 5, 4)).astype(np.float32)
    b = np.zeros((3, 4), np.float32)
    asc.build(asc.create_schedule(B.op), [A, B])(a, b)
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-5)
    with pytest.raises(ValueError, match="not a whole number.*N // bn"):
        asc.placeholder((N / 5, 3), name="Q")
    X = asc.placeholder((100,), name="X")
    Y = asc.compute((100,), lambda i: X[i] * 2, name="Y")
    s = asc.create_schedule(Y.op)
    yo, yi = s[Y].split(Y.op.axis[0], nparts=32)
    s[Y].parallel(yo)
    outer = [f for f in _loops(lower_loops(s, [X, Y]).loops) if f.var.name == "Y.i.outer"]
    assert [f.extent for f in outer] == [32]  # as TVM: nparts outer iterations of ceil(100/32)
    assert [f.extent for f in _loops(lower_loops(s, [X, Y]).loops) if f.var.name == "Y.i.inner"] == [4]
    x = np.arange(100, dtype=np.float32)
    y = np.zeros_like(x)
    asc.build(s, [X, Y])(x, y)
    np.testing.assert_array_equal(y, 2 * x)


def test_thread_axis_signatures_and_cpu_bind_error() -> None:
    tx = asc.thread_axis((0, 32), "threadIdx.x", name="tx")
    assert tx.tag == "threadIdx.x" and tx.var.name == "tx" and tx.extent == 32
    bx = asc.thread_axis("blockIdx.x")
    assert bx.tag == "blockIdx.x" and bx.var.name == "blockIdx.x"
    with pytest.raises(asc.ScheduleError, match="thread_axis"):
        asc.thread_axis((1, 4), "threadIdx.x")
    A, B, _, _ = _chain(64, 4)
    s = asc.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(xo, bx)
    s[B].bind(xi, tx)
    with pytest.raises(asc.ScheduleError, match="bind needs a GPU target"):
        asc.build(s, [A, B])
    s = asc.create_schedule(B.op)
    text = str(asc.lower(s, [A, B], simple_mode=True))
    assert text.startswith("func default_function")


def test_parity_constructs_build_as_strict_c99(tmp_path: Path) -> None:
    A, B, C, D = _chain(9, 7)
    s = asc.create_schedule(D.op)
    s[B].storage_align(B.op.axis[0], 8, 1)
    s[D].set_store_predicate(D.op.axis[1] < 5)
    do, _ = s[D].split(D.op.axis[0], nparts=4)
    s[C].compute_at(s[D], do)
    compile_strict(s, [A, C, D], tmp_path)
