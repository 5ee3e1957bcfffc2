"""The convolution-network operators of the graph builder (conv of 1 to 3 axes, conv_transpose,
pool, global_pool, instance_norm, resize) built into networks with gcc and compared with
onnxruntime running the same one-node ONNX model, attributes included, on shapes that do not
divide evenly; the cases that stay the older 2-D nodes, and one-line errors."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")

from onnx_nodes import close, onnx_node, rand, run_graph  # noqa: E402  (needs onnx)

import autosched as asc  # noqa: E402
from autosched.graph import GraphError, fuse  # noqa: E402
from autosched.graph.sink_reshape import sink_reshapes  # noqa: E402

pytestmark = pytest.mark.requires("gcc")

# (x, w, strides, pads, dilations, groups, bias)
CONVS = {
    "1d-strided-dilated-grouped": ((2, 4, 13), (6, 2, 3), (2,), (1, 2), (2,), 2, True),
    "2d-asymmetric": ((1, 3, 11, 10), (5, 3, 3, 2), (2, 1), (1, 0, 2, 1), (1, 2), 1, False),
    "3d-r3d-stem": ((1, 3, 5, 9, 8), (4, 3, 3, 5, 5), (1, 2, 2), (1, 2, 2, 1, 2, 2), (1, 1, 1), 1, True),
    "3d-depthwise": ((1, 4, 4, 5, 6), (4, 1, 3, 3, 3), (2, 1, 1), (0, 1, 1, 1, 1, 0), (1, 1, 1), 4, False),
}


@pytest.mark.parametrize("case", list(CONVS))
def test_conv_matches_onnxruntime_and_fuses_its_bias_and_relu(case: str) -> None:
    xs, ws, strides, pads, dilations, groups, bias = CONVS[case]
    rng = np.random.default_rng(1)
    feeds = {"x": rand(rng, *xs)}
    consts = {"w": rand(rng, *ws, scale=0.3)} | ({"b": rand(rng, ws[0])} if bias else {})
    attrs = {"strides": list(strides), "pads": list(pads), "dilations": list(dilations), "group": groups}
    want = np.maximum(onnx_node("Conv", feeds, consts, ["x", *consts], **attrs), 0)

    def make(g: asc.GraphBuilder, x: str, w: str, b: str | None = None) -> str:
        y = g.conv(x, w, b, strides=strides, pads=pads, dilations=dilations, groups=groups)
        return g.relu(y)

    got, graph = run_graph(feeds, consts, make)
    close(got, want)
    (group,) = fuse(graph)  # one kernel: the convolution with its epilogue
    assert group.workload is not None and group.workload.name == "fused_conv"
    assert group.workload.args[-2] == ("bias,relu" if bias else "relu")


def test_a_2d_conv_with_equal_strides_and_pads_stays_a_conv2d_node() -> None:
    g = asc.GraphBuilder("c")
    x, w = g.input("x", (1, 4, 9, 9)), g.constant(np.ones((8, 2, 3, 3)), "w")
    g.output(g.conv(x, w, strides=(2, 2), pads=(1, 1, 1, 1), dilations=(1, 1), groups=2))
    assert [n.op for n in g.build().nodes] == ["conv2d"]


# (x, w, strides, pads, output_padding, dilations, groups)
TRANSPOSED = {
    "dcgan-4x4-stride2": ((1, 8, 4, 4), (8, 4, 4, 4), (2, 2), (1, 1, 1, 1), (0, 0), (1, 1), 1),
    "dcgan-first-1x1": ((2, 6, 1, 1), (6, 5, 4, 4), (1, 1), (0, 0, 0, 0), (0, 0), (1, 1), 1),
    "2d-dilated-grouped": ((1, 4, 5, 6), (4, 2, 3, 2), (3, 2), (0, 2, 1, 0), (1, 1), (2, 1), 2),
    "2d-phases-grouped": ((1, 4, 5, 6), (4, 3, 3, 3), (2, 3), (1, 0, 0, 2), (1, 2), (1, 1), 2),
    "1d-output-padding": ((2, 3, 7), (3, 2, 4), (2,), (0, 3), (1,), (1,), 1),
    "3d": ((1, 2, 3, 4, 3), (2, 3, 2, 3, 3), (2, 1, 2), (0, 1, 1, 1, 0, 1), (1, 0, 0), (1, 1, 1), 1),
}


@pytest.mark.parametrize("case", list(TRANSPOSED))
def test_conv_transpose_matches_onnxruntime(case: str) -> None:
    xs, ws, strides, pads, extra, dilations, groups = TRANSPOSED[case]
    rng = np.random.default_rng(2)
    feeds = {"x": rand(rng, *xs)}
    consts = {"w": rand(rng, *ws, scale=0.3), "b": rand(rng, ws[1] * groups)}
    attrs = {"strides": list(strides), "pads": list(pads), "output_padding": list(extra),
             "dilations": list(dilations), "group": groups}
    want = np.tanh(onnx_node("ConvTranspose", feeds, consts, ["x", "w", "b"], **attrs))

    def make(g: asc.GraphBuilder, x: str, w: str, b: str) -> str:
        y = g.conv_transpose(x, w, b, strides=strides, pads=pads, output_padding=extra, dilations=dilations,
                             groups=groups)
        return g.unary(y, "tanh")

    got, graph = run_graph(feeds, consts, make)
    close(got, want)
    # one kernel with the epilogue (one input position: a dense between reshapes, which are views)
    (group,) = [g for g in fuse(sink_reshapes(graph)) if g.workload is not None]
    assert group.workload is not None and group.workload.args[-2] == "bias,tanh"


# (x, kind, kernel, strides, pads, ceil_mode, count_include_pad, dilations)
POOLS = {
    "max-ceil-squeezenet": ((1, 4, 14, 15), "max", (3, 3), (2, 2), (0, 0, 0, 0), True, False, (1, 1)),
    "avg-ceil-asymmetric": ((1, 3, 9, 10), "avg", (3, 2), (2, 1), (1, 0, 1, 1), True, False, (1, 1)),
    "avg-ceil-count-pad": ((1, 3, 9, 10), "avg", (3, 2), (2, 1), (1, 0, 1, 1), True, True, (1, 1)),
    "avg-3x3-pads-excluded": ((2, 3, 7, 6), "avg", (3, 3), (1, 1), (1, 1, 1, 1), False, False, (1, 1)),
    "max-1d-dilated-ceil": ((2, 3, 11), "max", (3,), (2,), (1, 1), True, False, (2,)),
    "avg-3d-count-pad": ((1, 2, 5, 6, 7), "avg", (2, 2, 3), (2, 2, 2), (0, 0, 1, 0, 0, 1), False, True,
                         (1, 1, 1)),
    "max-3d-ceil": ((1, 2, 5, 7, 6), "max", (3, 3, 2), (2, 2, 2), (1, 1, 0, 1, 0, 1), True, False, (1, 1, 1)),
}


@pytest.mark.parametrize("case", list(POOLS))
def test_pool_matches_onnxruntime(case: str) -> None:
    xs, kind, kernel, strides, pads, ceil, count_pad, dilations = POOLS[case]
    feeds = {"x": rand(np.random.default_rng(3), *xs)}
    attrs = {"kernel_shape": list(kernel), "strides": list(strides), "pads": list(pads),
             "ceil_mode": int(ceil), "dilations": list(dilations)}
    if kind == "avg":
        attrs["count_include_pad"] = int(count_pad)
    want = onnx_node("MaxPool" if kind == "max" else "AveragePool", feeds, {}, ["x"], **attrs)

    def make(g: asc.GraphBuilder, x: str) -> str:
        return g.pool(x, kind, kernel, strides, pads, ceil_mode=ceil, count_include_pad=count_pad,
                      dilations=dilations)

    got, graph = run_graph(feeds, {}, make)
    close(got, want)
    assert [n.op for n in graph.nodes] == ["pool"]


def test_pools_the_2d_nodes_cover_stay_those_nodes() -> None:
    g = asc.GraphBuilder("p")
    x = g.input("x", (1, 2, 9, 9))
    g.output(g.pool(x, "max", (3, 3), (2, 2), (1, 1, 1, 1), ceil_mode=True))  # ceil changes nothing here
    g.output(g.pool(x, "avg", (2, 2), (2, 2), (0, 0, 0, 0)))
    g.output(g.pool(x, "avg", (3, 3), (1, 1), (1, 1, 1, 1), count_include_pad=True))
    g.output(g.global_pool(x, "avg"))
    assert [n.op for n in g.build().nodes] == ["max_pool2d", "avg_pool2d", "avg_pool2d", "global_avg_pool2d"]


@pytest.mark.parametrize(("shape", "kind"),
                         [((1, 3, 4, 5, 6), "avg"), ((2, 3, 5, 7), "max"), ((2, 3, 9), "avg")])
def test_global_pool_of_any_rank_matches_onnxruntime(shape: tuple[int, ...], kind: str) -> None:
    feeds = {"x": rand(np.random.default_rng(4), *shape)}
    want = onnx_node("GlobalAveragePool" if kind == "avg" else "GlobalMaxPool", feeds, {}, ["x"])
    got, _ = run_graph(feeds, {}, lambda g, x: g.global_pool(x, kind))
    close(got, want)


@pytest.mark.parametrize("shape", [(2, 3, 5, 7), (1, 4, 3, 5, 2), (2, 5, 9)])
def test_instance_norm_matches_onnxruntime(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(5)
    feeds = {"x": rand(rng, *shape, scale=3.0) + 1.0}
    consts = {"s": rand(rng, shape[1]), "b": rand(rng, shape[1])}
    want = onnx_node("InstanceNormalization", feeds, consts, ["x", "s", "b"], epsilon=1e-3)
    got, _ = run_graph(feeds, consts, lambda g, x, s, b: g.instance_norm(x, s, b, 1e-3))
    close(got, want)


# (x, out, mode, coordinate_transformation_mode, nearest_mode)
RESIZES = {
    "torch-nearest-upsample": ((1, 2, 5, 6), (1, 2, 10, 12), "nearest", "asymmetric", "floor"),
    "nearest-half-pixel": ((1, 2, 5, 6), (1, 2, 9, 13), "nearest", "half_pixel", "round_prefer_floor"),
    "nearest-down-prefer-ceil": ((1, 2, 9, 13), (1, 2, 5, 6), "nearest", "half_pixel", "round_prefer_ceil"),
    "nearest-align-corners-ceil": ((1, 2, 4, 5), (1, 2, 7, 8), "nearest", "align_corners", "ceil"),
    "linear-half-pixel": ((1, 2, 5, 6), (1, 2, 9, 13), "linear", "half_pixel", "round_prefer_floor"),
    "linear-align-corners": ((1, 3, 4, 5), (1, 3, 7, 3), "linear", "align_corners", "round_prefer_floor"),
    "linear-pytorch-half-pixel": ((1, 2, 5, 6), (1, 2, 1, 12), "linear", "pytorch_half_pixel",
                                  "round_prefer_floor"),
    "linear-asymmetric": ((1, 2, 5, 6), (1, 2, 8, 4), "linear", "asymmetric", "round_prefer_floor"),
    "trilinear": ((1, 1, 3, 4, 5), (1, 1, 5, 7, 4), "linear", "half_pixel", "round_prefer_floor"),
}


@pytest.mark.parametrize("case", list(RESIZES))
def test_resize_matches_onnxruntime(case: str) -> None:
    xs, out, mode, coordinates, nearest = RESIZES[case]
    feeds = {"x": rand(np.random.default_rng(6), *xs)}
    sizes = {"sizes": np.array(out, np.int64)}
    want = onnx_node("Resize", feeds, sizes, ["x", "", "", "sizes"], mode=mode,
                     coordinate_transformation_mode=coordinates, nearest_mode=nearest)

    def make(g: asc.GraphBuilder, x: str) -> str:
        return g.resize(x, out, mode=mode, coordinate_transformation_mode=coordinates, nearest_mode=nearest)

    got, _ = run_graph(feeds, {}, make)
    close(got, want, 1e-5)


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda g, x, w: g.conv(x, w, strides=(1,), pads=(0,) * 4, dilations=(1, 1), name="c1"),
         r"conv c1: strides \[1\] must be 2 ints >= 1"),
        (lambda g, x, w: g.conv(x, w, strides=(1, 1), pads=(0, 0, 0), dilations=(1, 1), name="c1"),
         r"conv c1: pads \[0, 0, 0\] must be 4 ints >= 0"),
        (lambda g, x, w: g.conv(x, w, strides=(1, 1), pads=(0,) * 4, dilations=(9, 9), name="c1"),
         "conv c1: kernel .* does not fit input"),
        (lambda g, x, w: g.pool(x, "mean", (2, 2), (1, 1), (0,) * 4, name="p"), "pool p: kind 'mean'"),
        (lambda g, x, w: g.pool(x, "max", (2, 2), (1, 1), (2, 0, 0, 0), name="p"), "pool p: pads .* smaller"),
        (lambda g, x, w: g.conv_transpose(x, w, strides=(1, 1), pads=(5,) * 4, output_padding=(0, 0),
                                          dilations=(1, 1), name="t"),
         "conv_transpose t: pads .* leave no output"),
        (lambda g, x, w: g.resize(x, (1, 4, 16, 16), mode="cubic", name="r"), "resize r: mode 'cubic'"),
        (lambda g, x, w: g.instance_norm(x, w, w, name="n"),
         "instance_norm n: 'w' .* vector of the 4 channels"),
    ],
)
def test_bad_arguments_are_one_line_naming_the_node(call: object, words: str) -> None:
    g = asc.GraphBuilder("bad")
    x, w = g.input("x", (1, 4, 8, 8)), g.constant(np.ones((4, 4, 3, 3)), "w")
    with pytest.raises(GraphError, match=words) as info:
        call(g, x, w)  # type: ignore[operator]
    assert "\n" not in str(info.value)
