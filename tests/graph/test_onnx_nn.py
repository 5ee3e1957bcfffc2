"""ONNX network operators with their attributes against onnxruntime: Conv (1-D to 3-D, pads,
dilations, auto_pad), ConvTranspose, pooling (ceil_mode, count_include_pad, 3-D), global pooling,
BatchNormalization of any rank, InstanceNormalization, reductions, Resize, MatMul of any rank and
Gemm."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")

from onnx_cases import compare, model, node, rand  # noqa: E402

import autosched as asc  # noqa: E402

CONVS = {
    "1-D": ((1, 3, 11), (4, 3, 3), {"strides": [2], "pads": [1, 2], "dilations": [2]}),
    "2-D-asymmetric": ((1, 3, 9, 8), (4, 3, 3, 2), {"strides": [2, 1], "pads": [0, 1, 2, 0]}),
    "2-D-dilated-groups": ((1, 4, 9, 9), (6, 2, 3, 3), {"dilations": [2, 1], "group": 2, "pads": [1] * 4}),
    "2-D-same-upper": ((1, 3, 8, 7), (4, 3, 4, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    "2-D-same-lower": ((1, 3, 8, 7), (4, 3, 4, 3), {"strides": [3, 2], "auto_pad": "SAME_LOWER"}),
    "2-D-valid": ((1, 3, 8, 7), (4, 3, 3, 3), {"auto_pad": "VALID", "kernel_shape": [3, 3]}),
    "3-D": ((1, 3, 5, 6, 7), (4, 3, 3, 3, 3), {"strides": [1, 2, 2], "pads": [1, 1, 1, 1, 0, 1]}),
}


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("case", list(CONVS))
def test_conv_with_its_attributes(case: str) -> None:
    xs, ws, attrs = CONVS[case]
    x = rand(*xs)
    inits = {"w": rand(*ws, seed=1), "b": rand(ws[0], seed=2)}
    compare(model([node("Conv", ["x", "w", "b"], **attrs)], {"x": x}, ["y"], inits), {"x": x})


@pytest.mark.requires("gcc")
def test_conv3d_then_batch_norm_is_folded_and_a_standalone_5d_batch_norm_is_a_scale() -> None:
    x = rand(1, 2, 4, 5, 5)
    bn = [rand(3, seed=s, low=0.5, high=1.5) for s in (3, 4, 5, 6)]
    nodes = [node("Conv", ["x", "w"], ["c"], pads=[1] * 6),
             node("BatchNormalization", ["c", "g", "b", "m", "v"], ["n"]), node("Relu", ["n"], ["r"]),
             node("BatchNormalization", ["r", "g", "b", "m", "v"], ["y"], epsilon=1e-3)]
    inits = {"w": rand(3, 2, 3, 3, 3, seed=7), **dict(zip("gbmv", bn, strict=True))}
    proto = model(nodes, {"x": x}, ["y"], inits)
    assert [n.op for n in asc.from_onnx(proto).nodes] == ["conv", "bias_add", "relu", "scale", "bias_add"]
    compare(proto, {"x": x})


CONV_TRANSPOSES = {
    "dcgan-first": ((1, 6, 1, 1), (6, 4, 4, 4), {"strides": [1, 1]}),
    "stride-2-pad-1": ((1, 4, 5, 5), (4, 3, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "output-padding-groups": ((1, 4, 5, 4), (4, 2, 3, 3),
                              {"strides": [2, 3], "output_padding": [1, 2], "group": 2}),
    "output-shape": ((1, 3, 4, 4), (3, 2, 3, 3), {"strides": [2, 2], "output_shape": [8, 9]}),
    "same-upper-dilated": ((1, 3, 4, 5), (3, 2, 3, 2), {"strides": [2, 2], "auto_pad": "SAME_UPPER",
                                                        "dilations": [1, 2]}),
    "1-D": ((1, 3, 7), (3, 2, 3), {"strides": [2], "pads": [1, 0]}),
}


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("case", list(CONV_TRANSPOSES))
def test_conv_transpose_with_its_attributes(case: str) -> None:
    xs, ws, attrs = CONV_TRANSPOSES[case]
    x = rand(*xs)
    k = ws[1] * attrs.get("group", 1)  # type: ignore[operator]
    inits = {"w": rand(*ws, seed=1), "b": rand(k, seed=2)}
    compare(model([node("ConvTranspose", ["x", "w", "b"], **attrs)], {"x": x}, ["y"], inits), {"x": x})


@pytest.mark.requires("gcc")
def test_conv_transpose_then_batch_norm_is_folded() -> None:
    x = rand(1, 4, 3, 3)
    bn = [rand(6, seed=s, low=0.5, high=1.5) for s in (3, 4, 5, 6)]
    nodes = [node("ConvTranspose", ["x", "w"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1], group=2),
             node("BatchNormalization", ["c", "g", "b", "m", "v"], ["y"])]
    inits = {"w": rand(4, 3, 4, 4, seed=7), **dict(zip("gbmv", bn, strict=True))}
    proto = model(nodes, {"x": x}, ["y"], inits)
    assert [n.op for n in asc.from_onnx(proto).nodes] == ["conv_transpose", "bias_add"]
    compare(proto, {"x": x})


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("strides", [[1, 1], [2, 2]])
def test_conv_transpose_of_one_position_is_a_dense_with_its_epilogue(strides: list[int]) -> None:
    """DCGAN's first generator layer (1x1 input, no pads) with its batch norm and ReLU: one dense
    kernel with the bias (repeated over the taps) and the ReLU as its epilogue, the reshape after
    them, the 4-D weight gone; the network matches onnxruntime."""
    x = rand(2, 6, 1, 1)
    bn = [rand(5, seed=s, low=0.5, high=1.5) for s in (3, 4, 5, 6)]
    nodes = [node("ConvTranspose", ["x", "w"], ["c"], strides=strides),
             node("BatchNormalization", ["c", "g", "b", "m", "v"], ["n"]), node("Relu", ["n"], ["y"])]
    inits = {"w": rand(6, 5, 4, 3, seed=7), **dict(zip("gbmv", bn, strict=True))}
    proto = model(nodes, {"x": x}, ["y"], inits)
    graph = asc.from_onnx(proto)
    assert [n.op for n in graph.nodes] == ["reshape", "dense", "bias_add", "reshape", "relu"]
    assert sorted(v.shape for v in graph.constants.values()) == [(5 * 4 * 3,), (5 * 4 * 3, 6)]
    tasks = asc.graph.network.network_tasks(graph)
    assert [t.workload.name for t in tasks] == ["fused_dense_packed"]
    assert "bias,relu" in str(tasks[0].workload)
    compare(proto, {"x": x})


POOLS = {
    "max-ceil": ("MaxPool", (1, 2, 13, 13), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    "max-asymmetric-dilated": ("MaxPool", (1, 2, 9, 8), {"kernel_shape": [2, 3], "pads": [0, 1, 1, 0],
                                                          "dilations": [2, 1]}),
    "avg-exclude-pad-ceil": ("AveragePool", (1, 2, 8, 7), {"kernel_shape": [3, 3], "strides": [2, 2],
                                                            "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    "avg-include-pad": ("AveragePool", (1, 2, 7, 7), {"kernel_shape": [3, 2], "pads": [1, 0, 1, 1],
                                                       "count_include_pad": 1}),
    "avg-same-upper": ("AveragePool", (1, 2, 7, 6), {"kernel_shape": [3, 3], "strides": [2, 2],
                                                      "auto_pad": "SAME_UPPER"}),
    "max-3-D": ("MaxPool", (1, 2, 5, 6, 7),
                {"kernel_shape": [2, 3, 3], "strides": [1, 2, 2], "pads": [0, 1, 1] * 2}),
    "avg-3-D": ("AveragePool", (1, 2, 5, 6, 6), {"kernel_shape": [3, 2, 2], "strides": [2, 2, 2]}),
    "max-1-D": ("MaxPool", (1, 2, 9), {"kernel_shape": [3], "strides": [2]}),
}


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("case", list(POOLS))
def test_pooling_with_its_attributes(case: str) -> None:
    op, xs, attrs = POOLS[case]
    x = rand(*xs)
    compare(model([node(op, ["x"], **attrs)], {"x": x}, ["y"]), {"x": x})


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pooling_of_3d_data(op: str) -> None:
    x = rand(1, 3, 4, 5, 6)
    compare(model([node(op, ["x"])], {"x": x}, ["y"]), {"x": x})


@pytest.mark.requires("gcc")
def test_instance_normalization() -> None:
    x = rand(2, 3, 5, 4)
    inits = {"s": rand(3, seed=1, low=0.5, high=1.5), "b": rand(3, seed=2)}
    nodes = [node("InstanceNormalization", ["x", "s", "b"], epsilon=1e-4)]
    compare(model(nodes, {"x": x}, ["y"], inits), {"x": x})


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(("opset", "per"), [(21, "channel"), (18, "group")])
def test_group_normalization_per_channel_and_per_group(opset: int, per: str) -> None:
    x = rand(2, 6, 5, 4)
    n = 6 if per == "channel" else 3
    inits = {"s": rand(n, seed=1, low=0.5, high=1.5), "b": rand(n, seed=2)}
    nodes = [node("GroupNormalization", ["x", "s", "b"], epsilon=1e-4, num_groups=3)]
    compare(model(nodes, {"x": x}, ["y"], inits, opset=opset, check=False), {"x": x})


REDUCES = {
    "mean-attr-axes": ("ReduceMean", 17, {"axes": [-1, 1]}, None),
    "sum-input-axes-drop": ("ReduceSum", 17, {"keepdims": 0}, np.array([0, 2], np.int64)),
    "max-all": ("ReduceMax", 17, {}, None),
    "min-opset18-input": ("ReduceMin", 18, {"keepdims": 0}, np.array([3], np.int64)),
    "mean-noop": ("ReduceMean", 18, {"noop_with_empty_axes": 1}, None),
    "sumsquare-axes": ("ReduceSumSquare", 17, {"axes": [1, 3]}, None),
    "l2-drop": ("ReduceL2", 17, {"axes": [2], "keepdims": 0}, None),
    "l1-all": ("ReduceL1", 17, {}, None),
    "logsumexp-keep": ("ReduceLogSumExp", 17, {"axes": [-1]}, None),
    "logsumexp-drop-input": ("ReduceLogSumExp", 18, {"keepdims": 0}, np.array([1, 2], np.int64)),
}


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("case", list(REDUCES))
def test_reductions_with_axes_keepdims_and_noop(case: str) -> None:
    op, opset, attrs, axes = REDUCES[case]
    x = rand(2, 3, 4, 5)
    inputs, inits = (["x", "axes"], {"axes": axes}) if axes is not None else (["x"], {})
    nodes = [node(op, inputs, ["r"], **attrs), node("Relu", ["r"], ["y"])]
    compare(model(nodes, {"x": x}, ["y"], inits, opset=opset), {"x": x})


RESIZES = {
    "nearest-asymmetric-floor-scales": ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                                         "nearest_mode": "floor"}, "scales", [1.0, 1.0, 2.0, 3.0]),
    "nearest-half-pixel-sizes": ({"mode": "nearest"}, "sizes", [1, 2, 7, 5]),
    "linear-half-pixel": ({"mode": "linear"}, "sizes", [1, 2, 9, 7]),
    "linear-align-corners": ({"mode": "linear", "coordinate_transformation_mode": "align_corners"}, "sizes",
                             [1, 2, 8, 10]),
    "linear-pytorch-half-pixel": ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
                                  "scales", [1.0, 1.0, 2.0, 2.0]),
}


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("case", list(RESIZES))
def test_resize_modes(case: str) -> None:
    attrs, kind, values = RESIZES[case]
    x = rand(1, 2, 4, 5)
    if kind == "scales":
        inputs, inits = ["x", "", "scales"], {"scales": np.array(values, np.float32)}
    else:
        inputs, inits = ["x", "", "", "sizes"], {"sizes": np.array(values, np.int64)}
    compare(model([node("Resize", inputs, **attrs)], {"x": x}, ["y"], inits), {"x": x})


MATMULS = {
    "4-D-attention": ((2, 3, 4, 5), (2, 3, 5, 6), False),
    "broadcast-batch": ((2, 1, 4, 5), (3, 5, 6), False),
    "batched-times-2-D": ((2, 3, 4, 5), (5, 6), False),
    "constant-3-D-right": ((2, 4, 5), (2, 5, 6), True),
    "constant-2-D-right-of-4-D": ((2, 3, 4, 5), (5, 6), True),
    "vector-left": ((5,), (2, 5, 6), False),
    "vector-right": ((2, 3, 5), (5,), False),
}


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("case", list(MATMULS))
def test_matmul_of_any_rank(case: str) -> None:
    sa, sb, const = MATMULS[case]
    a, b = rand(*sa, seed=1), rand(*sb, seed=2)
    feeds = {"a": a} if const else {"a": a, "b": b}
    proto = model([node("MatMul", ["a", "b"])], feeds, ["y"], {"b": b} if const else {})
    compare(proto, feeds)


GEMMS = {
    "transA-alpha-beta-row": ({"transA": 1, "alpha": 0.5, "beta": 2.0}, (5, 3), (5, 4), (1, 4), True),
    "transB-matrix-C": ({"transB": 1, "beta": -1.0}, (3, 5), (4, 5), (3, 4), True),
    "column-C": ({}, (3, 5), (5, 4), (3, 1), True),
    "computed-B-and-C": ({"transB": 1, "alpha": 2.0, "beta": 0.5}, (3, 5), (4, 5), (3, 4), False),
}


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("case", list(GEMMS))
def test_gemm_with_transposes_alpha_and_beta(case: str) -> None:
    attrs, sa, sb, sc, const = GEMMS[case]
    a, b, c = rand(*sa, seed=1), rand(*sb, seed=2), rand(*sc, seed=3)
    feeds = {"a": a} if const else {"a": a, "b": b, "c": c}
    proto = model([node("Gemm", ["a", "b", "c"], **attrs)], feeds, ["y"], {"b": b, "c": c} if const else {})
    compare(proto, feeds)


@pytest.mark.requires("gcc")
def test_a_conv_whose_output_is_also_a_graph_output_keeps_it_and_its_batch_norm() -> None:
    x = rand(1, 2, 5, 5)
    bn = [rand(3, seed=s, low=0.5, high=1.5) for s in (3, 4, 5, 6)]
    nodes = [node("Conv", ["x", "w"], ["c"]), node("BatchNormalization", ["c", "g", "b", "m", "v"], ["y"])]
    inits = {"w": rand(3, 2, 3, 3, seed=7), **dict(zip("gbmv", bn, strict=True))}
    proto = model(nodes, {"x": x}, ["c", "y"], inits)
    compare(proto, {"x": x})
