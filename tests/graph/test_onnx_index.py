"""Arithmetic on integers computed from an integer input (RoBERTa's position ids): Equal, Not,
Cast, CumSum, Add/Sub/Mul of integers, then a Gather, each against onnxruntime with padding ids
in the input; CumSum of floats with its attributes; GatherElements of an all-equal constant; what
stays refused, in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")

from onnx import TensorProto  # noqa: E402
from onnx_cases import compare, model, node, rand  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.graph import GraphError  # noqa: E402

PAD = 1
IDS = np.array([[0, 5, 7, 9, 2, 1, 1, 1], [0, 3, 1, 4, 4, 8, 6, 1]], np.int64)  # 1: padding


def _i64(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


def _position_ids(out: str = "pos") -> list[onnx.NodeProto]:
    """transformers' create_position_ids_from_input_ids, as torch exports it."""
    return [node("Equal", ["ids", "pad"], ["is_pad"]), node("Not", ["is_pad"], ["keep"]),
            node("Cast", ["keep"], ["mask"], to=TensorProto.INT32),
            node("CumSum", ["mask", "one"], ["count"]), node("Mul", ["count", "mask"], ["counted"]),
            node("Cast", ["counted"], ["counted64"], to=TensorProto.INT64),
            node("Add", ["counted64", "pad64"], [out])]


INITS = {"pad": _i64(PAD), "pad64": _i64(PAD), "one": _i64(1)}


@pytest.mark.requires("gcc")
def test_position_ids_computed_from_token_ids_index_a_table() -> None:
    tokens, positions = rand(10, 6, seed=1), rand(IDS.shape[1] + PAD + 1, 6, seed=2)
    nodes = [*_position_ids(), node("Gather", ["positions", "pos"], ["p"]),
             node("Gather", ["tokens", "ids"], ["t"]), node("Add", ["t", "p"], ["y"])]
    proto = model(nodes, {"ids": IDS}, ["y"], {**INITS, "tokens": tokens, "positions": positions})
    compare(proto, {"ids": IDS})
    graph = asc.from_onnx(proto)
    assert [n.op for n in graph.nodes].count("index_to_float") == 1  # the ids converted once


@pytest.mark.requires("gcc")
def test_a_mask_from_token_ids_cast_to_float_is_ordinary_data() -> None:
    x = rand(2, 8, seed=3)
    nodes = [node("Equal", ["ids", "pad"], ["is_pad"]), node("Not", ["is_pad"], ["keep"]),
             node("Cast", ["keep"], ["mask"], to=TensorProto.FLOAT), node("Mul", ["x", "mask"], ["y"])]
    compare(model(nodes, {"ids": IDS, "x": x}, ["y"], {"pad": _i64(PAD)}), {"ids": IDS, "x": x})


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(("exclusive", "reverse", "axis"), [(0, 0, 1), (1, 0, 1), (0, 1, -1), (1, 1, 0)])
def test_cumsum_of_floats_with_its_attributes(exclusive: int, reverse: int, axis: int) -> None:
    x = rand(3, 7, 2, seed=4)
    nodes = [node("Relu", ["x"], ["r"]), node("CumSum", ["r", "axis"], exclusive=exclusive, reverse=reverse)]
    compare(model(nodes, {"x": x}, ["y"], {"axis": _i64(axis).reshape(())}), {"x": x})


def test_gather_elements_of_an_all_equal_constant_is_that_constant() -> None:
    nodes = [*_position_ids(), node("GatherElements", ["zeros", "pos"], ["types"], axis=1),
             node("Gather", ["table", "types"], ["y"])]
    inits = {**INITS, "zeros": np.zeros((2, 8), np.int64), "table": rand(2, 4, seed=5)}
    graph = asc.from_onnx(model(nodes, {"ids": IDS}, ["y"], inits))
    assert "gather" not in [n.op for n in graph.nodes]  # row 0 of the table, for every id
    inits["zeros"] = np.arange(16, dtype=np.int64).reshape(2, 8)
    with pytest.raises(GraphError, match="GatherElements node .*: the data must be a constant whose"):
        asc.from_onnx(model(nodes, {"ids": IDS}, ["y"], inits))


def test_what_integer_arithmetic_still_refuses_is_one_line() -> None:
    div = [node("Div", ["ids", "two"], ["half"]), node("Gather", ["table", "half"], ["y"])]
    proto = model(div, {"ids": IDS}, ["y"], {"two": _i64(2), "table": rand(10, 4)})
    with pytest.raises(GraphError, match="input 'ids' of node 'div_half' is int64: .*Gather indices"):
        asc.from_onnx(proto)  # Div is not index arithmetic: integer division would round
    both = [node("Equal", ["ids", "ids"], ["same"]), node("Cast", ["same"], ["y"], to=TensorProto.FLOAT)]
    with pytest.raises(GraphError, match="Equal node .*: needs one computed operand and one scalar constant"):
        asc.from_onnx(model(both, {"ids": IDS}, ["y"]))


@pytest.mark.requires("gcc")
def test_roberta_embeddings_exported_by_torch(tmp_path: Path) -> None:
    torch_zoo = pytest.importorskip("torch_zoo", reason="needs torch (pip install torch)")
    path, feeds = torch_zoo.export("roberta_embeddings", tmp_path)
    compare(onnx.load(str(path)), feeds)
