"""Bad ONNX models and forms autosched does not run: each is one line naming the value or the
node, the operator and the attribute (negative dims, mismatched initializers, a node writing its
own input, a value defined twice, unknown attributes, sizes that cannot fit)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")

from onnx import TensorProto, helper  # noqa: E402
from onnx_cases import model, node, rand  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.cli import main  # noqa: E402
from autosched.graph import GraphError  # noqa: E402

X = np.zeros((2, 3), np.float32)


def _graph(nodes: list[onnx.NodeProto], x_dims: list[int | str], inits: list[onnx.TensorProto] | None = None,
           output: str = "y") -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_dims)],
                              [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)], inits or [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _raw(name: str, dims: list[int], data: bytes) -> onnx.TensorProto:
    """A float tensor with ``dims`` and raw bytes ``data`` (helper.make_tensor would check them)."""
    t = onnx.TensorProto(name=name, data_type=TensorProto.FLOAT, raw_data=data)
    t.dims.extend(dims)
    return t


def _one_line(proto: onnx.ModelProto, pattern: str, **kwargs: object) -> None:
    with pytest.raises(GraphError, match=pattern) as info:
        asc.from_onnx(proto, **kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_a_negative_dimension_is_reported_as_negative() -> None:
    _one_line(_graph([node("Relu", ["x"])], [2, -3]),
              r"^input 'x' has a negative dimension -3 \(dimension 1\); sizes are positive")
    _one_line(_graph([node("Relu", ["x"])], ["batch", 3]), r"dynamic dimension 'batch' without a value")
    _one_line(_graph([node("Relu", ["x"])], ["batch", 3]),
              r"^shapes names 'X', which is not an input of the model", shapes={"X": (2, 3)})


def test_an_initializer_whose_data_does_not_match_its_dims_is_named() -> None:
    short = _raw("w", [2, 3], np.ones(4, np.float32).tobytes())
    _one_line(_graph([node("Add", ["x", "w"])], [2, 3], [short]),
              r"^initializer 'w': its data does not match its dims \(2, 3\)")
    listed = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3], float_data=[1.0, 2.0])
    _one_line(_graph([node("Add", ["x", "w"])], [2, 3], [listed]),
              r"^initializer 'w': its data does not match")


def test_a_node_writing_its_own_input_or_a_value_defined_twice_is_refused() -> None:
    _one_line(_graph([helper.make_node("Relu", ["x"], ["x"], name="r")], [2, 3], output="x"),
              r"^Relu node 'r': its output 'x' is also its input")
    twice = [helper.make_node("Relu", ["x"], ["y"], name="a"),
             helper.make_node("Sigmoid", ["x"], ["y"], name="b")]
    _one_line(_graph(twice, [2, 3]),
              r"^Sigmoid node 'b': value 'y' is defined twice \(also by Relu node 'a'\)")
    _one_line(_graph([helper.make_node("Relu", ["x"], ["w"], name="c")], [2, 3],
                     [helper.make_tensor("w", TensorProto.FLOAT, [1], [1.0])], output="w"),
              r"^Relu node 'c': value 'w' is defined twice \(also by an initializer\)")


@pytest.mark.parametrize(
    ("nodes", "inits", "pattern"),
    [([node("Relu", ["x"], alpha=1.0)], {}, r"^Relu node 'relu': attribute 'alpha' is not supported$"),
     ([node("Gelu", ["x"], approximate="tanh")], {},
      r"^Gelu node 'gelu': attribute 'approximate' = tanh is not supported: only the exact"),
     ([node("Resize", ["x", "", "s"], mode="cubic")], {"s": np.array([1.0, 2.0], np.float32)},
      r"^Resize node 'resize': attribute 'mode' = cubic is not supported: only nearest and linear$"),
     ([node("Resize", ["x", "", "s"])], {"s": np.array([1.0, 1.5], np.float32)},
      r"^Resize node 'resize': scale 1.5 of axis 1 \(3 -> 4.5\) does not give a whole size; give sizes"),
     ([node("Conv", ["x", "w"], auto_pad="SAME")], {"w": np.ones((1, 2, 1), np.float32)},
      r"^Conv node 'conv': attribute 'auto_pad' = SAME is not supported: one of NOTSET, VALID, SAME_UPPER"),
     ([node("Relu", ["x"], ["m"]), node("Less", ["m", "x"], ["e"]), node("Where", ["e", "x", "x"])], {},
      r"^Less node 'less_e': input 'm' is computed from the graph's inputs: Less is computed at import"),
     ([node("Relu", ["x"], ["r"]), node("Where", ["c", "r", "x"])], {"c": np.ones((2, 3), bool)}, None),
     ([node("Dropout", ["x", "", "t"])], {"t": np.array(True)},
      r"^Dropout node 'dropout': training_mode must be false"),
     ([node("BatchNormalization", ["x", "g", "g", "g", "g"], training_mode=1)], {"g": np.ones(3, np.float32)},
      r"^BatchNormalization node 'batchnormalization': attribute 'training_mode' = 1 is not supported")],
    ids=["unknown-attribute", "gelu-tanh", "resize-cubic", "resize-fractional-scale", "conv-auto-pad",
         "fold-only-on-computed", "where-all-true-is-fine", "dropout-training", "batch-norm-training"],
)
def test_unsupported_forms_are_one_line_naming_node_operator_and_attribute(
    nodes: list[onnx.NodeProto], inits: dict[str, np.ndarray], pattern: str | None
) -> None:
    x = X[None] if nodes[0].op_type == "Conv" or "BatchNormalization" in nodes[0].op_type else X
    if nodes[0].op_type == "BatchNormalization":
        x = np.zeros((2, 3, 2), np.float32)
    proto = model(nodes, {"x": x}, [nodes[-1].output[0]], inits, check=False)
    if pattern is None:
        assert asc.from_onnx(proto).outputs
    else:
        _one_line(proto, pattern)


def test_sizes_that_cannot_fit_are_refused_before_any_work(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    huge = _graph([node("Relu", ["x"])], [10**9, 10**9])
    _one_line(huge, r"^input 'x' of shape \(1000000000, 1000000000\) would take 3.47 EiB, more than this")
    weights = _raw("w", [10**9, 10**9], b"")
    _one_line(_graph([node("Add", ["x", "w"])], [2, 3], [weights]),
              r"^initializer 'w' of shape \(1000000000, 1000000000\) would take 3.47 EiB")
    grown = [node("Expand", ["x", "shape"])]
    big = helper.make_tensor("shape", TensorProto.INT64, [3], [10**6, 10**6, 3])
    _one_line(_graph(grown, [1, 3], [big]),
              r"^Expand node 'expand'.* \(1000000, 1000000, 3\) would take 10.9 TiB")
    path = tmp_path / "huge.onnx"
    onnx.save(huge, path)
    assert main(["tasks", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "would take 3.47 EiB" in err[0]


def test_relu_in_place_of_a_small_model_still_imports_when_well_formed() -> None:
    # the checks do not refuse good models: one Relu and an initializer listed among the inputs
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 3], rand(2, 3).reshape(-1).tolist())
    graph = helper.make_graph([node("Add", ["x", "w"])], "ok",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                               helper.make_tensor_value_info("w", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [w])
    imported = asc.from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert imported.inputs == ["x"]
