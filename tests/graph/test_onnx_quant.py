"""QDQ models (onnxruntime's quantize_static: uint8 activations per tensor, int8 weights per
channel) import and compute the quantized model exactly as onnxruntime's unfused QuantizeLinear /
DequantizeLinear do, agree with its int8 kernels on the top class; what is not supported is one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")

from onnx_cases import model, node, rand, relative_error  # noqa: E402
from onnx_zoo import ZOO  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.graph import GraphError  # noqa: E402


def _quantize(
    proto: onnx.ModelProto, feeds: dict[str, np.ndarray], tmp_path: Path, form: str
) -> onnx.ModelProto:
    """``proto`` quantized by onnxruntime in ``form`` (QDQ or QOperator: uint8 activations per
    tensor, 7-bit int8 weights per channel), calibrated on 8 random inputs shaped like ``feeds``."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter([{k: rand(*v.shape, seed=10 + i, low=-2.0, high=2.0)
                                  for k, v in feeds.items()} for i in range(8)])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.batches, None)

    src, dst = tmp_path / "float.onnx", tmp_path / f"{form}.onnx"
    onnx.save(proto, str(src))
    # reduce_range: 7-bit weights, so that onnxruntime's u8 x s8 kernels on CPUs without VNNI do not
    # saturate their 16-bit pair sums (on such a CPU they do with 8-bit weights, and compute another model)
    quantize_static(str(src), str(dst), Reader(), quant_format=getattr(QuantFormat, form), per_channel=True,
                    reduce_range=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return onnx.load(str(dst))


def _session(proto: onnx.ModelProto, fused: bool) -> ort.InferenceSession:
    options = ort.SessionOptions()
    if not fused:  # QuantizeLinear / DequantizeLinear run as written: the quantized model's definition
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet50"])
def test_a_qdq_model_computes_the_quantized_model(name: str, tmp_path: Path) -> None:
    float_proto, feeds = ZOO[name]()
    proto = _quantize(float_proto, feeds, tmp_path, "QDQ")
    (input_name, example), = feeds.items()
    shape = example.shape
    assert {"QuantizeLinear", "DequantizeLinear"} <= {n.op_type for n in proto.graph.node}
    net = asc.build_network(asc.from_onnx(proto))
    plain, fused = _session(proto, fused=False), _session(proto, fused=True)
    agree = 0
    for seed in range(10):
        x = np.random.default_rng(100 + seed).standard_normal(shape).astype(np.float32)
        got = net(x)
        want = plain.run(None, {input_name: x})[0]
        assert relative_error(got, want) <= 1e-5
        agree += int(got.argmax() == fused.run(None, {input_name: x})[0].argmax())
    assert agree >= 9  # onnxruntime's int8 kernels round their sums once more, now and then elsewhere


@pytest.mark.requires("gcc")
def test_quantize_and_dequantize_of_a_computed_value_per_tensor() -> None:
    x = rand(2, 3, 4, 5, low=-4.0, high=4.0)
    for kind, zero in ((np.uint8, 128), (np.int8, -3)):
        nodes = [node("Relu", ["x"], ["r"]), node("QuantizeLinear", ["r", "s", "z"], ["q"]),
                 node("DequantizeLinear", ["q", "s", "z"], ["y"])]
        inits = {"s": np.array(0.037, np.float32), "z": np.array(zero, kind)}
        proto = model(nodes, {"x": x}, ["y"], inits)
        got = asc.build_network(asc.from_onnx(proto))(x)
        want = _session(proto, fused=False).run(None, {"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)


def test_a_scale_per_axis_of_a_computed_value_is_one_line() -> None:
    x = rand(2, 3, 4, 5)
    nodes = [node("Relu", ["x"], ["r"]), node("QuantizeLinear", ["r", "s", "z"], ["q"], axis=1),
             node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)]
    inits = {"s": np.full(3, 0.1, np.float32), "z": np.zeros(3, np.uint8)}
    with pytest.raises(GraphError, match=r"^QuantizeLinear node 'quantizelinear_q': a scale and zero point "
                       r"per axis of a computed value are not supported \(per tensor\)$"):
        asc.from_onnx(model(nodes, {"x": x}, ["y"], inits))


def _float_model(op: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A float model around one operator that onnxruntime's QOperator form quantizes."""
    x = rand(1, 4, 6, 6, low=-2.0, high=2.0)
    conv = node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])
    inits = {"w": rand(4, 4, 3, 3, seed=1), "b": rand(4, seed=2)}
    if op == "QLinearConv":
        return model([conv, node("Relu", ["c"], ["y"])], {"x": x}, ["y"], inits), {"x": x}
    if op in ("QLinearAdd", "QLinearMul", "QLinearConcat"):
        other = node("Conv", ["x", "w2"], ["d"])
        join = (node("Concat", ["c", "d"], axis=1) if op == "QLinearConcat"
                else node(op.removeprefix("QLinear"), ["c", "d"]))
        inits["w2"] = rand(4, 4, 1, 1, seed=3)
        return model([conv, other, join], {"x": x}, ["y"], inits), {"x": x}
    if op == "QLinearGlobalAveragePool":
        return model([conv, node("GlobalAveragePool", ["c"])], {"x": x}, ["y"], inits), {"x": x}
    if op == "QLinearLeakyRelu":
        return model([conv, node("LeakyRelu", ["c"], alpha=0.2)], {"x": x}, ["y"], inits), {"x": x}
    v = rand(3, 8, low=-2.0, high=2.0)
    if op == "QGemm":
        gemm = node("Gemm", ["v", "g", "gb"], transB=1)
        return model([gemm], {"v": v}, ["y"], {"g": rand(5, 8, seed=4), "gb": rand(5, seed=5)}), {"v": v}
    return model([node("MatMul", ["v", "m"])], {"v": v}, ["y"], {"m": rand(8, 5, seed=6)}), {"v": v}


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("op", ["QLinearConv", "QLinearMatMul", "QGemm", "QLinearAdd", "QLinearMul",
                                "QLinearConcat", "QLinearGlobalAveragePool", "QLinearLeakyRelu"])
def test_qoperator_form_matches_onnxruntime_within_a_step(op: str, tmp_path: Path) -> None:
    """Each quantized operator against onnxruntime's int8 kernel: equal, or one step of the output's
    integer grid apart where the two round a sum differently."""
    proto, feeds = _float_model(op)
    quantized = _quantize(proto, feeds, tmp_path, "QOperator")
    assert op in {n.op_type for n in quantized.graph.node}
    last = quantized.graph.node[-1]
    assert last.op_type == "DequantizeLinear"
    scales = {t.name: onnx.numpy_helper.to_array(t) for t in quantized.graph.initializer}
    step = float(scales[last.input[1]])
    got = asc.build_network(asc.from_onnx(quantized))(*feeds.values())
    want = _session(quantized, fused=True).run(None, feeds)[0]
    assert np.abs(got - want).max() <= step * 1.001
