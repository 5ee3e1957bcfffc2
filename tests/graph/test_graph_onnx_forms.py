"""More ONNX forms: Pad in ``reflect`` and ``edge`` mode, LayerNormalization over any axes, and
element types (float64 models end to end). Each model is built with onnx.helper and its
``build_network`` output compared with onnxruntime's (one of them also through the exported C
library); a type autosched does not run is one clear line naming the value, its node and its type."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")

import graph_models as gm  # noqa: E402  (needs onnx)
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.export.network import export_network, write_network  # noqa: E402
from autosched.graph import GraphError  # noqa: E402
from autosched.graph.network import extract_tasks  # noqa: E402


def _onnxruntime(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def _pads(m: gm.ModelWriter, name: str, widths: list[int]) -> str:
    m.inits.append(numpy_helper.from_array(np.array(widths, np.int64), name))
    return name


def pad_modes() -> onnx.ModelProto:
    """A reflect Pad of both spatial axes before a Conv (not folded into it), an edge Pad of the
    channels and one spatial side, a constant Pad of -0.5 after them."""
    m = gm.ModelWriter(21)
    y = m.node("Pad", ["x", _pads(m, "reflect_pads", [0, 0, 2, 1, 0, 0, 1, 3])], mode="reflect")  # 9 x 11
    y = m.conv(y, 3, 4, 3, bn=False)  # (1, 4, 7, 9)
    y = m.node("Pad", [y, _pads(m, "edge_pads", [0, 1, 0, 2, 0, 2, 3, 0])], mode="edge")  # (1, 7, 10, 11)
    m.inits.append(numpy_helper.from_array(np.array(-0.5, np.float32), "fill"))
    y = m.node("Pad", [y, _pads(m, "const_pads", [0, 0, 1, 0, 0, 0, 0, 1]), "fill"], mode="constant")
    return m.model({"x": (1, 3, 6, 7)}, y, (1, 7, 11, 12), "pads")


def layer_norms() -> onnx.ModelProto:
    """LayerNormalization over axes 1.. (scale of shape (3, 4, 5)), -2.. (scale (4, 5), no bias)
    and the last axis, of a (2, 3, 4, 5) tensor, with a Relu between."""
    m = gm.ModelWriter(22)
    y = m.node("LayerNormalization", ["x", m.const((3, 4, 5), 1.5, 0.5), m.const((3, 4, 5))], axis=1,
               epsilon=1e-5)
    y = m.node("Relu", [y])
    y = m.node("LayerNormalization", [y, m.const((4, 5), 1.5, 0.5)], axis=-2, epsilon=1e-3)
    y = m.node("LayerNormalization", [y, m.const((5,), 1.5, 0.5), m.const((5,))], axis=3)
    return m.model({"x": (2, 3, 4, 5)}, y, (2, 3, 4, 5), "layer_norms")


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("make", [pad_modes, layer_norms], ids=["pad-reflect-edge", "layernorm-axes"])
def test_build_network_matches_onnxruntime(make: object) -> None:
    model = make()  # type: ignore[operator]
    graph = asc.from_onnx(model)
    x = np.random.default_rng(9).standard_normal(graph.shapes["x"]).astype(np.float32)
    np.testing.assert_allclose(asc.build_network(graph)(x), _onnxruntime(model, x), rtol=1e-4, atol=1e-5)


def test_the_new_forms_are_their_own_workloads() -> None:
    pads = [str(t.workload) for t in extract_tasks(asc.from_onnx(pad_modes()))]
    assert pads[0] == "pad('1x3x6x7','0,0,2,1,0,0,1,3',0.0,'reflect','float32')"  # not folded into the conv
    assert "pad('1x4x7x9','0,1,0,2,0,2,3,0',0.0,'edge','float32')" in pads
    assert pads[-1] == "pad('1x7x10x11','0,0,1,0,0,0,0,1',-0.5,'constant','float32')"
    norms = [t.workload for t in extract_tasks(asc.from_onnx(layer_norms()))]
    # (rows, elements normalized together)
    assert [wl.args[:2] for wl in norms if wl.name == "layer_norm"] == [(2, 60), (6, 20), (24, 5)]


@pytest.mark.requires("gcc", "make")
def test_pad_modes_export_as_a_c_library_that_matches_onnxruntime(tmp_path: Path) -> None:
    model = pad_modes()
    x = np.random.default_rng(4).standard_normal((1, 3, 6, 7)).astype(np.float32)
    ref = _onnxruntime(model, x)
    out = write_network(export_network(asc.from_onnx(model)), tmp_path / "pads", [x], [ref])
    done = subprocess.run(["make", "-s", "-C", str(out), "run"], capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok: outputs match the reference" in done.stdout


def _typed_model(elem: int, out_elem: int | None = None, const: np.ndarray | None = None) -> onnx.ModelProto:
    """x (2, 3) of type ``elem`` -> Relu (-> Add of ``const``) -> y of type ``out_elem``."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu_node")]
    inits = []
    if const is not None:
        inits.append(numpy_helper.from_array(const, "k"))
        nodes.append(helper.make_node("Add", ["r", "k"], ["y"], name="add_node"))
    else:
        nodes.append(helper.make_node("Identity", ["r"], ["y"], name="copy_node"))
    graph = helper.make_graph(nodes, "typed", [helper.make_tensor_value_info("x", elem, [2, 3])],
                              [helper.make_tensor_value_info("y", out_elem or elem, [2, 3])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


READ = "input 'x' of node 'relu_node'"


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (lambda: _typed_model(TensorProto.FLOAT16), rf"^{READ} is float16: .* float32 or float64, one type "),
        (lambda: _typed_model(TensorProto.INT64), rf"^{READ} is int64: "),
        (lambda: _typed_model(TensorProto.BFLOAT16), rf"^{READ} is (bfloat16|BFLOAT16): "),
        (lambda: _typed_model(TensorProto.FLOAT, TensorProto.DOUBLE),
         r"^output 'y' of node 'copy_node' is float64: "),
        (lambda: _typed_model(TensorProto.FLOAT, const=np.ones((2, 3))),
         r"^Add node 'add_node': constant 'k' is float64: autosched networks compute in float32 or float64"),
    ],
    ids=["float16-input", "int64-input", "bfloat16-input", "float64-output-of-a-float32-graph",
         "float64-weight-in-a-float32-graph"],
)
def test_a_type_that_networks_do_not_run_is_one_clear_line(model: object, message: str) -> None:
    with pytest.raises(GraphError, match=message) as info:
        asc.from_onnx(model())  # type: ignore[operator]
    assert "\n" not in str(info.value)


def test_unsupported_pad_and_layer_norm_forms_are_one_clear_line() -> None:
    m = gm.ModelWriter()
    y = m.node("Pad", ["x", _pads(m, "p", [0, 1, 0, 1])], mode="wrap")
    with pytest.raises(GraphError, match=r"^Pad node 'pad1': mode 'wrap' is not supported \(only constant, "):
        asc.from_onnx(m.model({"x": (2, 4)}, y, (2, 6), opset=19))
    m = gm.ModelWriter()
    y = m.node("Pad", ["x", _pads(m, "p", [0, 4, 0, 0])], mode="reflect")
    with pytest.raises(GraphError, match=r"^Pad node 'pad1': .*reflect pads '0,4,0,0' must be smaller than"):
        asc.from_onnx(m.model({"x": (2, 4)}, y, (2, 8)))
    m = gm.ModelWriter()
    y = m.node("LayerNormalization", ["x", m.const((3,))], axis=1)
    with pytest.raises(GraphError, match=r"LayerNormalization node .*: scale \(3,\) and bias \(3,\) do not "):
        asc.from_onnx(m.model({"x": (2, 4)}, y, (2, 4)))


def dense_pads_softmax() -> onnx.ModelProto:
    """A reflect Pad, Gemm (B transposed) + Relu, MatMul + Add + Sigmoid, an edge Pad and a Softmax
    over the first axis (operators onnxruntime also runs in float64: no Conv, no Erf)."""
    m = gm.ModelWriter(23)
    y = m.node("Pad", ["x", _pads(m, "reflect_pads", [0, 2, 0, 1])], mode="reflect")  # (2, 12)
    y = m.node("Relu", [m.node("Gemm", [y, m.const((8, 12)), m.const((8,))], transB=1)])
    y = m.node("Sigmoid", [m.node("Add", [m.node("MatMul", [y, m.const((8, 5))]), m.const((5,))])])
    y = m.node("Pad", [y, _pads(m, "edge_pads", [1, 0, 0, 2])], mode="edge")  # (3, 7)
    return m.model({"x": (2, 9)}, m.node("Softmax", [y], axis=0), (3, 7), "dense_pads")


def as_float64(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same model in float64: its float32 initializers, inputs and outputs retyped."""
    double = onnx.ModelProto()
    double.CopyFrom(model)
    for t in double.graph.initializer:
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
    for v in (*double.graph.input, *double.graph.output):
        v.type.tensor_type.elem_type = TensorProto.DOUBLE
    return double


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("make", [dense_pads_softmax, gm.attention_like, layer_norms],
                         ids=["gemm-matmul-pads-softmax", "attention", "layernorm-axes"])
def test_a_float64_model_runs_in_float64_and_matches_onnxruntime(make: object) -> None:
    model = as_float64(make())  # type: ignore[operator]
    graph = asc.from_onnx(model)
    assert graph.dtype == "float64" and all(c.dtype == np.float64 for c in graph.constants.values())
    assert all(t.workload.args[-1] == "float64" for t in extract_tasks(graph))
    x = np.random.default_rng(12).standard_normal(graph.shapes["x"])
    out = asc.build_network(graph)(x)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, _onnxruntime(model, x), rtol=1e-10, atol=1e-12)  # far below float32's


def test_a_float64_graph_does_not_export_and_says_so() -> None:
    graph = asc.from_onnx(as_float64(dense_pads_softmax()))
    with pytest.raises(GraphError, match=r"^graph '.*' computes in float64: C exports are float32 only$"):
        export_network(graph)
