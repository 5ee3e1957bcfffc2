"""The graph's data structures and the core of its builder: values, nodes, inputs and constants.

:mod:`.ir` assembles :class:`~.ir.GraphBuilder` from this core and the operator mixins
(:mod:`.builder_nn`, :mod:`.builder_tensor`); everything here is re-exported there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..memory import Footprint

Shape = tuple[int, ...]

#: the element types a graph computes in (one for the whole graph)
DTYPES = ("float32", "float64")
#: the types an input read only as ``gather`` indices (token ids) may have
INDEX_DTYPES = ("int64", "int32")
#: operators that make a fused group's anchor (the TVM paper's complex-out-fusable operators)
COMPLEX_OPS = frozenset({"conv2d", "conv", "conv_transpose", "dense", "batch_matmul"})
#: elementwise operators that fuse into the preceding operator's output stage (``unary`` holds
#: its epilogue step as the attribute ``step``)
ELEMENTWISE_OPS = frozenset({
    "bias_add", "scale", "add", "mul", "sub", "div", "maximum", "minimum", "pow", "relu", "gelu", "sigmoid",
    "unary",
})
#: elementwise operators with a per-channel vector operand (and an ``axis`` attribute)
PER_CHANNEL_OPS = frozenset({"bias_add", "scale"})
#: operators that move no data through a kernel: views and copies done by the network runtime
LAYOUT_OPS = frozenset({"reshape", "concat"})


def fresh_name(base: str, taken: dict[str, Shape]) -> str:
    """``base``, or ``base`` with the first number appended that no value of ``taken`` has."""
    name, i = base, 1
    while name in taken:
        name, i = f"{base}{i}", i + 1
    return name


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
    dtype: str = "float32"  # of every value but those in ``dtypes``
    #: the values of another type than ``dtype``: integer inputs read as gather indices
    dtypes: dict[str, str] = field(default_factory=dict)

    def consumers(self) -> dict[str, list[Node]]:
        """For each value, the nodes that read it (a node reading a value twice counts twice)."""
        users: dict[str, list[Node]] = {v: [] for v in self.shapes}
        for node in self.nodes:
            for v in node.inputs:
                users[v].append(node)
        return users

    def dtype_of(self, value: str) -> str:
        """The element type of ``value``."""
        return self.dtypes.get(value, self.dtype)


class BuilderBase:
    """What every operator method of :class:`~.ir.GraphBuilder` builds on: values, inputs,
    constants, nodes, per-channel operands and the finished graph."""

    def __init__(self, name: str = "graph", dtype: str = "float32") -> None:
        if dtype not in DTYPES:
            raise GraphError(f"graph {name!r}: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
        self._graph = Graph(name, [], {}, [], [], dtype=dtype)
        self._count = 0
        self._footprint = Footprint()  # values too big for this machine's memory are refused

    def shape(self, value: str) -> Shape:
        """The shape of ``value``; raise :class:`GraphError` if there is no such value."""
        try:
            return self._graph.shapes[value]
        except KeyError:
            raise GraphError(f"no value named {value!r} in graph {self._graph.name!r}") from None

    @property
    def dtype(self) -> str:
        """The type every value of the graph has (but integer inputs: :meth:`value_dtype`)."""
        return self._graph.dtype

    def value_dtype(self, value: str) -> str:
        """The element type of ``value``."""
        self.shape(value)
        return self._graph.dtype_of(value)

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

    def _fits(self, what: str, shape: Sequence[int], dtype: str, *, lasting: bool, view: bool = False
              ) -> None:
        """GraphError where the value ``what`` cannot fit in memory beside the inputs and constants
        (:class:`~autosched.memory.Footprint`), before any array of it is made."""
        problem = self._footprint.add(what, shape, np.dtype(dtype).itemsize, lasting=lasting, view=view)
        if problem is not None:
            raise GraphError(problem)

    def _new(self, name: str | None, base: str, shape: Shape) -> str:
        value = name or self._fresh(base)
        if value in self._graph.shapes:
            raise GraphError(f"value {value!r} is defined twice")
        self._graph.shapes[value] = tuple(int(d) for d in shape)
        return value

    def input(self, name: str, shape: Sequence[int], dtype: str | None = None) -> str:
        """A graph input; inputs are called in the order they are declared. ``dtype`` None is the
        graph's type; ``int64`` or ``int32`` for an input read only as ``gather`` indices (the
        network and its C export take it as int64 either way)."""
        if not all(isinstance(d, (int, np.integer)) and d > 0 for d in shape):
            raise GraphError(f"input {name!r}: shape must be positive ints, got {tuple(shape)}")
        if dtype is not None and dtype != self._graph.dtype and dtype not in INDEX_DTYPES:
            allowed = ", ".join((self._graph.dtype, *INDEX_DTYPES))
            raise GraphError(f"input {name!r}: dtype {dtype!r} is not one of {allowed}")
        self._fits(f"input {name!r}", shape, dtype or self._graph.dtype, lasting=True)
        self._graph.inputs.append(self._new(name, "input", tuple(shape)))
        if dtype in INDEX_DTYPES:
            self._graph.dtypes[name] = dtype
        return name

    def constant(self, array: np.ndarray, name: str | None = None) -> str:
        """A constant (a weight), stored C-contiguous in the graph's dtype."""
        what = f"constant {name!r}" if name else "a constant"
        self._fits(what, np.shape(array), self._graph.dtype, lasting=True)
        value = self._new(name, "const", np.shape(array))
        self._graph.constants[value] = np.ascontiguousarray(array, dtype=self._graph.dtype)
        return value

    def drop_unread(self, *values: str) -> None:
        """Forget the constants among ``values`` that no node reads and no output names (a weight
        a rewrite replaced), so that they are neither kept nor exported."""
        read = {v for node in self._graph.nodes for v in node.inputs} | set(self._graph.outputs)
        for value in values:
            if value in self._graph.constants and value not in read:
                del self._graph.constants[value]
                del self._graph.shapes[value]

    def _add(self, op: str, inputs: Sequence[str], shape: Shape, name: str | None, **attrs: Any) -> str:
        for v in inputs:
            self.shape(v)
            if v in self._graph.dtypes and not (op == "gather" and v == inputs[1]) and op != "index_to_float":
                what = (f"{v!r} is {self._graph.dtypes[v]}: integer inputs are read only as gather indices "
                        "(or by index_to_float)")
                raise self._fail(op, name, what)
        what = f"{op} {name!r} output" if name else f"{op} output"
        self._fits(what, shape, self._graph.dtype, lasting=False, view=op == "reshape")
        out = self._new(None, op, shape)
        node = Node(op, tuple(inputs), out, tuple(sorted(attrs.items())), name or out)
        self._graph.nodes.append(node)
        return out

    def _fail(self, op: str, name: str | None, message: str) -> GraphError:
        return GraphError(f"{op} {name or ''}: {message}".replace("  ", " "))

    def _ranks(self, op: str, name: str | None, *pairs: tuple[str, int]) -> list[Shape]:
        shapes = []
        for value, rank in pairs:
            shape = self.shape(value)
            if len(shape) != rank:
                raise self._fail(op, name, f"{value!r} must have {rank} dimensions, got shape {shape}")
            shapes.append(shape)
        return shapes

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

    def output(self, *values: str) -> None:
        """Mark values as graph outputs, in order (of the graph's type)."""
        for v in values:
            self.shape(v)
            if v in self._graph.dtypes:
                raise GraphError(f"output {v!r} is {self._graph.dtypes[v]}: outputs are of the graph's type")
            self._graph.outputs.append(v)

    def build(self) -> Graph:
        """The graph; it needs at least one input and one output."""
        if not self._graph.inputs or not self._graph.outputs:
            raise GraphError(f"graph {self._graph.name!r} needs at least one input and one output")
        return self._graph
