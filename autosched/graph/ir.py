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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ops.common import conv_out_size
from .layers import pad_edges, shape_text

Shape = tuple[int, ...]

#: the element types a graph computes in (one for the whole graph)
DTYPES = ("float32", "float64")
#: operators that make a fused group's anchor (the TVM paper's complex-out-fusable operators)
COMPLEX_OPS = frozenset({"conv2d", "dense", "batch_matmul"})
#: elementwise operators that fuse into the preceding operator's output stage
ELEMENTWISE_OPS = frozenset({"bias_add", "scale", "add", "mul", "sub", "div", "relu", "gelu", "sigmoid"})
#: elementwise operators with a per-channel vector operand (and an ``axis`` attribute)
PER_CHANNEL_OPS = frozenset({"bias_add", "scale"})
#: operators that move no data through a kernel: views and copies done by the network runtime
LAYOUT_OPS = frozenset({"reshape", "concat"})


class GraphError(ValueError):
    """A graph that cannot be built: a bad shape, an unknown value, an unsupported operator."""


@dataclass(frozen=True, slots=True)
class Node:
    """One operator: ``op`` over the values ``inputs``, making the value ``output``."""

    op: str
    inputs: tuple[str, ...]
    output: str
    attrs: tuple[tuple[str, Any], ...] = ()
    name: str = ""

    def attr(self, key: str) -> Any:
        """The attribute ``key`` (raises KeyError if the node has none)."""
        return dict(self.attrs)[key]


@dataclass(slots=True)
class Graph:
    """Inputs (in call order), constants, nodes in topological order, outputs and every shape."""

    name: str
    inputs: list[str]
    constants: dict[str, np.ndarray]
    nodes: list[Node]
    outputs: list[str]
    shapes: dict[str, Shape] = field(default_factory=dict)
    dtype: str = "float32"  # of every value: inputs, constants, intermediates and outputs

    def consumers(self) -> dict[str, list[Node]]:
        """For each value, the nodes that read it (a node reading a value twice counts twice)."""
        users: dict[str, list[Node]] = {v: [] for v in self.shapes}
        for node in self.nodes:
            for v in node.inputs:
                users[v].append(node)
        return users


class GraphBuilder:
    """Writes a :class:`Graph` one operator at a time; each method returns its output's name."""

    def __init__(self, name: str = "graph", dtype: str = "float32") -> None:
        if dtype not in DTYPES:
            raise GraphError(f"graph {name!r}: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
        self._graph = Graph(name, [], {}, [], [], dtype=dtype)
        self._count = 0

    def shape(self, value: str) -> Shape:
        """The shape of ``value``; raise :class:`GraphError` if there is no such value."""
        try:
            return self._graph.shapes[value]
        except KeyError:
            raise GraphError(f"no value named {value!r} in graph {self._graph.name!r}") from None

    @property
    def dtype(self) -> str:
        """The type every value of the graph has."""
        return self._graph.dtype

    def is_constant(self, value: str) -> bool:
        """Whether ``value`` is a constant."""
        return value in self._graph.constants

    def constant_value(self, value: str) -> np.ndarray:
        """The array of the constant ``value``."""
        return self._graph.constants[value]

    def _fresh(self, base: str) -> str:
        self._count += 1
        name = f"{base}_{self._count}"
        while name in self._graph.shapes:
            self._count += 1
            name = f"{base}_{self._count}"
        return name

    def _new(self, name: str | None, base: str, shape: Shape) -> str:
        value = name or self._fresh(base)
        if value in self._graph.shapes:
            raise GraphError(f"value {value!r} is defined twice")
        self._graph.shapes[value] = tuple(int(d) for d in shape)
        return value

    def input(self, name: str, shape: Sequence[int]) -> str:
        """A graph input (of the graph's dtype); inputs are called in the order they are declared."""
        if not all(isinstance(d, (int, np.integer)) and d > 0 for d in shape):
            raise GraphError(f"input {name!r}: shape must be positive ints, got {tuple(shape)}")
        self._graph.inputs.append(self._new(name, "input", tuple(shape)))
        return name

    def constant(self, array: np.ndarray, name: str | None = None) -> str:
        """A constant (a weight), stored C-contiguous in the graph's dtype."""
        value = self._new(name, "const", np.shape(array))
        self._graph.constants[value] = np.ascontiguousarray(array, dtype=self._graph.dtype)
        return value

    def _add(self, op: str, inputs: Sequence[str], shape: Shape, name: str | None, **attrs: Any) -> str:
        for v in inputs:
            self.shape(v)
        out = self._new(None, op, shape)
        node = Node(op, tuple(inputs), out, tuple(sorted(attrs.items())), name or out)
        self._graph.nodes.append(node)
        return out

    def _fail(self, op: str, name: str | None, message: str) -> GraphError:
        return GraphError(f"{op} {name or ''}: {message}".replace("  ", " "))

    def conv2d(
        self, x: str, w: str, bias: str | None = None, *, stride: int = 1, pad: int = 0, groups: int = 1,
        name: str | None = None,
    ) -> str:
        """NCHW convolution of x (N, C, H, W) with w (K, C/groups, R, S), square stride and padding."""
        (n, c, h, wd), (k, cg, r, s) = self._ranks("conv2d", name, (x, 4), (w, 4))
        if cg * groups != c or k % groups:
            fit = f"weight {self.shape(w)} does not fit input {self.shape(x)} with {groups} groups"
            raise self._fail("conv2d", name, fit)
        try:
            p, q = (conv_out_size("conv2d", d, kk, stride, pad, 1) for d, kk in ((h, r), (wd, s)))
        except ValueError as e:
            raise self._fail("conv2d", name, str(e)) from None
        out = self._add("conv2d", (x, w), (n, k, p, q), name, stride=stride, pad=pad, groups=groups)
        return out if bias is None else self.bias_add(out, bias, axis=1)

    def dense(self, x: str, w: str, bias: str | None = None, *, name: str | None = None) -> str:
        """x (M, K) @ w (N, K).T (+ bias (N,))."""
        (m, kx), (n, kw) = self._ranks("dense", name, (x, 2), (w, 2))
        if kx != kw:
            raise self._fail("dense", name, f"input {self.shape(x)} and weight {self.shape(w)} disagree on K")
        out = self._add("dense", (x, w), (m, n), name)
        return out if bias is None else self.bias_add(out, bias, axis=1)

    def batch_matmul(self, a: str, b: str, *, name: str | None = None) -> str:
        """a (B, M, K) @ b (B, K, N)."""
        (ba, m, ka), (bb, kb, n) = self._ranks("batch_matmul", name, (a, 3), (b, 3))
        if ba != bb or ka != kb:
            shapes = f"shapes {self.shape(a)} and {self.shape(b)} do not multiply"
            raise self._fail("batch_matmul", name, shapes)
        return self._add("batch_matmul", (a, b), (ba, m, n), name)

    def _pool(self, op: str, x: str, kernel: int, stride: int, pad: int, name: str | None) -> str:
        (n, c, h, w), = self._ranks(op, name, (x, 4))
        if pad >= kernel:
            raise self._fail(op, name, f"pad ({pad}) must be smaller than kernel ({kernel})")
        try:
            p, q = (conv_out_size(op, d, kernel, stride, pad, 1) for d in (h, w))
        except ValueError as e:
            raise self._fail(op, name, str(e)) from None
        return self._add(op, (x,), (n, c, p, q), name, kernel=kernel, stride=stride, pad=pad)

    def max_pool2d(self, x: str, kernel: int, stride: int, pad: int = 0, *, name: str | None = None) -> str:
        """Max over square windows (padding never wins)."""
        return self._pool("max_pool2d", x, kernel, stride, pad, name)

    def avg_pool2d(self, x: str, kernel: int, stride: int, pad: int = 0, *, name: str | None = None) -> str:
        """Mean over square windows, padded zeros counted."""
        return self._pool("avg_pool2d", x, kernel, stride, pad, name)

    def global_avg_pool2d(self, x: str, *, name: str | None = None) -> str:
        """The mean of each channel: (N, C, H, W) -> (N, C, 1, 1)."""
        (n, c, _, _), = self._ranks("global_avg_pool2d", name, (x, 4))
        return self._add("global_avg_pool2d", (x,), (n, c, 1, 1), name)

    def _per_channel(self, op: str, x: str, v: str, axis: int, name: str | None) -> str:
        shape = self.shape(x)
        axis = axis % len(shape)
        if self.shape(v) != (shape[axis],):
            raise self._fail(op, name, f"vector {self.shape(v)} does not fit axis {axis} of {shape}")
        return self._add(op, (x, v), shape, name, axis=axis)

    def bias_add(self, x: str, b: str, axis: int = 1, *, name: str | None = None) -> str:
        """x + b broadcast along ``axis`` (b has x's extent on that axis)."""
        return self._per_channel("bias_add", x, b, axis, name)

    def scale(self, x: str, s: str, axis: int = 1, *, name: str | None = None) -> str:
        """x * s broadcast along ``axis`` (s has x's extent on that axis)."""
        return self._per_channel("scale", x, s, axis, name)

    def _binary(self, op: str, a: str, b: str, name: str | None) -> str:
        if self.shape(a) != self.shape(b):
            raise self._fail(op, name, f"shapes {self.shape(a)} and {self.shape(b)} differ (broadcast first)")
        return self._add(op, (a, b), self.shape(a), name)

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
        """The same elements in a new shape (one -1 allowed)."""
        size = int(np.prod(self.shape(x)))
        try:
            new = np.empty(size, dtype=np.bool_).reshape(tuple(int(d) for d in shape)).shape
        except ValueError:
            raise self._fail("reshape", name, f"cannot reshape {self.shape(x)} to {tuple(shape)}") from None
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

    def output(self, *values: str) -> None:
        """Mark values as graph outputs, in order."""
        for v in values:
            self.shape(v)
            self._graph.outputs.append(v)

    def build(self) -> Graph:
        """The graph; it needs at least one input and one output."""
        if not self._graph.inputs or not self._graph.outputs:
            raise GraphError(f"graph {self._graph.name!r} needs at least one input and one output")
        return self._graph

    def _ranks(self, op: str, name: str | None, *pairs: tuple[str, int]) -> list[Shape]:
        shapes = []
        for value, rank in pairs:
            shape = self.shape(value)
            if len(shape) != rank:
                raise self._fail(op, name, f"{value!r} must have {rank} dimensions, got shape {shape}")
            shapes.append(shape)
        return shapes
