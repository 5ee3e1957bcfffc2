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


def _quantized(name: str, tmp_path: Path) -> tuple[onnx.ModelProto, str, tuple[int, ...]]:
    """Zoo model ``name`` quantized to QDQ by onnxruntime, calibrated on 8 random inputs."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    proto, feeds = ZOO[name]()
    (input_name, example), = feeds.items()

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(1)
            self.batches = iter([{input_name: rng.standard_normal(example.shape).astype(np.float32)}
                                 for _ in range(8)])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.batches, None)

    src, dst = tmp_path / f"{name}.onnx", tmp_path / f"{name}_qdq.onnx"
    onnx.save(proto, str(src))
    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return onnx.load(str(dst)), input_name, example.shape


def _session(proto: onnx.ModelProto, fused: bool) -> ort.InferenceSession:
    options = ort.SessionOptions()
    if not fused:  # QuantizeLinear / DequantizeLinear run as written: the quantized model's definition
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet50"])
def test_a_qdq_model_computes_the_quantized_model(name: str, tmp_path: Path) -> None:
    proto, input_name, shape = _quantized(name, tmp_path)
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
