"""A small dataflow graph of operators, and the builder that writes one by hand.

    g = GraphBuilder("tiny")
    x = g.input("x", (1, 3, 8, 8))
    w = g.constant(np.ones((4, 3, 3, 3), np.float32), "w")
    y = g.relu(g.conv2d(x, w, pad=1))
    g.output(g.global_avg_pool2d(y))
    graph = g.build()

Values are named by strings; every value's shape is inferred when its node is added, so a wrong
shape is an error at the line that made it. Layouts are NCHW; weights are constants.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .builder_nn import NNBuilder
from .builder_rnn import RecurrentBuilder
from .builder_tensor import TensorBuilder
from .ir_core import (
    COMPLEX_OPS,
    DTYPES,
    ELEMENTWISE_OPS,
    INDEX_DTYPES,
    LAYOUT_OPS,
    PER_CHANNEL_OPS,
    Graph,
    GraphError,
    Node,
    Shape,
)
from .layers import pad_edges, shape_text

__all__ = [
    "COMPLEX_OPS", "DTYPES", "ELEMENTWISE_OPS", "INDEX_DTYPES", "LAYOUT_OPS", "PER_CHANNEL_OPS", "Graph",
    "GraphBuilder", "GraphError", "Node", "Shape",
]


class GraphBuilder(NNBuilder, TensorBuilder, RecurrentBuilder):
    """Writes a :class:`Graph` one operator at a time; each method returns its output's name
    (the convolution-network operators are :class:`.builder_nn.NNBuilder`'s, the elementwise
    functions, reductions, slices and gathers :class:`.builder_tensor.TensorBuilder`'s, the LSTM
    cell's :class:`.builder_rnn.RecurrentBuilder`'s)."""

    def dense(self, x: str, w: str, bias: str | None = None, *, name: str | None = None) -> str:
        """x (M, K) @ w (N, K).T (+ bias (N,))."""
        (m, kx), (n, kw) = self._ranks("dense", name, (x, 2), (w, 2))
        if kx != kw:
            raise self._fail("dense", name, f"input {self.shape(x)} and weight {self.shape(w)} disagree on K")
        out = self._add("dense", (x, w), (m, n), name)
        return out if bias is None else self.bias_add(out, bias, axis=1)

    def conv_transpose(
        self, x: str, w: str, bias: str | None = None, *, strides: Sequence[int], pads: Sequence[int],
        output_padding: Sequence[int], dilations: Sequence[int], groups: int = 1, name: str | None = None,
    ) -> str:
        """Transposed convolution (see :meth:`.builder_nn.NNBuilder.conv_transpose`). One of a single
        input position (spatial axes of 1), without pads, output padding, dilation or groups, and
        with constant weights, is a projection: every output element is one dot product of the
        input channels, so it becomes a ``dense`` of the (N, C) input with the (K * taps, C) weight
        (the bias repeated over the taps) and a reshape to (N, K, *taps), whose epilogue fuses as
        any dense's (DCGAN's first generator layer: a 100 x 8192 GEMV, not a 4x4 convolution of a
        padded 1x1 image)."""
        xs, ws = self.shape(x), self.shape(w)
        flat = len(xs) == len(ws) > 2 and all(v == 1 for v in xs[2:]) and groups == 1 and xs[1] == ws[0]
        if flat:  # the attributes checked as for any transposed convolution
            self._window("conv_transpose", x, ws[2:], strides, pads, dilations, name)
        plain = not any(pads) and not any(output_padding) and all(int(d) == 1 for d in dilations)
        constant = self.is_constant(w) and (bias is None or self.is_constant(bias))
        if not (flat and plain and constant and len(output_padding) == len(xs) - 2):
            return super().conv_transpose(x, w, bias, strides=strides, pads=pads, dilations=dilations,
                                          output_padding=output_padding, groups=groups, name=name)
        taps = int(np.prod(ws[2:]))
        weight = self.constant_value(w).reshape(ws[0], ws[1] * taps).T
        y = self.dense(self.reshape(x, (xs[0], xs[1])), self.constant(weight))
        if bias is not None:
            y = self.bias_add(y, self.constant(np.repeat(self.constant_value(bias), taps)), axis=1)
        self.drop_unread(w, *([bias] if bias is not None else []))
        return self.reshape(y, (xs[0], ws[1], *ws[2:]), name=name)

    def batch_matmul(self, a: str, b: str, *, name: str | None = None) -> str:
        """a (B, M, K) @ b (B, K, N)."""
        (ba, m, ka), (bb, kb, n) = self._ranks("batch_matmul", name, (a, 3), (b, 3))
        if ba != bb or ka != kb:
            shapes = f"shapes {self.shape(a)} and {self.shape(b)} do not multiply"
            raise self._fail("batch_matmul", name, shapes)
        return self._add("batch_matmul", (a, b), (ba, m, n), name)

    def add(self, a: str, b: str, *, name: str | None = None) -> str:
        """a + b, same shapes (a residual connection)."""
        return self._binary("add", a, b, name)

    def mul(self, a: str, b: str, *, name: str | None = None) -> str:
        """a * b, same shapes."""
        return self._binary("mul", a, b, name)

    def sub(self, a: str, b: str, *, name: str | None = None) -> str:
        """a - b, same shapes."""
        return self._binary("sub", a, b, name)

    def div(self, a: str, b: str, *, name: str | None = None) -> str:
        """a / b, same shapes."""
        return self._binary("div", a, b, name)

    def broadcast(self, x: str, shape: Sequence[int], *, name: str | None = None) -> str:
        """x repeated to ``shape`` by numpy's rules (a copy)."""
        target = tuple(int(d) for d in shape)
        try:
            fits = np.broadcast_shapes(self.shape(x), target) == target
        except ValueError:
            fits = False
        if not fits:
            raise self._fail("broadcast", name, f"{self.shape(x)} does not broadcast to {target}")
        return self._add("broadcast", (x,), target, name)

    def transpose(self, x: str, perm: Sequence[int], *, name: str | None = None) -> str:
        """x with its axes permuted (output axis i is input axis ``perm[i]``)."""
        shape = self.shape(x)
        order = tuple(int(p) for p in perm)
        if sorted(order) != list(range(len(shape))):
            raise self._fail("transpose", name, f"{list(order)} is not a permutation of {len(shape)} axes")
        return self._add("transpose", (x,), tuple(shape[p] for p in order), name, perm=order)

    def pad(
        self, x: str, pads: Sequence[int], value: float = 0.0, *, mode: str = "constant",
        name: str | None = None,
    ) -> str:
        """x with ``pads`` elements around it (ONNX order: all begins, then all ends): ``value``
        (mode ``constant``), the nearest element (``edge``) or the mirrored ones (``reflect``)."""
        shape = self.shape(x)
        widths = tuple(int(p) for p in pads)
        if len(widths) != 2 * len(shape) or min(widths) < 0:
            raise self._fail("pad", name, f"pads {list(widths)} must be {2 * len(shape)} non-negative ints")
        try:
            pad_edges(shape_text(shape), ",".join(map(str, widths)), mode)
        except ValueError as e:
            raise self._fail("pad", name, str(e)) from None
        out = tuple(d + widths[i] + widths[i + len(shape)] for i, d in enumerate(shape))
        return self._add("pad", (x,), out, name, pads=widths, value=float(value), mode=mode)

    def layer_norm(
        self, x: str, gamma: str, beta: str, eps: float = 1e-5, *, axis: int = -1, name: str | None = None
    ) -> str:
        """Normalize x over its axes ``axis`` to the last (their elements' mean and variance), then
        * gamma + beta (both vectors of as many elements, the axes' C order)."""
        shape = self.shape(x)
        if not -len(shape) <= axis < len(shape):
            raise self._fail("layer_norm", name, f"axis {axis} is out of range for {len(shape)} axes")
        first = axis % len(shape)
        cols = math.prod(shape[first:])
        for v in (gamma, beta):
            if self.shape(v) != (cols,):
                fit = f"{v!r} {self.shape(v)} does not fit axes {first}.. of {shape} ({cols} elements)"
                raise self._fail("layer_norm", name, fit)
        return self._add("layer_norm", (x, gamma, beta), shape, name, eps=float(eps), axis=first)

    def relu(self, x: str, *, name: str | None = None) -> str:
        """max(x, 0)."""
        return self._add("relu", (x,), self.shape(x), name)

    def gelu(self, x: str, *, name: str | None = None) -> str:
        """x * Phi(x) (the erf form)."""
        return self._add("gelu", (x,), self.shape(x), name)

    def sigmoid(self, x: str, *, name: str | None = None) -> str:
        """1 / (1 + exp(-x))."""
        return self._add("sigmoid", (x,), self.shape(x), name)

    def softmax(self, x: str, axis: int = -1, *, name: str | None = None) -> str:
        """Softmax over ``axis`` (default the last)."""
        rank = len(self.shape(x))
        if not -rank <= axis < rank:
            raise self._fail("softmax", name, f"axis {axis} is out of range for rank {rank}")
        return self._add("softmax", (x,), self.shape(x), name, axis=axis % rank)

    def reshape(self, x: str, shape: Sequence[int], *, name: str | None = None) -> str:
        """The same elements in a new shape (one -1 allowed); a computed value reshaped to its own
        shape is returned as it is (so that no node stands between an operator and its epilogue)."""
        size = int(np.prod(self.shape(x)))
        try:
            new = np.empty(size, dtype=np.bool_).reshape(tuple(int(d) for d in shape)).shape
        except ValueError:
            raise self._fail("reshape", name, f"cannot reshape {self.shape(x)} to {tuple(shape)}") from None
        if new == self.shape(x) and x not in self._graph.inputs and not self.is_constant(x):
            return x
        return self._add("reshape", (x,), new, name)

    def flatten(self, x: str, axis: int = 1, *, name: str | None = None) -> str:
        """(d0, ..., d_{axis-1}) x (the rest), as ONNX's Flatten."""
        shape = self.shape(x)
        outer = int(np.prod(shape[:axis]))
        return self.reshape(x, (outer, int(np.prod(shape)) // outer), name=name)

    def concat(self, xs: Sequence[str], axis: int = 1, *, name: str | None = None) -> str:
        """The values joined along ``axis``."""
        shapes = [self.shape(x) for x in xs]
        axis = axis % len(shapes[0])
        rest = {s[:axis] + s[axis + 1 :] for s in shapes}
        if len(rest) != 1 or any(len(s) != len(shapes[0]) for s in shapes):
            raise self._fail("concat", name, f"shapes {shapes} do not join along axis {axis}")
        joined = list(shapes[0])
        joined[axis] = sum(s[axis] for s in shapes)
        return self._add("concat", tuple(xs), tuple(joined), name, axis=axis)
