"""The vectorization pass decides, once, which ``vectorized`` loops become vector nodes for a
dialect's capabilities (C vector extensions, CUDA ``float4``, OpenCL ``vloadN``): contiguous loads,
broadcasts, gathers, register-wide chunks and scalar tails, symbolic extents, and the loops each
dialect cannot print as vectors, which stay loops. The C programs it shapes build and compute
numpy's answer."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import autosched as asc
from autosched.emit_c.vector import c_caps
from autosched.emit_cuda.vector import CUDA_CAPS
from autosched.emit_opencl.vector import OPENCL_CAPS
from autosched.expr import BinOp, Expr, Var
from autosched.lower import lower
from autosched.lower.ir import BufLoad, For, Stmt, Store, format_stmt, stmt_children
from autosched.lower.vector_ir import Broadcast, Extract, Lanes, VecLoad, VecOp, VecStore
from autosched.lower.vectorize import VectorCaps, vectorize

C16 = c_caps(16)  # 4 float32 lanes per vector


def _program(n: int, value: Callable, split: int | None = None, gpu: bool = False) -> Stmt:
    """The lowered body of ``Z[i, j] = value(X, i, j)`` over (8, n), its inner loop vectorized
    (split by ``split`` first when given; the outer loops bound to threads for GPU dialects)."""
    x = asc.placeholder((8, 64), name="X")
    z = asc.compute((8, n), lambda i, j: value(x, i, j), name="Z")
    s = asc.create_schedule(z.op)
    i, j = s[z].op.axis
    if split is not None:
        jo, j = s[z].split(j, split)
        if gpu:
            s[z].bind(i, asc.thread_axis("blockIdx.x"))
            s[z].bind(jo, asc.thread_axis("threadIdx.x"))
    s[z].vectorize(j)
    return lower(s, [x, z], gpu=gpu).body


def _nodes(s: Stmt) -> list[Stmt]:
    return [s, *(n for c in stmt_children(s) for n in _nodes(c))]


def _vector_stores(s: Stmt) -> list[VecStore]:
    return [n for n in _nodes(s) if isinstance(n, VecStore)]


def _vectorized_loops(s: Stmt) -> list[For]:
    return [n for n in _nodes(s) if isinstance(n, For) and n.kind == "vectorized"]


def test_whole_vectors_are_one_wide_store_of_contiguous_loads_and_broadcasts() -> None:
    body = vectorize(_program(16, lambda x, i, j: x[i, j] * x[i, 0] + 1.0), C16)
    assert not _vectorized_loops(body)
    (store,) = _vector_stores(body)
    assert store.index.lanes == 16 and store.index.stride == 1
    assert isinstance(store.value, VecOp) and store.value.op == "add"
    mul, one = store.value.args
    assert isinstance(one, Broadcast) and isinstance(mul, VecOp)
    load, invariant = mul.args
    assert isinstance(load, VecLoad) and load.index.stride == 1 and load.aligned
    assert isinstance(invariant, Broadcast) and isinstance(invariant.value, BufLoad)
    assert "Z[ramp(" in "\n".join(format_stmt(body))


def test_an_extent_splits_into_halving_vectors_and_a_scalar_tail() -> None:
    body = vectorize(_program(7, lambda x, i, j: x[i, j] + 1.0), C16)
    assert [s.index.lanes for s in _vector_stores(body)] == [4, 2]
    scalar = [n for n in _nodes(body) if isinstance(n, Store)]
    assert len(scalar) == 1 and not _vectorized_loops(body)


def test_strided_and_non_affine_loads_are_gathers_where_the_dialect_has_them() -> None:
    strided = _program(8, lambda x, i, j: x[i, j * 2])
    (store,) = _vector_stores(vectorize(strided, C16))
    assert isinstance(store.value, VecLoad) and store.value.index.stride == 2
    non_affine = _program(8, lambda x, i, j: x[i, j * j])
    (store,) = _vector_stores(vectorize(non_affine, C16))
    assert isinstance(store.value, Lanes) and len(store.value.values) == 8
    gpu_strided = _program(16, lambda x, i, j: x[i, j * 2], split=4, gpu=True)
    assert len(_vectorized_loops(vectorize(gpu_strided, OPENCL_CAPS))) == 1  # OpenCL: no gathers


def test_many_vectors_loop_and_a_symbolic_extent_ends_in_a_scalar_remainder() -> None:
    body = vectorize(_program(64, lambda x, i, j: x[i, j] + 1.0), C16)  # 16 vectors > 8
    loops = [n for n in _nodes(body) if isinstance(n, For) and n.var.name.endswith(".vec")]
    assert len(loops) == 1 and loops[0].extent == 16 and loops[0].kind == "serial"
    n = asc.size_var("n")
    x = asc.placeholder((n,), name="X")
    z = asc.compute((n,), lambda i: x[i] * 2.0, name="Z")
    s = asc.create_schedule(z.op)
    s[z].vectorize(s[z].op.axis[0])
    body = vectorize(lower(s, [x, z]).body, C16)
    chunks, rest = [n for n in _nodes(body) if isinstance(n, For)]
    assert chunks.var.name.endswith(".vec") and isinstance(chunks.body, VecStore)
    assert rest.kind == "serial" and isinstance(rest.body, Store)


def test_each_dialect_keeps_the_loops_it_cannot_print_as_vectors() -> None:
    exp = _program(16, lambda x, i, j: asc.exp(x[i, j]), split=4, gpu=True)
    assert _vector_stores(vectorize(exp, c_caps(16)))  # C: a per-lane math helper
    assert len(_vectorized_loops(vectorize(exp, OPENCL_CAPS))) == 1  # OpenCL: no vector math
    odd = _program(12, lambda x, i, j: x[i, j] + 1.0, split=3, gpu=True)
    assert len(_vectorized_loops(vectorize(odd, OPENCL_CAPS))) == 1  # no 3-lane vloads
    shifted = _program(16, lambda x, i, j: x[i, j + 1], split=4, gpu=True)
    assert len(_vectorized_loops(vectorize(shifted, CUDA_CAPS))) == 0  # the store is aligned
    int_loop = VectorCaps(dtypes=frozenset({"int32"}), lanes=(4,))
    assert len(_vectorized_loops(vectorize(shifted, int_loop))) == 1  # no float stores


def test_cuda_computes_lane_by_lane_with_only_aligned_runs_as_float4_loads() -> None:
    body = _program(16, lambda x, i, j: x[i, j] + x[i, j + 1], split=4, gpu=True)
    (store,) = _vector_stores(vectorize(body, CUDA_CAPS))
    assert store.aligned and isinstance(store.value, Lanes) and len(store.value.values) == 4
    lane1 = store.value.values[1]
    assert isinstance(lane1, BinOp) and isinstance(lane1.a, Extract) and lane1.a.lane == 1
    assert isinstance(lane1.b, BufLoad)  # x[i, j + 1] is not aligned: a scalar load per lane


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("n", [7, 16, 64])
def test_vectorized_c_programs_compute_numpys_answer(n: int) -> None:
    """Contiguous loads, a broadcast, gathers, max and exp over a tail (7), one wide store (16) and
    a loop of vectors (64)."""
    x = asc.placeholder((8, 64), name="X")
    def value(i: Var, j: Var) -> Expr:
        return asc.max(x[i, j] * x[i, 0], x[i, j * 3 % 64]) + asc.exp(x[i, j * j % 64])

    z = asc.compute((8, n), value, name="Z")
    s = asc.create_schedule(z.op)
    s[z].vectorize(s[z].op.axis[1])
    assert "asc_float32x4" in asc.emit(s, [x, z], target="c -vector-bytes=16")
    f = asc.build(s, [x, z], "c -vector-bytes=16")
    a = np.random.default_rng(n).random((8, 64), dtype=np.float32)
    out = np.empty((8, n), np.float32)
    f(a, out)
    j = np.arange(n)
    want = np.maximum(a[:, j] * a[:, :1], a[:, (j * 3) % 64]) + np.exp(a[:, (j * j) % 64])
    np.testing.assert_allclose(out, want, rtol=1e-5)
