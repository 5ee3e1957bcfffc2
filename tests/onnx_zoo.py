"""Small versions of the seeds' networks built with onnx.helper, node for node as PyTorch's
TorchScript exporter (opset 17) writes them (batch-norm folded into convolutions, ReLU6 as Clip of
Constant bounds, channel splits and head reshapes through Shape arithmetic, LSTM states through
ConstantOfShape), with few layers and channels: for tests/graph/test_onnx_models.py, no torch needed."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx_cases import model

I64 = np.int64


class Net:
    """Collects nodes and initializers; each method returns its output's name."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: dict[str, np.ndarray] = {}
        self.count = 0

    def _name(self, base: str) -> str:
        self.count += 1
        return f"{base}{self.count}"

    def init(self, array: np.ndarray) -> str:
        """A named initializer."""
        name = self._name("w")
        self.inits[name] = array
        return name

    def rand(self, *shape: int, scale: float = 0.5, low: float | None = None) -> str:
        """A random float32 initializer."""
        lo = -scale if low is None else low
        return self.init(self.rng.uniform(lo, scale, shape).astype(np.float32))

    def const(self, value: object, dtype: type = I64) -> str:
        """A Constant node (as torch writes shape numbers)."""
        out = self._name("k")
        tensor = numpy_helper.from_array(np.array(value, dtype), out)
        self.nodes.append(helper.make_node("Constant", [], [out], name=f"Constant_{out}", value=tensor))
        return out

    def op(self, op: str, inputs: list[str], outputs: int = 1, **attrs: object) -> str:
        """A node; its (first) output."""
        outs = [self._name("v") for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=f"{op}_{outs[0]}", **attrs))
        return outs[0]

    def conv(self, x: str, cin: int, cout: int, k: int | tuple[int, ...], stride: int | tuple[int, ...] = 1,
             pad: int | tuple[int, ...] = 0, groups: int = 1, rank: int = 2) -> str:
        """A Conv with bias (a batch-norm folded by the exporter)."""
        ks = (k,) * rank if isinstance(k, int) else k
        st = (stride,) * rank if isinstance(stride, int) else stride
        pd = (pad,) * rank if isinstance(pad, int) else pad
        w = self.rand(cout, cin // groups, *ks, scale=1.0 / math.sqrt(cin * math.prod(ks) / groups))
        return self.op("Conv", [x, w, self.rand(cout, scale=0.1)], kernel_shape=list(ks), strides=list(st),
                       pads=list(pd) * 2, group=groups, dilations=[1] * rank)

    def batch_norm(self, x: str, c: int) -> str:
        """An inference BatchNormalization with random statistics."""
        params = [self.rand(c, scale=1.2, low=0.8), self.rand(c, scale=0.2), self.rand(c, scale=0.2),
                  self.rand(c, scale=1.5, low=0.5)]
        return self.op("BatchNormalization", [x, *params], epsilon=1e-5, momentum=0.9)

    def linear(self, x: str, cin: int, cout: int) -> str:
        """MatMul by a (cin, cout) weight, then Add of a bias (torch's nn.Linear on 3-D inputs)."""
        y = self.op("MatMul", [x, self.rand(cin, cout, scale=1.0 / math.sqrt(cin))])
        return self.op("Add", [self.rand(cout, scale=0.1), y])

    def gemm(self, x: str, cin: int, cout: int) -> str:
        """Gemm with transB (torch's nn.Linear on 2-D inputs)."""
        w, b = self.rand(cout, cin, scale=1.0 / math.sqrt(cin)), self.rand(cout, scale=0.1)
        return self.op("Gemm", [x, w, b], alpha=1.0, beta=1.0, transB=1)

    def model(self, inputs: dict[str, np.ndarray], output: str) -> onnx.ModelProto:
        """The checked model with these inputs and one output."""
        return model(self.nodes, inputs, [output], self.inits)


Example = tuple[onnx.ModelProto, dict[str, np.ndarray]]


def _image(*shape: int) -> np.ndarray:
    return np.random.default_rng(99).standard_normal(shape).astype(np.float32)


def resnet50_like() -> Example:
    """Stem conv 7x7/2 + ReLU, max pool 3x3/2, one bottleneck (1x1, 3x3, 1x1) with a projection, GAP, Gemm."""
    m = Net(1)
    y = m.op("Relu", [m.conv("input", 3, 8, 7, 2, 3)])
    y = m.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=0)
    main = m.op("Relu", [m.conv(y, 8, 4, 1)])
    main = m.op("Relu", [m.conv(main, 4, 4, 3, 1, 1)])
    main = m.conv(main, 4, 16, 1)
    y = m.op("Relu", [m.op("Add", [main, m.conv(y, 8, 16, 1)])])
    y = m.op("Flatten", [m.op("GlobalAveragePool", [y])], axis=1)
    x = _image(1, 3, 32, 32)
    return m.model({"input": x}, m.gemm(y, 16, 10)), {"input": x}


def _relu6(m: Net, x: str) -> str:
    return m.op("Clip", [x, m.const(0.0, np.float32), m.const(6.0, np.float32)])


def mobilenet_v2_like() -> Example:
    """Conv/2 + ReLU6 (Clip), an inverted residual (expand, depthwise, project, Add), GAP, Dropout, Gemm."""
    m = Net(2)
    y = _relu6(m, m.conv("input", 3, 8, 3, 2, 1))
    block = _relu6(m, m.conv(y, 8, 24, 1))
    block = _relu6(m, m.conv(block, 24, 24, 3, 1, 1, groups=24))
    y = m.op("Add", [y, m.conv(block, 24, 8, 1)])
    y = m.op("Flatten", [m.op("GlobalAveragePool", [_relu6(m, m.conv(y, 8, 16, 1))])], axis=1)
    y = m.gemm(m.op("Dropout", [y]), 16, 10)
    return m.model({"input": _image(1, 3, 32, 32)}, y), {"input": _image(1, 3, 32, 32)}


def squeezenet_like() -> Example:
    """Conv/2 + ReLU, MaxPool with ceil_mode, a Fire module (squeeze, expand 1x1 and 3x3, Concat),
    Dropout, a 1x1 classifier conv + ReLU, GAP, Flatten."""
    m = Net(3)
    y = m.op("Relu", [m.conv("input", 3, 8, 3, 2)])
    y = m.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    s = m.op("Relu", [m.conv(y, 8, 4, 1)])
    y = m.op("Concat", [m.op("Relu", [m.conv(s, 4, 8, 1)]), m.op("Relu", [m.conv(s, 4, 8, 3, 1, 1)])], axis=1)
    y = m.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    y = m.op("Relu", [m.conv(m.op("Dropout", [y]), 16, 10, 1)])
    y = m.op("Flatten", [m.op("GlobalAveragePool", [y])], axis=1)
    return m.model({"input": _image(1, 3, 30, 30)}, y), {"input": _image(1, 3, 30, 30)}


def _chunk(m: Net, x: str) -> tuple[str, str]:
    """torch's ``x.chunk(2, dim=1)``: Shape -> Gather -> Add -> Div -> Mul -> two Slices."""
    c = m.op("Gather", [m.op("Shape", [x]), m.const([1])], axis=0)
    half = m.op("Div", [m.op("Add", [c, m.const([1])]), m.const([2])])
    whole = m.op("Mul", [half, m.const([2])])
    first = m.op("Slice", [x, m.const([0]), half, m.const([1])])
    return first, m.op("Slice", [x, half, whole, m.const([1])])


def shufflenet_v2_like() -> Example:
    """Conv + ReLU, MaxPool, a unit with a channel split (Shape arithmetic, Slice), depthwise conv,
    Concat and a channel shuffle (Reshape, Transpose, Reshape), then ReduceMean and Gemm."""
    m = Net(4)
    y = m.op("Relu", [m.conv("input", 3, 8, 3, 2, 1)])
    y = m.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])  # (1, 8, 8, 8)
    keep, branch = _chunk(m, y)
    branch = m.op("Relu", [m.conv(branch, 4, 4, 1)])
    branch = m.op("Relu", [m.conv(m.conv(branch, 4, 4, 3, 1, 1, groups=4), 4, 4, 1)])
    y = m.op("Concat", [keep, branch], axis=1)
    y = m.op("Reshape", [y, m.const([1, 2, 4, 8, 8])])
    y = m.op("Reshape", [m.op("Transpose", [y], perm=[0, 2, 1, 3, 4]), m.const([1, -1, 8, 8])])
    y = m.op("ReduceMean", [m.op("Relu", [m.conv(y, 8, 16, 1)])], axes=[2, 3], keepdims=0)
    return m.model({"input": _image(1, 3, 32, 32)}, m.gemm(y, 16, 10)), {"input": _image(1, 3, 32, 32)}


def r3d_like() -> Example:
    """3-D stem conv (3x7x7 / 1x2x2) + ReLU, a basic block of 3-D convs with the residual Add, GAP, Gemm."""
    m = Net(5)
    y = m.op("Relu", [m.conv("input", 3, 8, (3, 7, 7), (1, 2, 2), (1, 3, 3), rank=3)])
    main = m.op("Relu", [m.conv(y, 8, 8, 3, 1, 1, rank=3)])
    y = m.op("Relu", [m.op("Add", [m.conv(main, 8, 8, 3, 1, 1, rank=3), y])])
    y = m.op("Flatten", [m.op("GlobalAveragePool", [y])], axis=1)
    x = _image(1, 3, 4, 16, 16)
    return m.model({"input": x}, m.gemm(y, 8, 5)), {"input": x}


def dcgan_generator_like() -> Example:
    """ConvTranspose 4x4/1 from a 1x1 code, then 4x4/2 ones, BatchNorm + ReLU between, Tanh."""
    m = Net(6)
    y = "input"
    for cin, cout, stride, pad in ((16, 16, 1, 0), (16, 8, 2, 1)):
        w = m.rand(cin, cout, 4, 4, scale=0.2)
        y = m.op("ConvTranspose", [y, w], kernel_shape=[4, 4], strides=[stride] * 2, pads=[pad] * 4)
        y = m.op("Relu", [m.batch_norm(y, cout)])
    w = m.rand(8, 3, 4, 4, scale=0.2)
    y = m.op("Tanh", [m.op("ConvTranspose", [y, w], kernel_shape=[4, 4], strides=[2, 2], pads=[1] * 4)])
    z = _image(1, 16, 1, 1)
    return m.model({"input": z}, y), {"input": z}


def dcgan_discriminator_like() -> Example:
    """Conv 4x4/2 + LeakyReLU(0.2), Conv 4x4/2 + BatchNorm + LeakyReLU, Conv 4x4/1 to one value, Sigmoid."""
    m = Net(7)
    w = m.rand(8, 3, 4, 4, scale=0.3)
    y = m.op("Conv", ["input", w], kernel_shape=[4, 4], strides=[2, 2], pads=[1] * 4)
    y = m.op("LeakyRelu", [y], alpha=0.2)
    w = m.rand(16, 8, 4, 4, scale=0.2)
    y = m.op("Conv", [y, w], kernel_shape=[4, 4], strides=[2, 2], pads=[1] * 4)
    y = m.op("LeakyRelu", [m.batch_norm(y, 16)], alpha=0.2)
    y = m.op("Sigmoid", [m.op("Conv", [y, m.rand(1, 16, 4, 4, scale=0.2)], kernel_shape=[4, 4])])
    x = _image(1, 3, 16, 16)
    return m.model({"input": x}, y), {"input": x}


def _layer_norm(m: Net, x: str, width: int) -> str:
    scale = m.op("Identity", [m.rand(width, scale=1.5, low=0.5)])  # a shared weight, as torch writes it
    return m.op("LayerNormalization", [x, scale, m.rand(width, scale=0.1)], axis=-1, epsilon=1e-12)


def _gelu(m: Net, x: str) -> str:
    erf = m.op("Erf", [m.op("Div", [x, m.const(math.sqrt(2.0), np.float32)])])
    product = m.op("Mul", [x, m.op("Add", [erf, m.const(1.0, np.float32)])])
    return m.op("Mul", [product, m.const(0.5, np.float32)])


def bert_like(seq: int = 6, hidden: int = 8, heads: int = 2, vocab: int = 20) -> Example:
    """Token and position embeddings (Gather), LayerNorm, 4-D multi-head attention (MatMul,
    Transpose, Div by sqrt(d), Softmax), erf GELU feed-forward, residual LayerNorms."""
    m = Net(8)
    d = hidden // heads
    positions = m.op("Gather", [m.rand(seq, hidden), m.const([list(range(seq))])])
    y = _layer_norm(m, m.op("Add", [m.op("Gather", [m.rand(vocab, hidden), "input"]), positions]), hidden)

    def heads_of(x: str, perm: list[int]) -> str:
        return m.op("Transpose", [m.op("Reshape", [x, m.const([1, seq, heads, d])])], perm=perm)

    q, k, v = (m.linear(y, hidden, hidden) for _ in range(3))
    scores = m.op("MatMul", [heads_of(q, [0, 2, 1, 3]), heads_of(k, [0, 2, 3, 1])])
    probs = m.op("Softmax", [m.op("Div", [scores, m.const(math.sqrt(d), np.float32)])], axis=-1)
    context = m.op("Transpose", [m.op("MatMul", [probs, heads_of(v, [0, 2, 1, 3])])], perm=[0, 2, 1, 3])
    context = m.op("Reshape", [context, m.const([1, seq, hidden])])
    y = _layer_norm(m, m.op("Add", [y, m.linear(context, hidden, hidden)]), hidden)
    ff = m.linear(_gelu(m, m.linear(y, hidden, 2 * hidden)), 2 * hidden, hidden)
    y = _layer_norm(m, m.op("Add", [y, ff]), hidden)
    ids = np.random.default_rng(5).integers(0, vocab, (1, seq)).astype(I64)
    return m.model({"input": ids}, y), {"input": ids}


def transformer_encoder_like(seq: int = 5, hidden: int = 8, heads: int = 2) -> Example:
    """nn.TransformerEncoderLayer (no fast path) as exported: a packed in-projection split by Shape,
    Mod, Slice, Concat, Unsqueeze/Transpose/Squeeze and Gather; the scale Shape -> Slice -> Cast ->
    Sqrt; 3-D MatMuls, Gemm out-projection, ReLU feed-forward, LayerNorms."""
    m = Net(9)
    d = hidden // heads
    x = m.op("Transpose", ["input"], perm=[1, 0, 2])  # (seq, 1, hidden)
    packed = m.op("Add", [m.rand(3 * hidden), m.op("MatMul", [x, m.rand(hidden, 3 * hidden)])])
    split = m.op("Mod", [m.const([2]), m.const([3])])
    shape = m.op("Shape", [packed])
    front = m.op("Slice", [shape, m.const([0]), m.op("Reshape", [split, m.const([1])])])
    back = m.op("Slice", [shape, m.op("Reshape", [m.op("Add", [split, m.const([1])]), m.const([1])]),
                          m.const([2**63 - 1])])
    five = m.op("Reshape", [packed, m.op("Concat", [front, m.const([3, hidden]), back], axis=0)])
    moved = m.op("Transpose", [m.op("Unsqueeze", [five, m.const([0])])], perm=[3, 1, 2, 0, 4])
    parts = m.op("Squeeze", [moved, m.const([3])])  # (3, seq, 1, hidden)

    def part(i: int) -> str:
        one = m.op("Reshape", [m.op("Gather", [parts, m.const(i)], axis=0), m.const([seq, heads, d])])
        return m.op("Transpose", [one], perm=[1, 0, 2])

    q, k, v = (part(i) for i in range(3))
    last = m.op("Slice", [m.op("Shape", [q]), m.const([-1]), m.const([2**63 - 1])])
    width = m.op("Cast", [last], to=TensorProto.FLOAT)
    inverse = m.op("Div", [m.const([1.0], np.float32), m.op("Sqrt", [width])])
    root = m.op("Sqrt", [m.op("Cast", [inverse], to=TensorProto.FLOAT)])
    keys = m.op("Mul", [m.op("Transpose", [k], perm=[0, 2, 1]), root])
    scores = m.op("MatMul", [m.op("Mul", [q, root]), keys])
    context = m.op("MatMul", [m.op("Softmax", [scores], axis=-1), v])  # (heads, seq, d)
    context = m.op("Reshape", [m.op("Transpose", [context], perm=[1, 0, 2]), m.const([seq, hidden])])
    out = m.op("Reshape", [m.gemm(context, hidden, hidden), m.const([seq, 1, hidden])])
    y = _layer_norm(m, m.op("Add", ["input", m.op("Transpose", [out], perm=[1, 0, 2])]), hidden)
    ff = m.linear(m.op("Relu", [m.linear(y, hidden, 2 * hidden)]), 2 * hidden, hidden)
    y = _layer_norm(m, m.op("Add", [y, ff]), hidden)
    x0 = _image(1, seq, hidden)
    return m.model({"input": x0}, y), {"input": x0}


def _zero_state(m: Net, x: str, hidden: int, dirs: int = 1) -> str:
    """torch's zero initial state: Shape -> Gather (batch) -> Unsqueeze -> Concat -> Expand of zeros."""
    batch = m.op("Unsqueeze", [m.op("Gather", [m.op("Shape", [x]), m.const(1)], axis=0), m.const([0])])
    shape = m.op("Concat", [m.const([dirs]), batch, m.const([hidden])], axis=0)
    return m.op("Expand", [m.const(0.0, np.float32), shape])


def lstm_lm_like(seq: int = 5, hidden: int = 6, vocab: int = 12) -> Example:
    """Embedding (Gather), two LSTM layers (zero states through Shape/Expand, Squeeze of the
    direction axis), Linear to the vocabulary."""
    m = Net(10)
    x = m.op("Transpose", [m.op("Gather", [m.rand(vocab, hidden), "input"])], perm=[1, 0, 2])
    for _ in range(2):
        h0, c0 = _zero_state(m, x, hidden), _zero_state(m, x, hidden)
        w, r = m.rand(1, 4 * hidden, hidden), m.rand(1, 4 * hidden, hidden)
        b = m.rand(1, 8 * hidden, scale=0.1)
        y = m.op("LSTM", [x, w, r, b, "", h0, c0], outputs=3, hidden_size=hidden)
        x = m.op("Squeeze", [y, m.const([1])])
    y = m.linear(m.op("Transpose", [x], perm=[1, 0, 2]), hidden, vocab)
    ids = np.random.default_rng(6).integers(0, vocab, (1, seq)).astype(I64)
    return m.model({"input": ids}, y), {"input": ids}


def gru_like(seq: int = 5, width: int = 4, hidden: int = 6) -> Example:
    """A bidirectional GRU (linear_before_reset, as torch exports it), its two directions joined
    (Transpose, Reshape), Linear."""
    m = Net(11)
    x = m.op("Transpose", ["input"], perm=[1, 0, 2])
    w, r, b = m.rand(2, 3 * hidden, width), m.rand(2, 3 * hidden, hidden), m.rand(2, 6 * hidden, scale=0.1)
    y = m.op("GRU", [x, w, r, b, "", _zero_state(m, x, hidden, 2)], outputs=2, hidden_size=hidden,
             direction="bidirectional", linear_before_reset=1)
    y = m.op("Reshape", [m.op("Transpose", [y], perm=[0, 2, 1, 3]), m.const([seq, 1, 2 * hidden])])
    y = m.linear(m.op("Transpose", [y], perm=[1, 0, 2]), 2 * hidden, 3)
    x0 = _image(1, seq, width)
    return m.model({"input": x0}, y), {"input": x0}


def dqn_like() -> Example:
    """The Nature DQN's layers with fewer channels: convs 8x8/4, 4x4/2, 3x3/1 + ReLU on 84x84x4,
    Flatten, two Gemms."""
    m = Net(12)
    y = m.op("Relu", [m.conv("input", 4, 4, 8, 4)])
    y = m.op("Relu", [m.conv(y, 4, 8, 4, 2)])
    y = m.op("Flatten", [m.op("Relu", [m.conv(y, 8, 8, 3, 1)])], axis=1)
    y = m.gemm(m.op("Relu", [m.gemm(y, 8 * 7 * 7, 16)]), 16, 6)
    x = _image(1, 4, 84, 84)
    return m.model({"input": x}, y), {"input": x}


ZOO: dict[str, Callable[[], Example]] = {
    "resnet50": resnet50_like, "mobilenet_v2": mobilenet_v2_like, "squeezenet1_0": squeezenet_like,
    "shufflenet_v2": shufflenet_v2_like, "r3d_18": r3d_like, "dcgan_generator": dcgan_generator_like,
    "dcgan_discriminator": dcgan_discriminator_like, "bert": bert_like,
    "transformer_encoder_layer": transformer_encoder_like, "lstm_lm": lstm_lm_like, "gru": gru_like,
    "dqn": dqn_like,
}
