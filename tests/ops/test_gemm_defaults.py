"""The untuned defaults of dense layers and batched products (``dense``, ``fused_dense``,
``batch_matmul``, ``fused_batch_matmul``, ``matmul`` with B transposed): hand-written
register-blocked schedules, built with gcc and checked against numpy on dividing and
non-dividing shapes (1 and primes included), and through ``build_network`` on the ``A @ B.T`` /
``A @ B`` forms an ONNX model's Gemm and MatMul nodes become, against onnxruntime."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from schedule_cases import check_against_reference

import autosched as asc
from autosched.ops import get_workload
from autosched.ops.schedules import PANEL_BYTES, default_schedule, has_hand_written
from autosched.schedule.steps import AnnotateStep, CacheReadStep, RfactorStep

#: (workload, args, target): threads alternate so both loop nests are built
CASES: list[tuple[str, tuple[Any, ...], str]] = [
    ("dense", (1, 13, 37), "c -num-threads=1"),
    ("dense", (7, 13, 19), "c -num-threads=2"),
    ("fused_dense", (1, 17, 64, ""), "c -num-threads=2"),
    ("fused_dense", (1, 1, 1, "bias,sigmoid"), "c -num-threads=1"),
    ("fused_dense", (7, 13, 19, "bias,add,gelu"), "c -num-threads=1"),
    ("fused_dense", (31, 29, 67, "bias,relu"), "c -num-threads=2"),
    ("batch_matmul", (2, 1, 19, 5), "c -num-threads=1"),
    ("batch_matmul", (3, 7, 17, 8), "c -num-threads=2"),
    ("batch_matmul", (2, 7, 257, 256), "c -num-threads=2"),  # B over PANEL_BYTES: packed per column block
    ("fused_batch_matmul", (2, 16, 16, 8, ""), "c -num-threads=1"),
    ("fused_batch_matmul", (1, 7, 1, 3, "bias"), "c -num-threads=2"),
    ("fused_batch_matmul", (3, 13, 11, 7, "add,sigmoid"), "c -num-threads=2"),
    ("matmul", (1, 23, 17, "float32", True), "c -num-threads=1"),  # A @ B.T: the dense tile
    ("matmul", (13, 29, 64, "float32", True), "c -num-threads=2"),
]
NAMES = {
    "matmul": "autosched.ops.schedules.matmul_bt_cpu",
    "dense": "autosched.ops.schedules.dense_cpu",
    "fused_dense": "autosched.graph.fused.fused_dense_cpu",
    "batch_matmul": "autosched.ops.schedules.batch_matmul_cpu",
    "fused_batch_matmul": "autosched.graph.fused.fused_batch_matmul_cpu",
    "fused_dense_packed": "autosched.graph.dense_packed.fused_dense_packed_cpu",
}


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(("name", "args", "target"), CASES, ids=[f"{c[0]}{c[1]}" for c in CASES])
def test_the_default_is_hand_written_and_matches_numpy(name: str, args: tuple[Any, ...], target: str) -> None:
    wl = get_workload(name, args)
    schedule, how = default_schedule(wl, target)
    assert how == NAMES[name] and has_hand_written(wl)  # so asc.tune measures it first
    annotations = {s.annotation for s in schedule.steps if isinstance(s, AnnotateStep)}
    assert {"vectorize", "unroll"} <= annotations
    # the dense forms and A @ B.T read both operands along k: the vector lanes run over the reduction
    reads_along_k = name.endswith("dense") or name == "matmul"
    assert any(isinstance(s, RfactorStep) for s in schedule.steps) == reads_along_k
    b_bytes = args[2] * args[3] * 4 if "batch_matmul" in name else 0  # (batch, M, N, K, ...)
    packed = any(isinstance(s, CacheReadStep) for s in schedule.steps)
    assert packed == (b_bytes > PANEL_BYTES and args[1] > 6)
    check_against_reference(wl, schedule, target, seed=3)


def _gemm_model() -> Any:
    """Gemm with B transposed and not, MatMul by a constant (3-D input), a batched MatMul of two
    computed values with one transposed (attention's Q @ K.T), each with its epilogue."""
    gm = pytest.importorskip("graph_models", reason="needs onnx (pip install onnx)")
    m = gm.ModelWriter(11)
    y = m.node("Gemm", ["x", m.const((5, 19)), m.const((5,))], transB=1)  # (7, 5)
    y = m.node("Relu", [m.node("Gemm", [y, m.const((5, 13)), m.const((13,))])])  # (7, 13)
    m.inits.append(gm.numpy_helper.from_array(np.array([1, 7, 13], np.int64), "rows"))
    q = m.node("MatMul", [m.node("Reshape", [y, "rows"]), m.const((13, 6))])  # (1, 7, 6)
    k = m.node("MatMul", [m.node("Reshape", [y, "rows"]), m.const((13, 6))])
    scores = m.node("MatMul", [q, m.node("Transpose", [k], perm=[0, 2, 1])])  # (1, 7, 7)
    out = m.node("Sigmoid", [m.node("Add", [scores, m.const((7,))])])
    return m.model({"x": (7, 19)}, out, (1, 7, 7), "gemms")


@pytest.mark.requires("gcc")
def test_gemm_and_matmul_nodes_run_the_hand_written_defaults_and_match_onnxruntime() -> None:
    ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")
    model = _gemm_model()
    graph = asc.from_onnx(model)
    net = asc.build_network(graph)
    kinds = sorted({b.task.workload.name for b in net.built} & set(NAMES))
    assert kinds == ["fused_batch_matmul", "fused_dense_packed"]  # constant weights: packed on a CPU
    assert all(default_schedule(b.task.workload, b.task.target)[1] == NAMES[b.task.workload.name]
               for b in net.built if b.task.workload.name in NAMES)
    x = np.random.default_rng(2).standard_normal((7, 19)).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    np.testing.assert_allclose(net(x), want, rtol=1e-4, atol=1e-5)
