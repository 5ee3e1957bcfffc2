"""ONNX test models built with onnx.helper (no downloads), for the graph and export tests."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from autosched.graph import Graph, GraphBuilder

OPSET = 17


class ModelWriter:
    """Collects nodes and random float32 initializers, then makes a checked ModelProto."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def const(self, shape: tuple[int, ...], scale: float = 0.3, low: float | None = None) -> str:
        """A random initializer of ``shape`` (uniform in [low, scale) or [-scale, scale))."""
        self.count += 1
        name = f"c{self.count}"
        arr = self.rng.uniform(-scale if low is None else low, scale, shape).astype(np.float32)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def node(self, op: str, inputs: list[str], **attrs: object) -> str:
        """Add a node; its output's name."""
        self.count += 1
        out = f"v{self.count}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"{op.lower()}{self.count}", **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, pad: int = 0, bn: bool = True,
             relu: bool = True, groups: int = 1) -> str:
        """Conv (no bias when followed by batch-norm), optional BatchNormalization and Relu."""
        w = self.const((cout, cin // groups, k, k), scale=1.0 / np.sqrt(cin * k * k / groups))
        ins = [x, w] if bn else [x, w, self.const((cout,))]
        attrs = {"kernel_shape": [k, k], "strides": [stride, stride], "pads": [pad] * 4, "group": groups}
        y = self.node("Conv", ins, **attrs)
        if bn:
            params = [self.const((cout,), 1.2, 0.8), self.const((cout,), 0.2), self.const((cout,), 0.2),
                      self.const((cout,), 1.5, 0.5)]
            y = self.node("BatchNormalization", [y, *params], epsilon=1e-5)
        return self.node("Relu", [y]) if relu else y

    def model(self, inputs: dict[str, tuple[int, ...]], output: str, out_shape: tuple[int, ...],
              name: str = "test", opset: int = OPSET) -> onnx.ModelProto:
        """The checked model with these inputs and one output of shape ``out_shape``."""
        ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs.items()]
        outs = [helper.make_tensor_value_info(output, TensorProto.FLOAT, list(out_shape))]
        graph = helper.make_graph(self.nodes, name, ins, outs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        onnx.checker.check_model(model)
        return model


def conv_bn_relu_pool_dense(size: int = 16, classes: int = 10) -> onnx.ModelProto:
    """Conv-BN-ReLU, max pool, a depthwise conv, global pool, flatten, Gemm."""
    m = ModelWriter(1)
    y = m.conv("x", 3, 8, 3, pad=1)
    y = m.node("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])
    y = m.conv(y, 8, 8, 3, pad=1, groups=8)
    y = m.node("GlobalAveragePool", [y])
    y = m.node("Flatten", [y], axis=1)
    y = m.node("Gemm", [y, m.const((classes, 8)), m.const((classes,))], transB=1)
    return m.model({"x": (1, 3, size, size)}, y, (1, classes), "cbrpd")


def ds_cnn(classes: int = 12, width: int = 64, blocks: int = 4) -> onnx.ModelProto:
    """DS-CNN (the keyword-spotting CNN of Arm's ML zoo, small): 49x10 MFCC input, conv 10x4/2 to
    ``width`` channels, ``blocks`` depthwise-separable blocks (3x3 depthwise, 1x1 pointwise, each
    with batch-norm and ReLU), global average pool, fully connected: ~23k parameters."""
    m = ModelWriter(7)
    w = m.const((width, 1, 10, 4), scale=0.3)
    y = m.node("Conv", ["x", w, m.const((width,))], kernel_shape=[10, 4], strides=[2, 2], pads=[4, 1, 5, 2])
    y = m.node("Relu", [y])
    for _ in range(blocks):
        y = m.conv(y, width, width, 3, pad=1, groups=width)
        y = m.conv(y, width, width, 1)
    y = m.node("Flatten", [m.node("GlobalAveragePool", [y])], axis=1)
    y = m.node("Gemm", [y, m.const((classes, width)), m.const((classes,))], transB=1)
    return m.model({"x": (1, 1, 49, 10)}, y, (1, classes), "ds_cnn")


def residual_block(channels: int = 8, size: int = 8) -> onnx.ModelProto:
    """x -> conv-bn-relu -> conv-bn -> + x -> relu (a ResNet basic block)."""
    m = ModelWriter(2)
    y = m.conv("x", channels, channels, 3, pad=1)
    y = m.conv(y, channels, channels, 3, pad=1, relu=False)
    y = m.node("Relu", [m.node("Add", [y, "x"])])
    return m.model({"x": (1, channels, size, size)}, y, (1, channels, size, size), "residual")


def bottleneck_block(channels: int = 256, mid: int = 64, size: int = 7) -> onnx.ModelProto:
    """x -> 1x1 conv-bn-relu (channels -> mid) -> 3x3 conv-bn-relu -> 1x1 conv-bn (mid -> channels)
    -> + x -> relu (a ResNet-50 bottleneck block)."""
    m = ModelWriter(3)
    y = m.conv("x", channels, mid, 1)
    y = m.conv(y, mid, mid, 3, pad=1)
    y = m.conv(y, mid, channels, 1, relu=False)
    y = m.node("Relu", [m.node("Add", [y, "x"])])
    return m.model({"x": (1, channels, size, size)}, y, (1, channels, size, size), "bottleneck")


def mlp(batch: int = 4, dims: tuple[int, ...] = (32, 64, 16)) -> onnx.ModelProto:
    """MatMul + bias + Gelu layers, then a last MatMul + bias and Softmax (opset 20 for Gelu)."""
    m = ModelWriter(3)
    y = "x"
    for i, (a, b) in enumerate(zip(dims[:-1], dims[1:], strict=True)):
        y = m.node("Add", [m.node("MatMul", [y, m.const((a, b), 1 / np.sqrt(a))]), m.const((b,))])
        if i < len(dims) - 2:
            y = m.node("Gelu", [y])
    y = m.node("Softmax", [y], axis=-1)
    return m.model({"x": (batch, dims[0])}, y, (batch, dims[-1]), "mlp", opset=20)


def resnet18(size: int = 224, width: int = 64, classes: int = 1000) -> onnx.ModelProto:
    """ResNet-18 (batch 1, NCHW): conv1 7x7/2, max pool 3x3/2, four stages of two basic blocks
    (the first block of stages 2-4 strided, with a 1x1/2 projection), global pool, fully connected.
    ``width`` is the channel count of stage 1 (64 in the real network)."""
    m = ModelWriter(4)
    y = m.conv("x", 3, width, 7, stride=2, pad=3)
    y = m.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = width
    for stage in range(4):
        cout = width * 2**stage
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            main = m.conv(y, cin, cout, 3, stride=stride, pad=1)
            main = m.conv(main, cout, cout, 3, pad=1, relu=False)
            short = m.conv(y, cin, cout, 1, stride=stride, relu=False) if stride != 1 else y
            y = m.node("Relu", [m.node("Add", [main, short])])
            cin = cout
    y = m.node("Flatten", [m.node("GlobalAveragePool", [y])], axis=1)
    y = m.node("Gemm", [y, m.const((classes, cin)), m.const((classes,))], transB=1)
    return m.model({"x": (1, 3, size, size)}, y, (1, classes), "resnet18")


def erf_gelu_mlp(batch: int = 3, k: int = 12, n: int = 10) -> onnx.ModelProto:
    """Gemm, then GELU written out as an opset-13 exporter does (Div, Erf, Add, Mul, Mul)."""
    m = ModelWriter(5)
    y = m.node("Gemm", ["x", m.const((n, k)), m.const((n,))], transB=1)
    sqrt2, one, half = (m.const((), v, v) for v in (np.sqrt(2.0), 1.0, 0.5))
    t = m.node("Add", [m.node("Erf", [m.node("Div", [y, sqrt2])]), one])
    y = m.node("Mul", [m.node("Mul", [y, t]), half])
    return m.model({"x": (batch, k)}, y, (batch, n), "erf_gelu", opset=13)


def hand_graph() -> tuple[Graph, dict[str, np.ndarray]]:
    """A graph written with the builder: grouped conv, sigmoid, avg pool, add, relu, concat, reshape,
    dense, gelu, batch matmul, softmax and max pool; two inputs, two outputs. Its weights too."""
    rng = np.random.default_rng(7)
    w = {
        "k": rng.standard_normal((6, 2, 3, 3)).astype(np.float32),
        "b": rng.standard_normal(6).astype(np.float32),
        "d": rng.standard_normal((5, 24)).astype(np.float32),
    }
    g = GraphBuilder("hand")
    x, y = g.input("x", (1, 4, 6, 6)), g.input("y", (1, 6, 2, 2))
    conv = g.conv2d(x, g.constant(w["k"], "k"), g.constant(w["b"], "b"), stride=2, pad=1, groups=2)
    pooled = g.avg_pool2d(g.sigmoid(conv), kernel=2, stride=2, pad=1)  # (1, 6, 2, 2)
    joined = g.concat([pooled, g.relu(g.add(y, y))], axis=1)  # (1, 12, 2, 2)
    rows = g.reshape(joined, (2, 24))
    dense = g.dense(rows, g.constant(w["d"], "d"))
    square = g.batch_matmul(g.reshape(dense, (1, 2, 5)), g.reshape(g.gelu(dense), (1, 5, 2)))
    g.output(g.softmax(square), g.max_pool2d(x, kernel=3, stride=1, pad=1))
    return g.build(), w


def hand_numpy(x: np.ndarray, y: np.ndarray, w: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The outputs of :func:`hand_graph`, computed in numpy loop by loop."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((1, 6, 3, 3))
    for f in range(6):
        g = f // 3
        for i in range(3):
            for j in range(3):
                window = xp[0, 2 * g : 2 * g + 2, 2 * i : 2 * i + 3, 2 * j : 2 * j + 3]
                conv[0, f, i, j] = np.sum(window * w["k"][f])
    act = 1 / (1 + np.exp(-(conv + w["b"][None, :, None, None])))
    ap = np.pad(act, ((0, 0), (0, 0), (1, 1), (1, 1)))
    pooled = np.array([[[[ap[0, c, 2 * i : 2 * i + 2, 2 * j : 2 * j + 2].sum() / 4 for j in range(2)]
                         for i in range(2)] for c in range(6)]])
    joined = np.concatenate([pooled, np.maximum(2 * y, 0)], axis=1).reshape(2, 24)
    dense = joined @ w["d"].T.astype(np.float64)
    gelu = 0.5 * dense * (1 + np.vectorize(math.erf)(dense / math.sqrt(2)))
    square = dense @ gelu.reshape(5, 2)
    e = np.exp(square - square.max(axis=1, keepdims=True))
    xm = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    mx = np.max([xm[:, :, i : i + 6, j : j + 6] for i in range(3) for j in range(3)], axis=0)
    return [(e / e.sum(axis=1, keepdims=True))[None], mx]


def arithmetic(size: int = 6) -> onnx.ModelProto:
    """Conv, then Mul by a per-channel constant, Sub of a scalar and Div by a scalar (all fused into
    the conv), a squeeze-and-excitation Mul of a (1, C, 1, 1) computed value, a constant minus a
    value and a constant over a value (both with broadcasting), and a standalone BatchNormalization."""
    m = ModelWriter(6)
    y = m.conv("x", 3, 4, 3, pad=1, bn=False, relu=False)
    y = m.node("Div", [m.node("Sub", [m.node("Mul", [y, m.const((1, 4, 1, 1), 1.5, 0.5)]), m.const(())]),
                       m.const((), 2.0, 1.5)])
    y = m.node("Relu", [y])
    gate = m.node("Sigmoid", [m.node("GlobalAveragePool", [y])])  # (1, 4, 1, 1)
    y = m.node("Mul", [y, gate])
    y = m.node("Sub", [m.const((size,)), y])  # a constant along W minus the value
    shifted = m.node("Add", [m.node("Sigmoid", [y]), m.const((1,), 1.0, 0.9)])
    y = m.node("Div", [m.const((4, 1, 1), 2.0, 1.0), shifted])
    params = [m.const((4,), 1.2, 0.8), m.const((4,), 0.2), m.const((4,), 0.2), m.const((4,), 1.5, 0.5)]
    y = m.node("BatchNormalization", [y, *params], epsilon=1e-5)
    return m.model({"x": (1, 3, size, size)}, y, (1, 4, size, size), "arithmetic")


def attention_like(batch: int = 2, seq: int = 5, dim: int = 8, heads: int = 2) -> onnx.ModelProto:
    """LayerNormalization (opset 17), MatMul, Reshape + Transpose into heads, Softmax over the
    sequence axis (not the last), Transpose back, a Mul by the input and a last-axis Softmax."""
    m = ModelWriter(7)
    y = m.node("LayerNormalization", ["x", m.const((dim,), 1.5, 0.5), m.const((dim,))], axis=-1, epsilon=1e-5)
    y = m.node("MatMul", [y, m.const((dim, dim), 1 / np.sqrt(dim))])
    for name, dims in (("heads_shape", [batch, seq, heads, dim // heads]), ("seq_shape", [batch, seq, dim])):
        m.inits.append(numpy_helper.from_array(np.array(dims, np.int64), name))
    y = m.node("Transpose", [m.node("Reshape", [y, "heads_shape"])], perm=[0, 2, 1, 3])  # (b, h, s, d)
    y = m.node("Softmax", [y], axis=2)
    y = m.node("Reshape", [m.node("Transpose", [y], perm=[0, 2, 1, 3]), "seq_shape"])
    y = m.node("Sub", [m.node("Mul", [y, "x"]), "x"])
    y = m.node("Softmax", [y], axis=1)
    return m.model({"x": (batch, seq, dim)}, y, (batch, seq, dim), "attention")


def padded_convs(size: int = 7) -> onnx.ModelProto:
    """A zero Pad folded into the Conv after it, and a Pad of 0.5 on one side of each spatial
    axis (a pad kernel) before a strided Conv."""
    m = ModelWriter(8)
    pads = numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "zero_pads")
    uneven = numpy_helper.from_array(np.array([0, 0, 0, 1, 0, 0, 1, 0], np.int64), "uneven_pads")
    half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
    m.inits += [pads, uneven, half]
    y = m.conv(m.node("Pad", ["x", "zero_pads"], mode="constant"), 3, 4, 3, pad=0)
    y = m.conv(m.node("Pad", [y, "uneven_pads", "half"]), 4, 4, 3, stride=2, bn=False)
    out = (size + 1 - 3) // 2 + 1
    return m.model({"x": (1, 3, size, size)}, y, (1, 4, out, out), "padded")


def conv_chain(convs: int = 3, channels: int = 16, size: int = 8) -> onnx.ModelProto:
    """``convs`` 3x3 conv-bn-relu layers of ``channels`` channels, then global pool and flatten."""
    m = ModelWriter(5)
    y = "x"
    for _ in range(convs):
        y = m.conv(y, channels, channels, 3, pad=1)
    y = m.node("Flatten", [m.node("GlobalAveragePool", [y])], axis=1)
    return m.model({"x": (1, channels, size, size)}, y, (1, channels), f"chain{convs}")


def bottleneck_stack(blocks: int = 2, channels: int = 32, mid: int = 16, size: int = 6) -> onnx.ModelProto:
    """``blocks`` ResNet-50 bottleneck blocks (see :func:`bottleneck_block`), then global pool and
    flatten: the 1x1 layers have too few channels to run packed on their own."""
    m = ModelWriter(6)
    y = "x"
    for _ in range(blocks):
        z = m.conv(y, channels, mid, 1)
        z = m.conv(z, mid, mid, 3, pad=1)
        z = m.conv(z, mid, channels, 1, relu=False)
        y = m.node("Relu", [m.node("Add", [z, y])])
    y = m.node("Flatten", [m.node("GlobalAveragePool", [y])], axis=1)
    return m.model({"x": (1, channels, size, size)}, y, (1, channels), "bottlenecks")


def inverted_residuals(
    blocks: int = 2, channels: int = 16, expand: int = 4, size: int = 8
) -> onnx.ModelProto:
    """``blocks`` MobileNet-V2 blocks (1x1 conv to ``expand`` times the channels, 3x3 depthwise,
    1x1 conv back, + the block's input), the second of stride 2 without the residual, then global
    pool and flatten."""
    m = ModelWriter(8)
    y, wide = "x", channels * expand
    for i in range(blocks):
        stride = 2 if i == 1 else 1
        z = m.conv(y, channels, wide, 1)
        z = m.conv(z, wide, wide, 3, stride=stride, pad=1, groups=wide)
        z = m.conv(z, wide, channels, 1, relu=False)
        y = m.node("Add", [z, y]) if stride == 1 else z
    y = m.node("Flatten", [m.node("GlobalAveragePool", [y])], axis=1)
    return m.model({"x": (1, channels, size, size)}, y, (1, channels), "inverted")
