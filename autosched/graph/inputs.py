"""The inputs of a built network: what type the kernels read each in, random ones for checks, and
the checks of a caller's arrays (shapes, and the values of integer inputs against the rows they
index)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .ir import Graph

#: how the kernels read an integer input (gather indices)
INDEX_DTYPE = "int64"


def input_dtype(graph: Graph, value: str) -> str:
    """The type the kernels read input ``value`` in: the graph's, or int64 for indices."""
    return INDEX_DTYPE if value in graph.dtypes else graph.dtype


def index_rows(graph: Graph) -> dict[str, int]:
    """For each integer input, the fewest rows a ``gather`` reading it indexes (its values must lie
    in [-rows, rows))."""
    rows: dict[str, int] = {}
    for node in graph.nodes:
        if node.op == "gather":
            n = graph.shapes[node.inputs[0]][node.attr("axis")]
            rows[node.inputs[1]] = min(rows.get(node.inputs[1], n), n)
    return rows


def sample_inputs(graph: Graph, seed: int = 0) -> list[np.ndarray]:
    """Random inputs of ``graph``: standard normal floats (float32), integer inputs (int64)
    uniform over the rows they index."""
    rng = np.random.default_rng(seed)
    rows = index_rows(graph)
    return [rng.integers(0, rows.get(v, 1), graph.shapes[v]) if v in graph.dtypes
            else rng.standard_normal(graph.shapes[v]).astype(np.float32) for v in graph.inputs]


def checked_inputs(graph: Graph, arrays: Sequence[np.ndarray], rows: dict[str, int]) -> list[np.ndarray]:
    """``arrays`` as the kernels read them (contiguous, of :func:`input_dtype`), each checked:
    one per input of ``graph`` in its shape; an integer input's values within the ``rows`` it
    indexes (:func:`index_rows`)."""
    names = graph.inputs
    if len(arrays) != len(names):
        raise TypeError(f"network {graph.name!r} takes {len(names)} inputs {names}, got {len(arrays)}")
    checked = []
    for name, a in zip(names, arrays, strict=True):
        if name in graph.dtypes:
            arr = _indices(name, a, rows.get(name))
        else:
            arr = np.ascontiguousarray(a, dtype=graph.dtype)
        if arr.shape != graph.shapes[name]:
            raise ValueError(f"input {name!r} must have shape {graph.shapes[name]}, got {arr.shape}")
        checked.append(arr)
    return checked


def _indices(name: str, a: np.ndarray, rows: int | None) -> np.ndarray:
    """Integer input ``name`` as the kernels read it (int64), its values checked."""
    arr = np.asarray(a)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"input {name!r} takes integers (token ids), got an array of {arr.dtype}")
    if rows is not None and arr.size and (int(arr.min()) < -rows or int(arr.max()) >= rows):
        bad = int(arr.min()) if int(arr.min()) < -rows else int(arr.max())
        raise ValueError(f"input {name!r}: index {bad} is outside [-{rows}, {rows}) (the rows it reads)")
    return np.ascontiguousarray(arr, dtype=INDEX_DTYPE)
