"""Small versions of the seeds' networks (the TVM and Ansor papers' end-to-end set, plus
SqueezeNet, ShuffleNet, a GRU and nn.TransformerEncoderLayer) import unchanged and match
onnxruntime: built node for node with onnx.helper (no torch needed), and exported by PyTorch's
TorchScript exporter where torch is installed."""

from __future__ import annotations

from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")

from onnx_cases import compare  # noqa: E402
from onnx_zoo import ZOO  # noqa: E402


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("name", list(ZOO))
def test_helper_built_networks_match_onnxruntime(name: str) -> None:
    proto, feeds = ZOO[name]()
    compare(proto, feeds)


@pytest.mark.requires("gcc", "torch")
@pytest.mark.parametrize("name", list(ZOO))  # the same set
def test_torch_exported_networks_match_onnxruntime(name: str, tmp_path: Path) -> None:
    import torch_zoo  # needs torch

    path, feeds = torch_zoo.export(name, tmp_path)
    compare(onnx.load(path), feeds)


@pytest.mark.requires("gcc")
def test_model_local_functions_are_inlined() -> None:
    from onnx import helper
    from onnx_cases import model, rand

    body = [helper.make_node("Mul", ["a", "a"], ["sq"]), helper.make_node("Tanh", ["sq"], ["out"])]
    square_tanh = helper.make_function("local", "SquareTanh", ["a"], ["out"], body,
                                       [helper.make_opsetid("", 17)])
    call = helper.make_node("SquareTanh", ["x"], ["y"], domain="local", name="f")
    proto = model([call], {"x": rand(2, 3)}, ["y"], check=False)
    proto.functions.append(square_tanh)
    proto.opset_import.append(helper.make_opsetid("local", 1))
    compare(proto, {"x": rand(2, 3)})
