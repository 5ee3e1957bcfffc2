"""ONNX elementwise operators with their attributes, each imported, built and run against
onnxruntime: activations, Clip, Pow, Max/Min, Where, Sum, Cast, Dropout, LogSoftmax, and the
arithmetic's type check."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")

from onnx_cases import compare, model, node, rand  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.graph import GraphError  # noqa: E402

X = rand(2, 3, 4, 5, low=-3.0, high=3.0)
POSITIVE = rand(2, 3, 4, 5, low=0.1, high=4.0)
def _scalar(v: float) -> np.ndarray:
    return np.array(v, np.float32)


UNARY_CASES = {
    "tanh": ("Tanh", {}, X),
    "erf": ("Erf", {}, X),
    "exp": ("Exp", {}, X),
    "log": ("Log", {}, POSITIVE),
    "sqrt": ("Sqrt", {}, POSITIVE),
    "reciprocal": ("Reciprocal", {}, POSITIVE),
    "neg": ("Neg", {}, X),
    "abs": ("Abs", {}, X),
    "softplus": ("Softplus", {}, X),
    "hardswish": ("HardSwish", {}, X),
    "sigmoid": ("Sigmoid", {}, X),
    "leakyrelu-default": ("LeakyRelu", {}, X),
    "leakyrelu-0.2": ("LeakyRelu", {"alpha": 0.2}, X),
    "elu-0.7": ("Elu", {"alpha": 0.7}, X),
    "hardsigmoid": ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, X),
    "logsoftmax-axis1": ("LogSoftmax", {"axis": 1}, X),
    "mish": ("Mish", {}, X),
    "softsign": ("Softsign", {}, X),
    "celu-default": ("Celu", {}, X),
    "celu-0.5": ("Celu", {"alpha": 0.5}, X),
    "selu-default": ("Selu", {}, X),
    "selu-custom": ("Selu", {"alpha": 1.2, "gamma": 0.9}, X),
    "thresholdedrelu-default": ("ThresholdedRelu", {}, X),
    "thresholdedrelu-0.3": ("ThresholdedRelu", {"alpha": 0.3}, X),
}


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("case", list(UNARY_CASES))
def test_unary_operators_match_onnxruntime(case: str) -> None:
    op, attrs, x = UNARY_CASES[case]
    opset = 18 if op == "Mish" else 17  # Mish came with opset 18
    compare(model([node(op, ["x"], **attrs)], {"x": x}, ["y"], opset=opset), {"x": x})


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(
    ("bounds", "inits"),
    [(["x", "lo", "hi"], {"lo": _scalar(0.0), "hi": _scalar(6.0)}),  # ReLU6 as torch exports it
     (["x", "lo"], {"lo": _scalar(-0.5)}),
     (["x", "", "hi"], {"hi": _scalar(0.25)})],
    ids=["relu6", "min-only", "max-only"],
)
def test_clip_with_bounds_as_inputs(bounds: list[str], inits: dict[str, np.ndarray]) -> None:
    compare(model([node("Clip", bounds)], {"x": X}, ["y"], inits), {"x": X})


def test_clip_bounds_as_attributes_become_one_unary_step() -> None:
    proto = model([node("Clip", ["x"], min=-1.0, max=2.0)], {"x": X}, ["y"], opset=17, check=False)
    graph = asc.from_onnx(proto)
    assert [(n.op, dict(n.attrs)) for n in graph.nodes] == [("unary", {"step": "clip:-1.0:2.0"})]


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(
    ("slope", "computed"),
    [(rand(3, 1, 1, seed=2), False), (_scalar(0.1), False), (rand(5, seed=3), False),
     (rand(1, 3, 4, 5), True)],
    ids=["per-channel", "scalar", "last-axis", "computed"],
)
def test_prelu_with_a_constant_or_computed_slope(slope: np.ndarray, computed: bool) -> None:
    feeds = {"x": X, "s": slope} if computed else {"x": X}
    compare(model([node("PRelu", ["x", "s"])], feeds, ["y"], None if computed else {"s": slope}), feeds)


@pytest.mark.requires("gcc")
def test_mean_of_three_inputs_with_broadcasting() -> None:
    z = rand(3, 1, 5, seed=4)
    feeds = {"x": X, "z": z}
    compare(model([node("Mean", ["x", "z", "w"])], feeds, ["y"], {"w": rand(5, seed=5)}), feeds)


@pytest.mark.requires("gcc")
def test_pow_by_constant_scalars_and_by_a_computed_exponent() -> None:
    nodes = [node("Pow", ["x", "two"], ["a"]), node("Pow", ["a", "half"], ["b"]),
             node("Pow", ["b", "e"], ["y"])]
    e = rand(1, 3, 1, 5, seed=3, low=0.5, high=1.5)
    compare(model(nodes, {"x": POSITIVE, "e": e}, ["y"], {"two": _scalar(2.0), "half": _scalar(0.5)}),
            {"x": POSITIVE, "e": e})


@pytest.mark.requires("gcc")
def test_max_and_min_of_several_inputs_with_broadcasting_and_constants() -> None:
    z = rand(3, 1, 5, seed=4)
    nodes = [node("Max", ["x", "z", "k"], ["a"]), node("Min", ["a", "lim"], ["b"]),
             node("Max", ["b", "row"], ["y"])]
    inits = {"k": _scalar(-0.5), "lim": _scalar(1.5), "row": rand(5, seed=5)}
    compare(model(nodes, {"x": X, "z": z}, ["y"], inits), {"x": X, "z": z})


@pytest.mark.requires("gcc")
def test_where_with_a_constant_mask_as_attention_masks_use_it() -> None:
    mask = np.tril(np.ones((4, 5), bool))  # a causal mask, broadcast over batch and heads
    nodes = [node("Where", ["mask", "x", "neg"], ["masked"]), node("Softmax", ["masked"], ["soft"], axis=-1),
             node("Where", ["mask", "z", "x"], ["other"]), node("Add", ["soft", "other"], ["y"])]
    z = rand(2, 3, 4, 5, seed=6)
    inits = {"mask": mask, "neg": np.array(-np.inf, np.float32)}
    compare(model(nodes, {"x": X, "z": z}, ["y"], inits), {"x": X, "z": z})


@pytest.mark.requires("gcc")
def test_sum_cast_dropout_and_identity() -> None:
    from onnx import TensorProto

    nodes = [node("Sum", ["x", "z", "row"], ["s"]), node("Cast", ["s"], ["c"], to=TensorProto.FLOAT),
             node("Dropout", ["c"], ["d", "mask"]), node("Identity", ["d"], ["y"])]
    z = rand(3, 4, 1, seed=7)
    compare(model(nodes, {"x": X, "z": z}, ["y"], {"row": rand(5, seed=8)}), {"x": X, "z": z})


def test_arithmetic_of_an_integer_and_a_float_value_is_one_line() -> None:
    ids = np.zeros((2, 3), np.int64)
    nodes = [node("Add", ["ids", "x"], ["y"])]
    proto = model(nodes, {"ids": ids, "x": np.zeros((2, 3), np.float32)}, ["y"], check=False)
    with pytest.raises(GraphError) as info:  # an integer input: only Gather indices may be one
        asc.from_onnx(proto)
    assert str(info.value).startswith("input 'ids' of node 'add' is int64: autosched networks compute in")
    assert "\n" not in str(info.value)
    k = model([node("Add", ["x", "k"])], {"x": X}, ["y"], {"k": np.array([2], np.int64)}, check=False)
    with pytest.raises(GraphError) as info:  # a computed float plus an integer constant
        asc.from_onnx(k)
    assert str(info.value) == ("Add node 'add': its operands differ in type ('x' is float32, 'k' is int64): "
                               "Add takes one type for all")


def test_integer_arithmetic_on_constants_is_shape_arithmetic_and_folds() -> None:
    nodes = [node("Shape", ["x"], ["s"]), node("Cast", ["s"], ["f"], to=onnx.TensorProto.FLOAT),
             node("Mul", ["f", "half"], ["g"]), node("Cast", ["g"], ["h"], to=onnx.TensorProto.INT64),
             node("Concat", ["h", "one"], ["h2"], axis=0), node("Reshape", ["x", "h2"], ["y"])]
    inits = {"half": np.array([1.0, 1.0, 1.0, 1.0], np.float32), "one": np.array([1], np.int64)}
    graph = asc.from_onnx(model(nodes, {"x": X}, ["y"], inits))
    assert [n.op for n in graph.nodes] == ["reshape"] and graph.shapes[graph.outputs[0]] == (2, 3, 4, 5, 1)
