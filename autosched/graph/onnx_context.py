"""The state of one ONNX import: the builder, each ONNX value's builder value or constant, and the
helpers converters share (:mod:`.onnx_table` maps operators to converters)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .ir import GraphBuilder, GraphError, Shape
from .ir_core import INDEX_DTYPES
from .onnx_fold import evaluate, foldable
from .onnx_rewrite import OnnxNode
from .onnx_table import OPS, attr_text

#: operators that only view their first input in another shape (an integer input may pass them on
#: its way to a Gather)
INDEX_VIEWS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})
FLOATS = "autosched networks compute in float32 or float64, one type for the whole graph"


class Importer:
    """Converts ONNX nodes one by one into builder calls; ``consts`` holds every constant (folded
    ones too, of any type), ``values`` the builder value of each computed ONNX value."""

    def __init__(self, b: GraphBuilder, values: dict[str, str], consts: dict[str, np.ndarray],
                 types: Mapping[str, str], opset: int) -> None:
        self.b, self.values, self.consts, self.opset = b, values, consts, opset
        self.types = types  # element type (numpy name) of computed values, where known
        self.needed: set[str] = set()  # the values something reads (later nodes, the graph's outputs)
        #: an integer input seen through a Reshape/Flatten/Squeeze/Unsqueeze: (the input, the shape)
        self.index_views: dict[str, tuple[str, Shape]] = {}
        self.index_floats: dict[str, str] = {}  # an integer input -> its index_to_float value

    def convert(self, n: OnnxNode) -> None:
        """Add node ``n`` to the graph (or compute it, if its inputs are constants: shapes computed
        while converting make some so)."""
        if foldable(n, self.consts):
            results: Sequence[str | np.ndarray] = evaluate(
                n, [self.consts[v] if v else None for v in n.inputs], self.opset)
        elif n.op in INDEX_VIEWS and self._index_view(n):
            return
        else:
            spec = OPS.get(n.op)
            if spec is None:
                raise GraphError(f"unsupported ONNX operator {n.op!r} (node {n.name!r})")
            for a in n.attrs:
                if a not in spec.attrs:
                    raise GraphError(f"{n.op} node {n.name!r}: attribute {a!r} is not supported")
            try:
                results = spec.convert(self, n)
            except GraphError as e:
                message = str(e)
                named = message.startswith(f"{n.op} node ")
                raise GraphError(message if named else f"{n.op} node {n.name!r}: {message}") from None
        for i, out in enumerate(n.outputs):
            if not out:
                continue
            if i >= len(results):
                raise GraphError(f"{n.op} node {n.name!r}: output {i} ({out!r}) is not supported")
            result = results[i]
            if isinstance(result, str) and not result:
                continue  # an output no one reads, not made
            if isinstance(result, str):
                self.values[out] = result
            else:
                self.consts[out] = result

    def _index_view(self, n: OnnxNode) -> bool:
        """Record ``n`` (a view op) as an index view if it reads an integer input (token ids
        reshaped before an embedding's Gather): its output's shape is computed on zeros."""
        source = n.inputs[0]
        source, shape = self.index_views.get(source, (source, None))  # a view of a view
        if self.dtype(source) not in INDEX_DTYPES or self.is_const(source):
            return False
        zeros = np.zeros(shape if shape is not None else self.shape(source), np.int64)
        out = evaluate(n, [zeros, *(self.consts.get(v) if v else None for v in n.inputs[1:])], self.opset)
        self.index_views[n.outputs[0]] = (source, tuple(out[0].shape))
        return True

    # -- values ------------------------------------------------------------------------------

    def value(self, name: str) -> str:
        """The builder value of an ONNX value (a constant becomes a graph constant on first use)."""
        if name not in self.values:
            if name not in self.consts:
                raise GraphError(f"value {name!r} is read before it is computed")
            self.check_float(name)
            self.values[name] = self.b.constant(self.consts[name], name)
        return self.values[name]

    def check_float(self, *names: str) -> None:
        """GraphError naming the first of ``names`` that is a constant not of the graph's type."""
        for name in names:
            if name in self.consts and self.consts[name].dtype != self.b.dtype:
                raise GraphError(f"constant {name!r} is {self.consts[name].dtype.name}: {FLOATS}")

    def is_const(self, name: str) -> bool:
        """Whether ONNX value ``name`` is a constant (given, or computed at import)."""
        return name in self.consts

    def shape(self, name: str) -> Shape:
        """The shape of ONNX value ``name``."""
        return tuple(self.consts[name].shape) if name in self.consts else self.b.shape(self.value(name))

    def dtype(self, name: str) -> str:
        """The element type of ONNX value ``name`` (numpy's name)."""
        if name in self.consts:
            return self.consts[name].dtype.name
        return self.types.get(name, self.b.dtype)

    def constant(self, array: np.ndarray, name: str | None = None) -> str:
        """A new graph constant in the graph's type."""
        return self.b.constant(np.asarray(array, dtype=self.b.dtype), name)

    def is_index(self, name: str) -> bool:
        """Whether ONNX value ``name`` is of an integer or boolean type (indices and their
        arithmetic, which the graph computes in its float type: whole numbers, exact below 2^24 in
        float32)."""
        return np.dtype(self.dtype(name)).kind in "iub"

    def index_value(self, name: str, shape: Shape | None = None) -> str:
        """The builder value of integer ONNX value ``name`` in the graph's float type (an integer
        input converted once, a constant as floats), broadcast to ``shape`` if given."""
        if name in self.consts:
            array = self.consts[name].astype(np.float64)
            return self.constant(array if shape is None else np.broadcast_to(array, shape))
        if name in self.index_views:  # a view of an integer input: the view of its floats
            source, view = self.index_views[name]
            value = self.b.reshape(self.index_value(source), view)
            return value if shape is None or view == shape else self.b.broadcast(value, shape)
        value = self.value(name)
        if self.b.value_dtype(value) in INDEX_DTYPES:
            if value not in self.index_floats:
                self.index_floats[value] = self.b.index_to_float(value)
            value = self.index_floats[value]
        return value if shape is None or self.b.shape(value) == shape else self.b.broadcast(value, shape)

    def expanded(self, name: str, shape: Shape) -> str:
        """ONNX value ``name`` at ``shape``: a constant repeated now, a computed value by a kernel."""
        if name in self.consts and self.consts[name].shape != shape:
            self.check_float(name)
            return self.constant(np.broadcast_to(self.consts[name], shape))
        value = self.value(name)
        return value if self.b.shape(value) == shape else self.b.broadcast(value, shape)

    # -- inputs and attributes ---------------------------------------------------------------

    @staticmethod
    def has(n: OnnxNode, i: int) -> bool:
        """Whether optional input ``i`` of ``n`` is given."""
        return len(n.inputs) > i and bool(n.inputs[i])

    def const(self, n: OnnxNode, i: int, what: str) -> np.ndarray:
        """Input ``i`` of ``n``, which must be a constant (GraphError naming ``what`` otherwise)."""
        if not self.has(n, i):
            raise GraphError(f"the {what} input is missing")
        if n.inputs[i] not in self.consts:
            raise GraphError(f"the {what} must be a constant (it is computed from the graph's inputs)")
        return self.consts[n.inputs[i]]

    def optional_const(self, n: OnnxNode, i: int, what: str) -> np.ndarray | None:
        """Optional input ``i`` of ``n`` (a constant when given), or None."""
        return self.const(n, i, what) if self.has(n, i) else None

    @staticmethod
    def text(n: OnnxNode, key: str, default: str) -> str:
        """A string attribute."""
        return attr_text(n.attrs.get(key, default))

    @staticmethod
    def ints(n: OnnxNode, key: str, default: Sequence[int]) -> list[int]:
        """An ints attribute."""
        return [int(v) for v in n.attrs.get(key, default)]


def unsupported(key: str, value: Any, why: str = "") -> GraphError:
    """The error for attribute ``key`` at a value not supported (the caller adds the node)."""
    return GraphError(f"attribute {key!r} = {attr_text(value)} is not supported{': ' + why if why else ''}")
