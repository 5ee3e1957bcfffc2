"""Dynamically quantized models (onnxruntime's quantize_dynamic: DynamicQuantizeLinear, then
MatMulInteger / ConvInteger, Cast and the scales' product) import and compute what onnxruntime's
integer kernels compute; Round rounds ties to even; what is not supported is one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")

from onnx import TensorProto  # noqa: E402
from onnx_cases import model, node, onnxruntime, rand, relative_error  # noqa: E402
from onnx_zoo import ZOO  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.graph import GraphError  # noqa: E402


def _quantize_dynamic(proto: onnx.ModelProto, tmp_path: Path, weights: str) -> onnx.ModelProto:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    src, dst = tmp_path / "float.onnx", tmp_path / "dynamic.onnx"
    onnx.save(proto, str(src))
    # reduce_range: 7-bit weights, so that onnxruntime's u8 x s8 kernels on CPUs without VNNI do not
    # saturate their 16-bit pair sums (with 8-bit weights they do there, and compute another model)
    quantize_dynamic(str(src), str(dst), weight_type=getattr(QuantType, weights), per_channel=True,
                     reduce_range=True)
    return onnx.load(str(dst))


def _mlp() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    x = rand(4, 64, low=-2.0, high=2.0)
    nodes = [node("MatMul", ["x", "w1"], ["h"]), node("Add", ["h", "b1"], ["hb"]),
             node("Relu", ["hb"], ["r"]), node("MatMul", ["r", "w2"], ["o"]), node("Add", ["o", "b2"])]
    inits = {"w1": rand(64, 32, seed=1), "b1": rand(32, seed=2), "w2": rand(32, 10, seed=3),
             "b2": rand(10, seed=4)}
    return model(nodes, {"x": x}, ["y"], inits), {"x": x}


def _conv() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    x = rand(1, 3, 12, 12, low=-2.0, high=2.0)
    nodes = [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]), node("Relu", ["c"])]
    return model(nodes, {"x": x}, ["y"], {"w": rand(8, 3, 3, 3, seed=5), "b": rand(8, seed=6)}), {"x": x}


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(("build", "weights", "integer_op"),
                         [(_mlp, "QInt8", "MatMulInteger"), (_conv, "QUInt8", "ConvInteger")],
                         ids=["mlp-matmulinteger", "conv-convinteger"])
def test_a_dynamically_quantized_model_matches_onnxruntime(
    build: object, weights: str, integer_op: str, tmp_path: Path
) -> None:
    proto, feeds = build()  # type: ignore[operator]
    quantized = _quantize_dynamic(proto, tmp_path, weights)
    assert {"DynamicQuantizeLinear", integer_op} <= {n.op_type for n in quantized.graph.node}
    net = asc.build_network(asc.from_onnx(quantized))
    for seed in range(3):
        x = rand(*feeds["x"].shape, seed=20 + seed, low=-2.0, high=2.0)
        got, (want,) = net(x), onnxruntime(quantized, {"x": x})
        # the same integers, scaled: float32 rounding of the scales' product apart
        assert relative_error(got, want) <= 1e-5, (seed, relative_error(got, want))
    float_out = onnxruntime(proto, {"x": x})[0]
    assert 1e-4 < relative_error(got, float_out) < 0.05  # quantized: near the float model, not equal


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("name", ["bert", "resnet50"])
def test_a_dynamically_quantized_zoo_model_matches_onnxruntime(name: str, tmp_path: Path) -> None:
    """BERT (its embedding tables quantized: Gather of uint8, then DequantizeLinear; attention's
    activation x activation MatMulInteger) and ResNet-50 (ConvInteger) as quantize_dynamic writes them."""
    proto, feeds = ZOO[name]()
    quantized = _quantize_dynamic(proto, tmp_path, "QInt8")
    got = asc.build_network(asc.from_onnx(quantized))(*feeds.values())
    assert relative_error(np.asarray(got), onnxruntime(quantized, feeds)[0]) <= 1e-5


@pytest.mark.requires("gcc")
def test_dynamic_quantize_and_matmul_integer_with_zero_points_give_onnxruntimes_integers() -> None:
    """The uint8 values, scale and zero point of DynamicQuantizeLinear, and MatMulInteger's int32
    sums with a zero point per column of B, equal onnxruntime's (cast to float outputs)."""
    x = rand(5, 16, low=-1.0, high=3.0)
    b = np.random.default_rng(7).integers(0, 256, (16, 6)).astype(np.uint8)
    nodes = [node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
             node("MatMulInteger", ["q", "b", "z", "bz"], ["m"]),
             node("Cast", ["m"], ["y"], to=TensorProto.FLOAT),
             node("Cast", ["q"], ["qf"], to=TensorProto.FLOAT),
             node("Cast", ["z"], ["zf"], to=TensorProto.FLOAT), node("Identity", ["s"], ["sf"])]
    inits = {"b": b, "bz": np.arange(6, dtype=np.uint8) * 40}
    proto = model(nodes, {"x": x}, ["y", "qf", "zf", "sf"], inits)
    got = asc.build_network(asc.from_onnx(proto))(x)
    want = onnxruntime(proto, {"x": x})
    for name, g, w in zip(("y", "q", "zero point"), got[:3], want[:3], strict=True):
        np.testing.assert_array_equal(np.asarray(g).reshape(w.shape), w, err_msg=name)
    np.testing.assert_allclose(got[3].reshape(()), want[3], rtol=1e-6)  # scale: float32 rounding apart


@pytest.mark.requires("gcc")
def test_round_rounds_ties_to_even() -> None:
    x = np.array([[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -3.7]], np.float32)
    proto = model([node("Round", ["x"])], {"x": x}, ["y"])
    got = asc.build_network(asc.from_onnx(proto))(x)
    np.testing.assert_array_equal(got, np.rint(x))
    np.testing.assert_array_equal(got, onnxruntime(proto, {"x": x})[0])


def test_a_zero_point_per_row_of_a_computed_operand_is_one_line() -> None:
    x = rand(3, 8)
    nodes = [node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
             node("MatMulInteger", ["q", "b", "az"], ["m"]), node("Cast", ["m"], ["y"], to=TensorProto.FLOAT)]
    inits = {"b": np.ones((8, 4), np.uint8), "az": np.array([1, 2, 3], np.uint8)}
    with pytest.raises(GraphError, match=r"^MatMulInteger node 'matmulinteger_m': a zero point per row of "
                       r"computed input 'q' is not supported \(per tensor\)$"):
        asc.from_onnx(model(nodes, {"x": x}, ["y"], inits))


@pytest.mark.requires("gcc")
def test_a_dynamically_quantized_lstm_runs_the_lstm_of_its_dequantized_weights(tmp_path: Path) -> None:
    """onnxruntime's quantize_dynamic makes DynamicQuantizeLSTM (com.microsoft) of an LSTM language
    model's layers: W and R int8, (directions, rows, 4 x hidden), a scale and zero point each. It
    computes what a float LSTM of those weights dequantized computes (checked against onnxruntime
    running that float LSTM); onnxruntime's own int8 kernel also quantizes the activations, so it
    is only near (its error from the float model is of the same size)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    proto, feeds = ZOO["lstm_lm"]()
    src, dst = tmp_path / "float.onnx", tmp_path / "dynamic.onnx"
    onnx.save(proto, str(src))
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, op_types_to_quantize=["LSTM"])
    quantized = onnx.load(str(dst))
    lstms = [n for n in quantized.graph.node if n.op_type == "DynamicQuantizeLSTM"]
    assert len(lstms) == 2 and all(n.domain == "com.microsoft" for n in lstms)
    graph = asc.from_onnx(quantized)
    got = asc.build_network(graph)(*(feeds[v] for v in graph.inputs))
    # the float model with every LSTM's W and R replaced by their dequantized values, laid out as ONNX's
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in quantized.graph.initializer}
    dequantized = onnx.load(str(src))
    for lstm, q in zip((n for n in dequantized.graph.node if n.op_type == "LSTM"), lstms, strict=True):
        for k, at in enumerate([(1, 8, 9), (2, 10, 11)]):  # W and R: (values, scale, zero point)
            w, scale, zero = (q.input[i] for i in at)
            per_direction = (slice(None), None, None)
            values = (inits[w].astype(np.float64) - inits[zero].astype(np.float64)[per_direction]) \
                * inits[scale].astype(np.float64)[per_direction]
            name = lstm.input[1 + k]
            init = next(i for i in dequantized.graph.initializer if i.name == name)
            init.CopyFrom(onnx.numpy_helper.from_array(values.transpose(0, 2, 1).astype(np.float32), name))
    assert relative_error(got, onnxruntime(dequantized, feeds)[0]) <= 1e-5
    int8, float_ = onnxruntime(quantized, feeds)[0], onnxruntime(proto, feeds)[0]
    assert relative_error(got, int8) <= 2 * relative_error(int8, float_) + 1e-3
