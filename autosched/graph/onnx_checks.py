"""Checks of an ONNX model before anything is computed from it, each failure one line naming the
value or node: a node writing a value it reads or a value defined twice, an initializer whose data
does not match its dims, and sizes that cannot fit in this machine's memory."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..memory import format_bytes, memory_bytes
from .ir import GraphError


def check_size(what: str, shape: Sequence[int], itemsize: int) -> None:
    """GraphError naming ``what`` if a tensor of ``shape`` would take more than this machine's memory."""
    need = math.prod(int(d) for d in shape) * itemsize
    have = memory_bytes()
    if need > have:
        raise GraphError(f"{what} of shape {tuple(int(d) for d in shape)} would take {format_bytes(need)}, "
                         f"more than this machine's memory ({format_bytes(have)})")


def check_structure(graph: Any) -> None:
    """GraphError for a node whose output is one of its inputs (``Relu x -> x``) or a value defined
    twice (by two nodes, or by a node and the graph's inputs or initializers)."""
    defined: dict[str, str] = {v.name: "a graph input" for v in graph.input}
    defined.update((t.name, "an initializer") for t in graph.initializer)
    for i, n in enumerate(graph.node):
        label = f"{n.op_type} node {n.name or f'{n.op_type}#{i}'!r}"
        for out in n.output:
            if not out:
                continue
            if out in n.input:
                raise GraphError(f"{label}: its output {out!r} is also its input (a value is written once)")
            if out in defined:
                raise GraphError(f"{label}: value {out!r} is defined twice (also by {defined[out]})")
            defined[out] = label


def load_initializers(graph: Any) -> dict[str, np.ndarray]:
    """The graph's initializers as arrays; GraphError naming one whose data does not match its dims
    or whose dims would not fit in memory."""
    from onnx import TensorProto, helper, numpy_helper  # optional dependency; from_onnx said what to install

    arrays = {}
    for t in graph.initializer:
        dims = tuple(int(d) for d in t.dims)
        if any(d < 0 for d in dims):
            raise GraphError(f"initializer {t.name!r} has a negative dimension in its dims {dims}")
        try:
            itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
        except (KeyError, TypeError, ValueError):
            itemsize = 1
        check_size(f"initializer {t.name!r}", dims, itemsize)
        stored = t.data_location == TensorProto.EXTERNAL
        try:
            arrays[t.name] = numpy_helper.to_array(t)
        except Exception as e:  # ValueError from a reshape of too little or too much data, and friends
            why = "its external data is missing" if stored else "its data does not match its dims"
            raise GraphError(f"initializer {t.name!r}: {why} {dims} ({type(e).__name__})") from None
        if arrays[t.name].shape != dims:
            raise GraphError(f"initializer {t.name!r}: its data has shape {arrays[t.name].shape}, "
                             f"its dims say {dims}")
    return arrays
