"""Reshapes moved below the elementwise chains after them (autosched.graph.sink_reshape): the chain
fuses into the operator before the reshape, and the network computes what it computed before,
against onnxruntime (3-D MatMul + bias + Erf GELU, + residual Add, + LayerNormalization after) and
against numpy on graphs written by hand (axes that map, axes that do not, uniform constants)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import autosched as asc
from autosched.graph import Graph, extract_tasks
from autosched.graph.sink_reshape import same_axis, sink_reshapes


def _epilogues(graph: Graph, op: str) -> list[str]:
    """The epilogues of the tasks of ``op`` (a dense layer's: packed or not)."""
    names = (op, f"{op}_packed")
    return sorted(t.workload.args[-2] for t in extract_tasks(graph) if t.workload.name in names)


def _run(graph: Graph, *inputs: np.ndarray) -> np.ndarray:
    out = asc.build_network(graph)(*inputs)
    assert isinstance(out, np.ndarray)
    return out


def test_same_axis_needs_equal_extent_and_elements_after() -> None:
    assert same_axis((1, 128, 768), 2, (128, 768), 1)
    assert same_axis((2, 3, 4, 5), 3, (6, 4, 5), 2)
    assert not same_axis((1, 12, 128, 128), 1, (12, 128, 128), 2)
    assert not same_axis((2, 3, 8), 1, (6, 8), 1)


onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")


@pytest.mark.requires("gcc")
def test_transformer_block_of_3d_matmuls_fuses_and_matches_onnxruntime() -> None:
    pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")
    from onnx_cases import compare, model, node, rand

    seq, hidden, inner = 6, 16, 40
    inits = {
        "w1": rand(hidden, inner, seed=1), "b1": rand(inner, seed=2), "w2": rand(inner, hidden, seed=3),
        "b2": rand(hidden, seed=4), "gamma": rand(hidden, seed=5), "beta": rand(hidden, seed=6),
        "sqrt2": np.array(math.sqrt(2.0), np.float32), "one": np.array(1.0, np.float32),
        "half": np.array(0.5, np.float32),
    }
    nodes = [
        node("MatMul", ["x", "w1"], ["h"]), node("Add", ["h", "b1"], ["hb"]),
        node("Div", ["hb", "sqrt2"], ["hs"]), node("Erf", ["hs"], ["he"]), node("Add", ["he", "one"], ["h1"]),
        node("Mul", ["hb", "h1"], ["hm"]), node("Mul", ["hm", "half"], ["g"]),  # Erf GELU
        node("MatMul", ["g", "w2"], ["o"]), node("Add", ["o", "b2"], ["ob"]),
        node("Add", ["ob", "x"], ["r"]),  # the residual
        node("LayerNormalization", ["r", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-5),
    ]
    feeds = {"x": rand(1, seq, hidden, seed=7)}
    proto = model(nodes, feeds, ["y"], inits)
    compare(proto, feeds)
    graph = asc.from_onnx(proto)
    assert _epilogues(graph, "fused_dense") == ["bias,add", "bias,gelu"]
    assert not [t for t in extract_tasks(graph) if t.workload.name == "fused_elementwise"]


def _dense_then_view(view: tuple[int, ...], rows: int = 6, k: int = 5, n: int = 8
                     ) -> tuple[asc.GraphBuilder, str, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((rows, k)).astype(np.float32), rng.standard_normal((n, k)).astype(np.float32)
    g = asc.GraphBuilder("view")
    y = g.reshape(g.dense(g.input("x", x.shape), g.constant(w, "w")), view)
    return g, y, x, (x.astype(np.float64) @ w.T.astype(np.float64)).reshape(view)


@pytest.mark.requires("gcc")
def test_bias_residual_and_relu_move_into_the_dense_and_the_output_keeps_its_shape() -> None:
    g, y, x, want = _dense_then_view((2, 3, 8))
    rng = np.random.default_rng(1)
    bias, other = rng.standard_normal(8).astype(np.float32), rng.standard_normal((2, 3, 8)).astype(np.float32)
    r = g.input("r", other.shape)
    g.output(g.relu(g.add(g.bias_add(y, g.constant(bias, "b"), axis=2), r)))
    graph = g.build()
    moved = sink_reshapes(graph)
    assert [n.op for n in moved.nodes] == ["dense", "bias_add", "reshape", "add", "relu", "reshape"]
    assert moved.shapes[moved.outputs[0]] == (2, 3, 8)
    assert _epilogues(graph, "fused_dense") == ["bias,add,relu"]
    want = np.maximum(want + bias + other, 0)
    np.testing.assert_allclose(_run(graph, x, other), want, rtol=1e-5, atol=1e-5)


@pytest.mark.requires("gcc")
def test_a_per_channel_axis_that_does_not_map_stays_after_the_reshape() -> None:
    g, y, x, want = _dense_then_view((2, 3, 8))
    vector = np.array([1.0, 2.0, 3.0], np.float32)  # along axis 1 of the view: rows of the dense
    g.output(g.scale(y, g.constant(vector, "s"), axis=1))
    graph = g.build()
    assert sink_reshapes(graph) is graph
    assert _epilogues(graph, "fused_dense") == [""]
    np.testing.assert_allclose(_run(graph, x), want * vector[None, :, None], rtol=1e-5, atol=1e-5)


@pytest.mark.requires("gcc")
def test_a_uniform_constant_on_any_axis_is_made_again_along_the_channels() -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 4, 5)).astype(np.float32)
    b = rng.standard_normal((3, 5, 7)).astype(np.float32)
    g = asc.GraphBuilder("attention")
    prod = g.batch_matmul(g.input("a", a.shape), g.input("b", b.shape))
    view = g.reshape(prod, (1, 3, 4, 7))
    g.output(g.softmax(g.scale(view, g.constant(np.full(3, 0.125, np.float32), "s"), axis=1)))
    graph = g.build()
    assert _epilogues(graph, "fused_batch_matmul") == ["scale"]
    x = (np.einsum("bik,bkj->bij", a.astype(np.float64), b) * 0.125).reshape(1, 3, 4, 7)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(_run(graph, a, b), e / e.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.requires("gcc")
def test_the_chain_stops_at_a_graph_output_and_at_an_operand_order_it_cannot_keep() -> None:
    g, y, x, want = _dense_then_view((2, 24))
    rng = np.random.default_rng(3)
    other = rng.standard_normal((2, 24)).astype(np.float32)
    first = g.sigmoid(y)
    second = g.sub(g.input("r", other.shape), first)  # the chained value second: not an epilogue
    g.output(first, second)
    graph = g.build()
    moved = sink_reshapes(graph)
    assert [n.op for n in moved.nodes] == ["dense", "sigmoid", "reshape", "sub"]
    assert _epilogues(graph, "fused_dense") == ["sigmoid"]
    got_first, got_second = asc.build_network(graph)(x, other)
    np.testing.assert_allclose(got_first, 1 / (1 + np.exp(-want)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_second, other - 1 / (1 + np.exp(-want)), rtol=1e-5, atol=1e-6)


def test_a_dense_read_twice_keeps_its_reshape() -> None:
    g = asc.GraphBuilder("twice")
    dense = g.dense(g.input("x", (6, 5)), g.constant(np.ones((8, 5), np.float32), "w"))
    g.output(g.relu(g.reshape(dense, (2, 24))), g.sigmoid(dense))
    graph = g.build()
    assert sink_reshapes(graph) is graph


@pytest.mark.requires("gcc")
def test_a_reshape_after_the_epilogue_already_fused_moves_below_the_rest() -> None:
    """dense -> bias_add -> reshape -> relu: the bias is already the dense's epilogue, and the
    reshape moves below the relu too (a ConvTranspose of one position imports this way)."""
    x = np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((12, 5)).astype(np.float32)
    bias = np.random.default_rng(2).standard_normal(12).astype(np.float32)
    g = asc.GraphBuilder("projection")
    y = g.bias_add(g.dense(g.input("x", x.shape), g.constant(w, "w")), g.constant(bias, "b"), axis=1)
    g.output(g.relu(g.reshape(y, (2, 3, 2, 2))))
    graph = g.build()
    moved = sink_reshapes(graph)
    assert [n.op for n in moved.nodes] == ["dense", "bias_add", "relu", "reshape"]
    assert _epilogues(graph, "fused_dense") == ["bias,relu"]
    want = np.maximum(x.astype(np.float64) @ w.T + bias, 0).reshape(2, 3, 2, 2)
    np.testing.assert_allclose(_run(graph, x), want, rtol=1e-5, atol=1e-5)
