"""The elementwise functions (``unary``), ``maximum``/``minimum``/``pow``, ``reduce``, ``slice`` and
``gather`` (an int64 input of token ids) of the graph builder: networks built with gcc, compared with
numpy written here and with onnxruntime running the same one-node ONNX model; how their epilogue
steps are spelled; one-line errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")

from onnx_nodes import close, onnx_node, rand, run_graph  # noqa: E402  (needs onnx)

import autosched as asc  # noqa: E402
from autosched.graph import GraphError, fuse  # noqa: E402
from autosched.graph.epilogue import parse  # noqa: E402

pytestmark = pytest.mark.requires("gcc")

ERF = np.vectorize(math.erf)
# fn, alpha, beta, numpy of x (float64), the epilogue step fusion writes
UNARY = [
    ("relu", None, None, lambda x: np.maximum(x, 0), "relu"),
    ("sigmoid", None, None, lambda x: 1 / (1 + np.exp(-x)), "sigmoid"),
    ("gelu", None, None, lambda x: x * (1 + ERF(x / np.sqrt(2))) / 2, "gelu"),
    ("tanh", None, None, np.tanh, "tanh"),
    ("erf", None, None, ERF, "erf"),
    ("exp", None, None, np.exp, "exp"),
    ("log", None, None, lambda x: np.log(np.abs(x) + 0.5), "log"),
    ("sqrt", None, None, lambda x: np.sqrt(np.abs(x) + 0.5), "sqrt"),
    ("reciprocal", None, None, lambda x: 1 / (np.abs(x) + 0.5), "reciprocal"),
    ("neg", None, None, lambda x: -x, "neg"),
    ("abs", None, None, np.abs, "abs"),
    ("softplus", None, None, lambda x: np.log1p(np.exp(x)), "softplus"),
    ("clip", 0.0, 6.0, lambda x: np.minimum(np.maximum(x, 0), 6), "clip:0.0:6.0"),
    ("clip", None, 0.5, lambda x: np.minimum(x, 0.5), "clip:-inf:0.5"),
    ("leaky_relu", 0.2, None, lambda x: np.where(x < 0, 0.2 * x, x), "leaky_relu:0.2"),
    ("hard_sigmoid", 0.25, 0.4, lambda x: np.minimum(np.maximum(0.25 * x + 0.4, 0), 1),
     "hard_sigmoid:0.25:0.4"),
    ("hard_swish", None, None, lambda x: x * np.minimum(np.maximum(x + 3, 0), 6) / 6, "hard_swish"),
    ("elu", 0.7, None, lambda x: np.where(x > 0, x, 0.7 * (np.exp(x) - 1)), "elu:0.7"),
    ("pow", 3.0, None, lambda x: x**3, "pow_scalar:3.0"),
]
POSITIVE = {"log", "sqrt", "reciprocal"}  # their input is |x| + 0.5


@pytest.mark.parametrize(("fn", "alpha", "beta", "numpy", "step"), UNARY,
                         ids=[f"{u[0]}-{u[4]}" for u in UNARY])
def test_each_function_runs_in_a_dense_epilogue_and_alone(
    fn: str, alpha: float | None, beta: float | None, numpy: object, step: str
) -> None:
    rng = np.random.default_rng(1)
    x, w = rand(rng, 3, 8, scale=2.0), rand(rng, 5, 8, scale=0.5)

    def prep(g: asc.GraphBuilder, v: str) -> str:  # |v| + 0.5 for the functions of positive numbers
        if fn not in POSITIVE:
            return v
        half = g.constant(np.full(g.shape(v), 0.5, np.float32))
        return g.add(g.unary(v, "abs"), half)

    def make(g: asc.GraphBuilder, xv: str, wv: str) -> str:
        dense = g.unary(prep(g, g.dense(xv, wv)), fn, alpha=alpha, beta=beta)
        alone = g.unary(prep(g, g.reshape(xv, (3, 8))), fn, alpha=alpha, beta=beta)  # after no anchor
        return g.concat([dense, alone], axis=1)

    got, graph = run_graph({"x": x}, {"w": w}, make)
    want = np.concatenate([numpy(x.astype(np.float64) @ w.T.astype(np.float64)), numpy(x.astype(np.float64))],
                          axis=1)  # type: ignore[operator]
    close(got, want)
    epilogues = [g.workload.args[-2] for g in fuse(graph) if g.workload is not None]
    spelled = f"abs,add,{step}" if fn in POSITIVE else step
    assert epilogues == [spelled, spelled]  # fused into the dense layer, and a chain of its own
    assert parse(spelled)[-1] == step


def test_existing_steps_keep_their_spelling_and_parameters_round_trip() -> None:
    g = asc.GraphBuilder("s")
    x = g.input("x", (2, 4))
    y = g.unary(g.unary(g.unary(x, "relu"), "leaky_relu", alpha=0.1), "clip", alpha=-1.5)
    g.output(g.unary(g.unary(y, "gelu"), "sigmoid"))
    (group,) = fuse(g.build())
    assert group.workload is not None
    assert group.workload.args[-2] == "relu,leaky_relu:0.1,clip:-1.5:inf,gelu,sigmoid"


@pytest.mark.parametrize("op", ["maximum", "minimum", "pow"])
def test_maximum_minimum_pow_fuse_into_a_convolution(op: str) -> None:
    rng = np.random.default_rng(2)
    x, r = rand(rng, 1, 3, 6, 5), np.abs(rand(rng, 1, 4, 6, 5)) + 0.5
    w = rand(rng, 4, 3, 3, 3, scale=0.3)

    def make(g: asc.GraphBuilder, xv: str, rv: str, wv: str) -> str:
        y = g.unary(g.conv(xv, wv, strides=(1, 1), pads=(1, 1, 1, 1), dilations=(1, 1)), "abs")
        return getattr(g, op)(y, rv)

    got, graph = run_graph({"x": x, "r": r}, {"w": w}, make)
    conv = np.abs(onnx_node("Conv", {"x": x}, {"w": w}, ["x", "w"], pads=[1, 1, 1, 1]).astype(np.float64))
    close(got, {"maximum": np.maximum, "minimum": np.minimum, "pow": np.power}[op](conv, r))
    (group,) = fuse(graph)
    assert group.workload is not None and group.workload.args[-2] == f"abs,{op}"


# (shape, kind, axes, keepdims)
REDUCES = [((2, 3, 5, 7), "mean", (2, 3), True), ((4, 6, 5), "sum", (0, 2), False),
           ((3, 7, 2), "max", (1,), True), ((5, 1, 9), "min", (0, 1, 2), False), ((6, 5), "mean", (0,), True),
           ((2, 5, 1), "sum", (2,), False)]


@pytest.mark.parametrize(("shape", "kind", "axes", "keepdims"), REDUCES)
def test_reduce_matches_onnxruntime(
    shape: tuple[int, ...], kind: str, axes: tuple[int, ...], keepdims: bool
) -> None:
    feeds = {"x": rand(np.random.default_rng(3), *shape)}
    op = {"mean": "ReduceMean", "sum": "ReduceSum", "max": "ReduceMax", "min": "ReduceMin"}[kind]
    consts = {"axes": np.array(axes, np.int64)}
    want = onnx_node(op, feeds, consts, ["x", "axes"], opset=18, keepdims=int(keepdims))
    got, _ = run_graph(feeds, {}, lambda g, x: g.reduce(x, kind, axes, keepdims))
    close(got, want)


@pytest.mark.parametrize(("shape", "starts", "ends", "steps"), [
    ((4, 9, 10), (1, 0, 3), (4, 9, 10), (2, 3, 1)),  # channel split and strided rows
    ((2, 7, 5, 6), (0, 2, 0, 1), (2, 5, 5, 6), (1, 1, 2, 4)),
    ((11,), (3,), (10,), (3,)),
])
def test_slice_matches_onnxruntime(shape: tuple[int, ...], starts: tuple[int, ...], ends: tuple[int, ...],
                                   steps: tuple[int, ...]) -> None:
    feeds = {"x": rand(np.random.default_rng(4), *shape)}
    consts = {k: np.array(v, np.int64) for k, v in (("s", starts), ("e", ends), ("t", steps))}
    want = onnx_node("Slice", feeds, consts, ["x", "s", "e", "", "t"])
    got, _ = run_graph(feeds, {}, lambda g, x: g.slice(x, starts, ends, steps))
    close(got, want, 0)


@pytest.mark.parametrize(("table", "ids", "axis"),
                         [((30, 8), (2, 5), 0), ((3, 11, 4), (7,), 1), ((6, 13), (2, 2, 3), 1)])
def test_gather_of_token_ids_matches_onnxruntime(
    table: tuple[int, ...], ids: tuple[int, ...], axis: int
) -> None:
    rng = np.random.default_rng(5)
    rows = table[axis]
    feeds = {"ids": rng.integers(-rows, rows, ids).astype(np.int64)}
    consts = {"table": rand(rng, *table)}
    want = onnx_node("Gather", feeds, consts, ["table", "ids"], axis=axis)
    got, graph = run_graph(feeds, consts, lambda g, i, t: g.gather(t, i, axis))
    close(got, want, 0)
    assert graph.dtypes == {"ids": "int64"}
    net = asc.build_network(graph)
    close(net(feeds["ids"].astype(np.int32)), want, 0)  # any integer type
    with pytest.raises(ValueError, match=rf"input 'ids': index {rows} is outside \[-{rows}, {rows}\)"):
        net(np.full(ids, rows))
    with pytest.raises(TypeError, match="input 'ids' takes integers"):
        net(feeds["ids"].astype(np.float32))


def test_an_embedding_feeds_a_layer_norm_and_a_dense_layer() -> None:
    rng = np.random.default_rng(6)
    ids = rng.integers(0, 50, (1, 7))
    table, w = rand(rng, 50, 16), rand(rng, 4, 16)
    gamma, beta = np.ones(16, np.float32), np.zeros(16, np.float32)

    def make(g: asc.GraphBuilder, i: str, t: str, wv: str, gv: str, bv: str) -> str:
        x = g.reshape(g.layer_norm(g.gather(t, i), gv, bv), (7, 16))
        return g.dense(x, wv)

    got, _ = run_graph({"ids": ids}, {"t": table, "w": w, "g": gamma, "b": beta}, make)
    x = table[ids[0]].astype(np.float64)
    x = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    close(got, x @ w.T)


@pytest.mark.parametrize(("call", "words"), [
    (lambda g, x, i: g.unary(x, "swish", name="u"), "unary u: unknown function 'swish'"),
    (lambda g, x, i: g.unary(x, "tanh", alpha=1.0, name="u"), "unary u: tanh takes no alpha"),
    (lambda g, x, i: g.unary(x, "pow", name="u"), r"unary u: pow needs alpha \(the exponent\)"),
    (lambda g, x, i: g.unary(x, "leaky_relu", alpha=math.nan, name="u"),
     "unary u: leaky_relu: parameter alpha must be a finite number"),
    (lambda g, x, i: g.reduce(x, "mean", [], name="r"), r"reduce r: axes \[\] must be 1 to 2 axes"),
    (lambda g, x, i: g.reduce(x, "mean", [1, -1], name="r"), "reduce r: axes .* name an axis twice"),
    (lambda g, x, i: g.slice(x, [0, 3], [4, 3], [1, 1], name="s"), "slice s: axis 1 .* start 3, end 3"),
    (lambda g, x, i: g.gather(x, x, name="t"), "gather t: indices 'x' are float32"),
    (lambda g, x, i: g.relu(i), "relu : 'i' is int64: integer inputs are read only as gather indices"),
    (lambda g, x, i: g.output(i), "output 'i' is int64"),
    (lambda g, x, i: g.input("j", (2,), "float16"),
     "input 'j': dtype 'float16' is not one of float32, int64"),
])
def test_bad_arguments_are_one_line(call: object, words: str) -> None:
    g = asc.GraphBuilder("bad")
    x, i = g.input("x", (4, 5)), g.input("i", (3,), "int64")
    with pytest.raises(GraphError, match=words) as info:
        call(g, x, i)  # type: ignore[operator]
    assert "\n" not in str(info.value)
