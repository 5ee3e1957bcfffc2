"""``lower``/``emit``/``build`` take the schedule's own tensors only: a tensor made elsewhere that
shares a name with one of them is refused in one line naming the argument, before anything is
lowered or compiled; the schedule's caches, rf stages, tuple outputs and intermediates still pass."""

from __future__ import annotations

import numpy as np
import pytest

import autosched as asc


def _matmul(m: int = 16, n: int = 12, k: int = 8) -> tuple[asc.Tensor, asc.Tensor, asc.Tensor]:
    A = asc.placeholder((m, k), name="A")
    B = asc.placeholder((k, n), name="B")
    r = asc.reduce_axis(k, name="k")
    C = asc.compute((m, n), lambda i, j: asc.sum(A[i, r] * B[r, j], axis=r), name="C")
    return A, B, C


@pytest.mark.parametrize("stage", [asc.lower, asc.emit, asc.build])
def test_a_placeholder_of_the_same_name_is_refused(stage: object) -> None:
    A, B, C = _matmul()
    s = asc.create_schedule(C.op)
    A2 = asc.placeholder((32, 8), name="A")
    refused = r"^argument 0 'A' is not a tensor of this schedule \(another tensor named 'A'\)"
    with pytest.raises(ValueError, match=refused):
        stage(s, [A2, B, C])  # type: ignore[operator]


def test_an_output_of_the_same_name_from_another_dag_is_refused() -> None:
    A, B, C = _matmul()
    _, _, C2 = _matmul()  # the same computation, built again: other objects
    s = asc.create_schedule(C.op)
    with pytest.raises(ValueError, match=r"argument 2 'C' is not a tensor of this schedule \(another"):
        asc.build(s, [A, B, C2])


def test_a_tensor_of_a_name_the_schedule_lacks_is_refused_too() -> None:
    A, B, C = _matmul()
    s = asc.create_schedule(C.op)
    X = asc.placeholder((16, 8), name="X")
    with pytest.raises(ValueError, match=r"^argument 1 'X' is not a tensor of this schedule: pass"):
        asc.lower(s, [A, X, C])


def test_the_refusal_counts_scalar_arguments_in_the_index() -> None:
    A = asc.placeholder((8,), name="A")
    bias = asc.var("bias", dtype="float32")
    B = asc.compute((8,), lambda i: A[i] + bias, name="B")
    s = asc.create_schedule(B.op)
    B2 = asc.compute((8,), lambda i: A[i] * 2.0, name="B")
    with pytest.raises(ValueError, match=r"argument 2 'B' is not a tensor of this schedule"):
        asc.emit(s, [A, bias, B2])


@pytest.mark.requires("gcc")
def test_caches_and_intermediates_the_schedule_returned_still_build() -> None:
    """CC's operation is rewritten by a later cache_read after cache_write returned it: it is the
    schedule's all the same, and so is the original C whose stage now copies from CC."""
    A, B, C = _matmul()
    s = asc.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    s.cache_read(A, "local", [CC])
    f = asc.build(s, [A, B, CC, C])
    rng = np.random.default_rng(0)
    a, b = rng.random((16, 8), dtype=np.float32), rng.random((8, 12), dtype=np.float32)
    cc, c = np.zeros((16, 12), np.float32), np.zeros((16, 12), np.float32)
    f(a, b, cc, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    np.testing.assert_allclose(cc, a @ b, rtol=1e-5)


@pytest.mark.requires("gcc")
def test_operations_sharing_a_name_in_one_dag_are_the_schedules() -> None:
    """te's default names repeat (two unnamed computes): both are tensors of the DAG."""
    A = asc.placeholder((8,), name="A")
    B = asc.compute((8,), lambda i: A[i] + 1.0)
    C = asc.compute((8,), lambda i: B[i] * 2.0)
    assert B.op.name == C.op.name
    f = asc.build(asc.create_schedule(C.op), [A, C])
    a, c = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    f(a, c)
    np.testing.assert_allclose(c, (a + 1) * 2)
