"""Shapes folded at import (Shape, Gather, Concat, arithmetic, Range, Where, Expand,
ConstantOfShape and any all-constant subgraph), and the ONNX operators that move data (Slice,
Split, Squeeze/Unsqueeze, Gather, Expand, Tile, Flatten, Transpose, Concat), each against
onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")

from onnx_cases import compare, model, node, rand  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.graph import GraphError  # noqa: E402

X = rand(2, 3, 5, 4)
I64 = np.int64


def _i(*values: int) -> np.ndarray:
    return np.array(values, I64)


def flatten_by_shape() -> onnx.ModelProto:
    """torch's ``x.view(x.size(0), -1)``: Shape -> Gather -> Unsqueeze -> Concat -> Reshape."""
    nodes = [node("Shape", ["x"], ["s"]), node("Gather", ["s", "zero"], ["b"], axis=0),
             node("Unsqueeze", ["b", "axes"], ["b1"]), node("Concat", ["b1", "minus1"], ["target"], axis=0),
             node("Reshape", ["x", "target"], ["y"])]
    return model(nodes, {"x": X}, ["y"], {"zero": np.array(0, I64), "axes": _i(0), "minus1": _i(-1)})


@pytest.mark.requires("gcc")
def test_shape_gather_unsqueeze_concat_reshape_folds_to_one_reshape() -> None:
    proto = flatten_by_shape()
    graph = asc.from_onnx(proto)
    assert [n.op for n in graph.nodes] == ["reshape"]
    assert graph.shapes[graph.outputs[0]] == (2, 60)
    compare(proto, {"x": X})


def shape_arithmetic() -> onnx.ModelProto:
    """Shape with start/end, Mod, Div, Mul, Sub, Range, Equal, Where, Expand, ConstantOfShape,
    Slice/Squeeze/Cast on shapes: constants of the computation on x."""
    f = onnx.helper.make_tensor("v", onnx.TensorProto.FLOAT, [1], [0.5])
    nodes = [
        node("Shape", ["x"], ["s"]),
        node("Gather", ["s", "three"], ["last"]),  # 4
        node("Range", ["zero", "last", "one"], ["r"]),  # [0, 1, 2, 3]
        node("Mod", ["last", "three"], ["m"]),  # 1
        node("Equal", ["r", "m"], ["e"]),
        node("Where", ["e", "two", "half"], ["w"]),  # (4,): [0.5, 2, 0.5, 0.5]
        node("Expand", ["w", "s"], ["big"]),  # (2, 3, 5, 4)
        node("Mul", ["x", "big"], ["a"]),
        node("Shape", ["x"], ["mid"], start=1, end=-1),  # [3, 5]
        node("ConstantOfShape", ["mid"], ["c"], value=f),  # (3, 5) of 0.5
        node("Unsqueeze", ["c", "last_axis"], ["c1"]),  # (3, 5, 1)
        node("Add", ["a", "c1"], ["b"]),
        node("Slice", ["s", "zero1", "two1"], ["head"]),  # [2, 3]
        node("Mul", ["head", "twos"], ["doubled"]),  # [4, 6]
        node("Div", ["doubled", "twos"], ["back"]),  # [2, 3]
        node("Sub", ["back", "ones"], ["less"]),  # [1, 2]
        node("Add", ["less", "ones"], ["again"]),  # [2, 3]
        node("Cast", ["again"], ["again64"], to=onnx.TensorProto.INT64),
        node("Concat", ["again64", "minus1"], ["target"], axis=0),
        node("Reshape", ["b", "target"], ["y"]),
    ]
    inits = {"three": np.array(3, I64), "zero": np.array(0, I64), "one": np.array(1, I64),
             "two": np.array(2.0, np.float32), "half": np.array(0.5, np.float32), "last_axis": _i(-1),
             "zero1": _i(0), "two1": _i(2), "twos": _i(2, 2), "ones": _i(1, 1), "minus1": _i(-1)}
    return model(nodes, {"x": X}, ["y"], inits)


@pytest.mark.requires("gcc")
def test_shape_arithmetic_folds_and_only_the_computation_on_x_remains() -> None:
    proto = shape_arithmetic()
    graph = asc.from_onnx(proto)
    assert {n.op for n in graph.nodes} <= {"mul", "add", "reshape", "scale", "broadcast"}
    assert graph.shapes[graph.outputs[0]] == (2, 3, 20)
    compare(proto, {"x": X})


@pytest.mark.requires("gcc")
def test_identity_of_a_constant_is_that_constant_and_constant_subgraphs_run_at_import() -> None:
    nodes = [node("Identity", ["gamma"], ["g"]),  # torch shares equal weights this way
             node("LayerNormalization", ["x", "g", "beta"], ["n"], axis=-1, epsilon=1e-5),
             node("Sin", ["angles"], ["sines"]),  # no numpy fast path: onnx's reference evaluator
             node("CumSum", ["sines", "axis0"], ["bias"]),
             node("Add", ["n", "bias"], ["y"])]
    inits = {"gamma": rand(4, seed=1, low=0.5, high=1.5), "beta": rand(4, seed=2), "angles": rand(4, seed=3),
             "axis0": np.array(0, I64)}
    proto = model(nodes, {"x": X}, ["y"], inits)
    assert [n.op for n in asc.from_onnx(proto).nodes] == ["layer_norm", "bias_add"]
    compare(proto, {"x": X})


SLICES = {
    "negative-and-clamped": (_i(-4, 1), _i(2**62, -1), _i(2, 3), _i(1, 1)),
    "steps": (_i(0, 1), _i(5, 4), _i(2, 3), _i(2, 2)),
    "negative-axes": (_i(1), _i(3), _i(-3), None),
    "reverse": (_i(-1), _i(-2**62), _i(3), _i(-1)),
    "reverse-by-two": (_i(4, 2), _i(0, -10), _i(2, 1), _i(-2, -1)),
}


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("case", list(SLICES))
def test_slice_with_its_inputs_matches_onnxruntime(case: str) -> None:
    starts, ends, axes, steps = SLICES[case]
    inits = {"starts": starts, "ends": ends, "axes": axes}
    names = ["x", "starts", "ends", "axes"]
    if steps is not None:
        inits["steps"] = steps
        names.append("steps")
    compare(model([node("Slice", names)], {"x": X}, ["y"], inits), {"x": X})


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(
    ("opset", "split", "outputs", "attrs"),
    [(17, _i(1, 3, 1), 3, {"axis": 2}), (17, None, 2, {"axis": -1}),
     (18, None, 2, {"axis": 2, "num_outputs": 2})],
    ids=["sizes-input", "equal-parts", "num-outputs-uneven"],
)
def test_split_gives_every_output(opset: int, split: np.ndarray | None, outputs: int,
                                  attrs: dict[str, int]) -> None:
    names = [f"y{i}" for i in range(outputs)]
    inits = {"split": split} if split is not None else {}
    nodes = [node("Split", ["x", "split"] if split is not None else ["x"], names, **attrs)]
    graph = asc.from_onnx(model(nodes, {"x": X}, names, inits, opset=opset))
    assert len(graph.outputs) == outputs
    compare(model(nodes, {"x": X}, names, inits, opset=opset), {"x": X})


@pytest.mark.requires("gcc")
def test_gather_of_an_embedding_table_at_int64_token_ids() -> None:
    ids = np.array([[1, 9, 0, 4, 4], [-1, 2, 3, 7, 8]], I64)
    table = rand(10, 8, seed=4)
    nodes = [node("Gather", ["table", "ids"], ["e"]), node("Add", ["e", "pos"], ["y"])]
    proto = model(nodes, {"ids": ids}, ["y"], {"table": table, "pos": rand(5, 8, seed=5)})
    graph = asc.from_onnx(proto)
    assert graph.dtype == "float32" and graph.dtype_of("ids") == "int64"
    compare(proto, {"ids": ids})


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(("op", "attrs"), [("DepthToSpace", {}), ("DepthToSpace", {"mode": "CRD"}),
                                           ("SpaceToDepth", {})], ids=["d2s-dcr", "d2s-crd", "s2d"])
def test_depth_to_space_and_back(op: str, attrs: dict[str, str]) -> None:
    x = rand(2, 8, 4, 6)
    compare(model([node(op, ["x"], blocksize=2, **attrs)], {"x": x}, ["y"]), {"x": x})


@pytest.mark.requires("gcc")
def test_token_ids_reshaped_before_the_embedding_gather() -> None:
    """GPT-2's ``input_ids.view(-1, n)`` then the table: the ids go through Reshape, Unsqueeze and
    Squeeze before the Gather; the gather reads the input itself and its result is viewed."""
    ids = np.array([[1, 9, 0, 4, 4, 2], [-1, 2, 3, 7, 8, 0]], I64)
    table = rand(10, 8, seed=4)
    nodes = [node("Reshape", ["ids", "shape"], ["flat"]), node("Unsqueeze", ["flat", "zero"], ["u"]),
             node("Squeeze", ["u", "zero"], ["v"]), node("Gather", ["table", "v"], ["e"]),
             node("Relu", ["e"], ["y"])]
    inits = {"table": table, "shape": np.array([3, 4], I64), "zero": np.array([0], I64)}
    proto = model(nodes, {"ids": ids}, ["y"], inits)
    graph = asc.from_onnx(proto)
    assert graph.shapes[graph.outputs[0]] == (3, 4, 8)
    compare(proto, {"ids": ids})
    used = model(nodes + [node("Neg", ["flat"], ["f"])], {"ids": ids}, ["y", "f"], inits, check=False)
    with pytest.raises(GraphError, match="input 'ids' of node 'neg_f' is int64: .* Gather indices: viewed"):
        asc.from_onnx(used)


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(
    ("indices", "axis"),
    [(np.array(2, I64), 1), (_i(0, 2, 3), 2), (_i(-1, 0), 3), (np.array([[1, 0], [2, 2]], I64), 1)],
    ids=["scalar", "runs", "negative", "2-D-repeated"],
)
def test_gather_of_a_computed_value_at_constant_indices(indices: np.ndarray, axis: int) -> None:
    nodes = [node("Relu", ["x"], ["r"]), node("Gather", ["r", "idx"], ["y"], axis=axis)]
    compare(model(nodes, {"x": X}, ["y"], {"idx": indices}), {"x": X})


@pytest.mark.requires("gcc")
def test_squeeze_unsqueeze_expand_tile_flatten_transpose_and_concat() -> None:
    z = rand(1, 3, 1, 4, seed=6)
    nodes = [
        node("Expand", ["z", "shape"], ["ez"]),  # (2, 3, 5, 4)
        node("Add", ["x", "ez"], ["a"]),
        node("Unsqueeze", ["a", "axes"], ["u"]),  # (2, 1, 3, 5, 4, 1)
        node("Transpose", ["u"], ["t"], perm=[5, 2, 0, 4, 3, 1]),  # (1, 3, 2, 4, 5, 1)
        node("Squeeze", ["t", "sq"], ["s"]),  # (3, 2, 4, 5)
        node("Tile", ["s", "reps"], ["tiled"]),  # (3, 4, 4, 5)
        node("Concat", ["tiled", "k"], ["c"], axis=-1),  # (3, 4, 4, 7)
        node("Flatten", ["c"], ["y"], axis=-1),  # (48, 7)
    ]
    inits = {"shape": _i(2, 1, 5, 1), "axes": _i(1, -1), "sq": _i(0, -1), "reps": _i(1, 2, 1, 1),
             "k": rand(3, 4, 4, 2, seed=7)}
    proto = model(nodes, {"x": X, "z": z}, ["y"], inits)
    graph = asc.from_onnx(proto)
    assert graph.shapes[graph.outputs[0]] == (48, 7)
    compare(proto, {"x": X, "z": z})


def test_shapes_onnx_inference_cannot_give_come_from_the_builder() -> None:
    # x's element type is left undefined: onnx infers nothing after it, so the Shape of Relu(x) and
    # the arithmetic on it are computed while converting, from the shapes the builder knows
    nodes = [node("Relu", ["x"], ["r"]), node("Shape", ["r"], ["s"]), node("Gather", ["s", "zero"], ["b"]),
             node("Unsqueeze", ["b", "axes"], ["b1"]), node("Concat", ["b1", "minus1"], ["t"], axis=0),
             node("Reshape", ["r", "t"], ["y"])]
    inits = {"zero": np.array(0, I64), "axes": _i(0), "minus1": _i(-1)}
    proto = model(nodes, {"x": X}, ["y"], inits, check=False)
    proto.graph.input[0].type.tensor_type.elem_type = onnx.TensorProto.UNDEFINED
    graph = asc.from_onnx(proto)
    assert [n.op for n in graph.nodes] == ["relu", "reshape"]
    assert graph.shapes[graph.outputs[0]] == (2, 60)


@pytest.mark.requires("gcc")
def test_gather_elements_on_constants_folds_with_fewer_indices_than_data() -> None:
    # transformers' BERT embeddings: a (1, 512) buffer of position ids read at (1, 128) indices,
    # which onnx's reference evaluator cannot compute
    table = np.arange(512, dtype=I64).reshape(1, 512) * 3
    index = np.arange(128, dtype=I64).reshape(1, 128)[:, ::-1].copy()
    index[0, 0] = -1  # counted from the end
    x = rand(1, 128)
    nodes = [node("GatherElements", ["table", "index"], ["picked"], axis=1),
             node("Cast", ["picked"], ["f"], to=1), node("Add", ["x", "f"], ["y"])]
    proto = model(nodes, {"x": x}, ["y"], {"table": table, "index": index})
    graph = asc.from_onnx(proto)
    want = np.take_along_axis(table, np.where(index < 0, index + 512, index), axis=1).astype(np.float32)
    added = [v for v in graph.constants.values() if v.shape == (1, 128) or v.size == 128]
    assert any(np.array_equal(v.reshape(1, 128), want) for v in added)
    compare(proto, {"x": x})
