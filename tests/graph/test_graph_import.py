"""Networks without a compiler: ONNX import, batch-norm folding, fusion, tasks, bad input, the
``autosched tasks`` command, and the fused workloads' references against the te evaluator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")

import graph_models as gm  # noqa: E402  (needs onnx)
from onnx import TensorProto, helper  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.cli import main  # noqa: E402
from autosched.graph import GraphBuilder, GraphError, extract_tasks, fuse  # noqa: E402
from autosched.ops import get_workload  # noqa: E402

#: ResNet-18's distinct fused convolutions and how often each occurs, written down from the
#: architecture: (C, H, K, kernel, stride, pad, epilogue) -> weight. In each of stages 2-4 the first
#: block's 3x3/2 and 1x1/2 projection occur once, the second 3x3 (with the residual add) twice, the
#: second block's first 3x3 once; stage 1 has no projection, so both its 3x3 kinds occur twice.
RESNET18_CONVS = {
    (3, 224, 64, 7, 2, 3, "bias,relu"): 1,
    (64, 56, 64, 3, 1, 1, "bias,relu"): 2,
    (64, 56, 64, 3, 1, 1, "bias,add,relu"): 2,
    **{
        key: weight
        for c, h in ((64, 56), (128, 28), (256, 14))
        for key, weight in (
            ((c, h, 2 * c, 3, 2, 1, "bias,relu"), 1),
            ((c, h, 2 * c, 1, 2, 0, "bias"), 1),
            ((2 * c, h // 2, 2 * c, 3, 1, 1, "bias,add,relu"), 2),
            ((2 * c, h // 2, 2 * c, 3, 1, 1, "bias,relu"), 1),
        )
    },
}


@pytest.mark.parametrize(
    ("target", "conv", "last_arg"),
    [("c -vector-bytes=32", "fused_conv2d_packed", 8), ("c -vector-bytes=64", "fused_conv2d_packed", 16),
     ("opencl", "fused_conv", 1)],
)
def test_resnet18_gives_its_distinct_convolutions_with_their_weights(
    target: str, conv: str, last_arg: int
) -> None:
    tasks = extract_tasks(asc.from_onnx(gm.resnet18()), target)
    convs = {}
    for t in tasks:
        if t.workload.name == "fused_conv":  # a GPU's: computed directly, groups 1
            data, weight, strides, pads, dilations, groups, epi, _ = t.workload.args
            (n, c, h, w), (k, _, r, s) = (tuple(map(int, x.split("x"))) for x in (data, weight))
            stride, pad = int(strides.split(",")[0]), int(pads.split(",")[0])
            assert (n, h, r, groups, strides, pads, dilations) == (1, w, s, 1, f"{stride},{stride}",
                                                                  ",".join([str(pad)] * 4), "1,1")
            convs[(c, h, k, r, stride, pad, epi)] = t.weight
        elif t.workload.name in (conv, "fused_conv2d_nchwc"):  # on a CPU every kernel is packed by a
            # vector of output channels (8 with 32-byte vectors, 16 with 64-byte ones), and all but
            # the first convolution run on activations blocked the same way
            n, c, h, w, k, r, s, stride, pad, block, epi, _ = t.workload.args
            assert (n, h, r, block) == (1, w, s, last_arg)
            convs[(c, h, k, r, stride, pad, epi)] = t.weight
    assert convs == RESNET18_CONVS
    assert sum(convs.values()) == 20  # ResNet-18's 20 convolutions (17 + 3 projections)
    others = {str(t.workload): t.weight for t in tasks if t.workload.name not in (conv, "fused_conv2d_nchwc")}
    # on a CPU the classifier's weight is packed by blocks of 2 vectors (4 with 64-byte vectors)
    dense = {8: "fused_dense_packed(1,1000,512,16,", 16: "fused_dense_packed(1,1000,512,64,"}.get(
        last_arg, "fused_dense(1,1000,512,")
    blocked = {  # the pool's output blocked, the last convolution's output back to NCHW
        f"transpose('1x{64 // last_arg}x{last_arg}x56x56','0,1,3,4,2','float32')": 1,
        f"transpose('1x{512 // last_arg}x7x7x{last_arg}','0,1,4,2,3','float32')": 1,
    } if last_arg > 1 else {}
    assert others == {
        "max_pool2d(1,64,112,112,3,2,1,'float32')": 1,
        "global_avg_pool2d(1,512,7,7,'float32')": 1,
        f"{dense}'bias','float32')": 1,
        **blocked,
    }
    total = sum(t.flops * t.weight for t in tasks)
    assert 3.6e9 < total < 3.7e9  # 1.8 G multiply-adds, as usually quoted for ResNet-18
    assert sum(t.share for t in tasks) == pytest.approx(1.0)


def test_batch_norm_is_folded_into_the_convolution() -> None:
    model = gm.residual_block()
    graph = asc.from_onnx(model)
    assert [n.op for n in graph.nodes] == ["conv2d", "bias_add", "relu", "conv2d", "bias_add", "add", "relu"]
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    bn = [n for n in model.graph.node if n.op_type == "BatchNormalization"][0]
    gamma, beta, mean, var = (inits[v].astype(np.float64) for v in bn.input[1:])
    conv = [n for n in model.graph.node if n.op_type == "Conv"][0]
    scale = gamma / np.sqrt(var + 1e-5)
    folded = graph.constants[graph.nodes[0].inputs[1]]
    np.testing.assert_allclose(folded, inits[conv.input[1]] * scale[:, None, None, None], rtol=1e-6)
    np.testing.assert_allclose(graph.constants[graph.nodes[1].inputs[1]], beta - mean * scale, rtol=1e-5)


def test_an_opset_13_erf_gelu_subgraph_becomes_one_gelu() -> None:
    graph = asc.from_onnx(gm.erf_gelu_mlp())
    assert [n.op for n in graph.nodes] == ["dense", "bias_add", "gelu"]
    # on a CPU the weight is packed: its 10 outputs by a block of 16
    assert [str(t.workload) for t in extract_tasks(graph)] == [
        "fused_dense_packed(3,10,12,16,'bias,gelu','float32')"]
    assert [str(t.workload) for t in extract_tasks(graph, "opencl")] == [
        "fused_dense(3,10,12,'bias,gelu','float32')"]


def test_fusion_makes_conv_bias_relu_and_conv_bias_add_relu_workloads() -> None:
    groups = fuse(asc.from_onnx(gm.residual_block()))
    assert [g.workload.args[-2] for g in groups if g.workload] == ["bias,relu", "bias,add,relu"]
    second = groups[1]
    assert second.inputs[-1] == "x" and len(second.nodes) == 4  # conv, bias, residual add, relu


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("fused_conv2d", (1, 6, 9, 9, 8, 3, 3, 1, 1, 1, "bias,relu")),
        ("fused_conv2d", (1, 4, 8, 8, 4, 3, 3, 2, 1, 1, "bias,add,relu")),
        ("fused_conv2d", (1, 6, 7, 7, 6, 3, 3, 1, 1, 6, "bias,sigmoid")),  # depthwise
        ("fused_conv2d", (1, 4, 7, 7, 6, 1, 1, 1, 0, 2, "")),  # two groups
        ("fused_dense", (3, 5, 7, "bias,gelu")),
        ("fused_batch_matmul", (2, 3, 4, 5, "add")),
        ("fused_elementwise", (2, 3, 4, "bias,add,relu")),
        ("global_avg_pool2d", (1, 3, 4, 5)),
        ("fused_elementwise", (2, 3, 4, "scale,sub,mul,div,bias")),
        ("fused_conv2d", (1, 4, 6, 6, 4, 3, 3, 1, 1, 1, "bias,scale,mul,relu")),
        ("fused_conv2d_packed", (1, 6, 9, 9, 8, 3, 3, 1, 1, 8, "bias,relu")),
        ("fused_conv2d_packed", (1, 4, 8, 7, 16, 3, 3, 2, 1, 8, "bias,add,relu")),
        ("fused_conv2d_packed", (1, 3, 5, 6, 12, 1, 1, 1, 0, 4, "")),
        ("transpose", ("2x3x4x5", "0,2,3,1")),
        ("broadcast_to", ("1x3x1x5", "2x3x4x5")),
        ("pad", ("1x2x3x4", "0,0,1,2,0,1,0,3", -0.5)),
        ("pad", ("1x2x3x4", "0,1,2,0,0,0,1,3", 0.0, "reflect")),
        ("pad", ("2x1x3x4", "1,2,0,3,0,3,2,0", 0.0, "edge")),
        ("layer_norm", (4, 9, 1e-5)),
        ("softmax_axis", (2, 7, 3)),
    ],
)
def test_fused_workload_references_match_the_te_evaluator(name: str, args: tuple[object, ...]) -> None:
    wl = get_workload(name, args)
    xs = wl.random_inputs(seed=1)
    np.testing.assert_allclose(wl.reference(*xs)[0], wl.evaluate(*xs)[0], rtol=1e-5, atol=1e-6)


def test_arithmetic_with_constants_becomes_fused_bias_and_scale_steps() -> None:
    graph = asc.from_onnx(gm.arithmetic())
    tasks = [str(t.workload) for t in extract_tasks(graph)]
    # Mul by a (1, C, 1, 1) constant, Sub of a scalar, Div by a scalar: per-channel steps of the conv
    assert tasks[0] == "fused_conv2d(1,3,6,6,4,3,3,1,1,1,'bias,scale,bias,scale,relu','float32')"
    # the computed (1, C, 1, 1) gate is broadcast by a kernel; constant - value keeps its order
    assert "broadcast_to('1x4x1x1','1x4x6x6','float32')" in tasks
    assert "fused_elementwise(1,4,36,'sub,sigmoid,bias','float32')" in tasks
    # a standalone BatchNormalization is a scale and a bias, fused after the Div
    assert tasks[-1] == "fused_elementwise(1,4,36,'div,scale,bias','float32')"
    scalar_sub = graph.constants[graph.nodes[3].inputs[1]]
    assert scalar_sub.shape == (4,) and np.all(scalar_sub == scalar_sub[0])


def test_a_zero_spatial_pad_is_folded_into_the_conv_and_other_pads_are_kernels() -> None:
    graph = asc.from_onnx(gm.padded_convs())
    tasks = [str(t.workload) for t in extract_tasks(graph)]
    assert tasks == [
        "fused_conv2d(1,3,7,7,4,3,3,1,1,1,'bias,relu','float32')",  # Pad 1 + Conv pad 0
        "pad('1x4x7x7','0,0,0,1,0,0,1,0',0.5,'constant','float32')",
        "fused_conv2d(1,4,8,8,4,3,3,2,0,1,'bias,relu','float32')",
    ]


def test_layer_norm_transpose_and_softmax_on_any_axis_are_tasks() -> None:
    tasks = [str(t.workload) for t in extract_tasks(asc.from_onnx(gm.attention_like()))]
    assert tasks[0] == "layer_norm(10,8,9.999999747378752e-06,'float32')"
    assert "transpose('2x5x2x4','0,2,1,3','float32')" in tasks
    assert "softmax_axis(4,5,4,'float32')" in tasks and tasks[-1] == "softmax_axis(2,5,8,'float32')"
    assert "fused_elementwise(2,5,8,'mul,sub','float32')" in tasks


def test_unsupported_forms_of_the_new_operators_are_one_clear_line() -> None:
    m = gm.ModelWriter()
    y = m.node("Mul", ["x", m.const((3,))])
    with pytest.raises(GraphError, match=r"Mul node 'mul2': shapes \(2, 4\) and \(3,\) do not broadcast"):
        asc.from_onnx(m.model({"x": (2, 4)}, y, (2, 4)))


def _save(model: onnx.ModelProto, path: Path) -> Path:
    onnx.save(model, path)
    return path


def test_bad_models_are_one_clear_line(tmp_path: Path) -> None:
    text = tmp_path / "notes.onnx"
    text.write_text("this is not a model\n")
    with pytest.raises(GraphError, match=r"notes.onnx: not an ONNX model"):
        asc.from_onnx(text)
    m = gm.ModelWriter()
    y = m.node("Hardmax", ["x"])  # (LeakyRelu, the operator this used, is supported now)
    with pytest.raises(GraphError, match=r"unsupported ONNX operator 'Hardmax' \(node 'hardmax1'\)"):
        asc.from_onnx(m.model({"x": (1, 4)}, y, (1, 4)))
    old = gm.ModelWriter()
    with pytest.raises(GraphError, match="opset 11 is not supported"):
        asc.from_onnx(old.model({"x": (1, 4)}, old.node("Relu", ["x"]), (1, 4), opset=11))


def test_dynamic_shapes_need_values() -> None:
    m = gm.ModelWriter()
    y = m.node("Relu", ["x"])
    graph = helper.make_graph(
        m.nodes, "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, ["batch", 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(GraphError, match=r"input 'x' has a dynamic dimension 'batch' without a value"):
        asc.from_onnx(model)
    fixed = asc.from_onnx(model, shapes={"x": (3, 4)})
    assert fixed.shapes[fixed.outputs[0]] == (3, 4)


def test_the_builder_checks_shapes_where_they_are_made() -> None:
    g = GraphBuilder("bad")
    x = g.input("x", (1, 3, 8, 8))
    w = g.constant(np.zeros((4, 2, 3, 3)), "w")
    with pytest.raises(GraphError, match=r"weight \(4, 2, 3, 3\) does not fit input \(1, 3, 8, 8\)"):
        g.conv2d(x, w)
    with pytest.raises(GraphError, match="no value named 'nope'"):
        g.relu("nope")
    with pytest.raises(GraphError, match="shapes"):
        g.add(x, g.constant(np.zeros((1, 3, 8, 7))))
    with pytest.raises(GraphError, match="needs at least one input and one output"):
        GraphBuilder("empty").build()


def test_tasks_command_lists_workloads_flops_weights_and_shares(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _save(gm.residual_block(), tmp_path / "block.onnx")
    assert main(["tasks", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "2 tasks, 2 kernels, 0.15 MFLOP in all"
    first = "fused_conv2d_packed(1,8,8,8,8,3,3,1,1,8,'bias,relu','float32')"  # a CPU's packed weights
    assert out[2].split() == ["0", "0.075", "1", "49.8%", first]
    assert out[3].split()[-1] == "fused_conv2d_packed(1,8,8,8,8,3,3,1,1,8,'bias,add,relu','float32')"
    assert main(["tasks", str(path), "--target", "opencl"]) == 0  # a GPU's kernels read them as they are,
    listed = capsys.readouterr().out.splitlines()[2].split()[-1]  # each pixel from its window
    assert listed == "fused_conv('1x8x8x8','8x8x3x3','1,1','1,1,1,1','1,1',1,'bias,relu','float32')"
    (tmp_path / "junk.onnx").write_bytes(b"\x00\x01junk")
    assert main(["tasks", str(tmp_path / "junk.onnx")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "junk.onnx: not an ONNX model" in err[0]
