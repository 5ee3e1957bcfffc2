"""One-node ONNX models run by onnxruntime, and graphs of one builder call run by autosched, for the
operator tests (tests/graph/test_graph_ops_*.py): the same inputs and weights go to both."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

import autosched as asc
from autosched.graph import Graph

OPSET = 19


def onnx_node(op: str, feeds: Mapping[str, np.ndarray], consts: Mapping[str, np.ndarray],
              inputs: list[str], opset: int = OPSET, **attrs: Any) -> np.ndarray:
    """onnxruntime's output of one ``op`` node reading ``inputs`` (names of ``feeds``, of
    ``consts`` (initializers) or ``""``), with ``attrs``."""
    node = helper.make_node(op, inputs, ["y"], **attrs)
    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
           for k, v in feeds.items()]
    out = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    inits = [numpy_helper.from_array(v, k) for k, v in consts.items()]
    graph = helper.make_graph([node], op.lower(), ins, [out], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, dict(feeds))[0])


def run_graph(feeds: Mapping[str, np.ndarray], consts: Mapping[str, np.ndarray],
              make: Callable[..., str], name: str = "op") -> tuple[np.ndarray, Graph]:
    """autosched's output of the graph whose inputs are ``feeds`` (integer arrays become int64
    inputs), constants ``consts``, and whose output is ``make(g, *values)`` (the values of the
    feeds, then of the constants, in order); and the graph."""
    g = asc.GraphBuilder(name)
    values = [g.input(k, v.shape, "int64" if v.dtype.kind == "i" else None) for k, v in feeds.items()]
    values += [g.constant(v, k) for k, v in consts.items()]
    g.output(make(g, *values))
    graph = g.build()
    out = asc.build_network(graph)(*feeds.values())
    assert isinstance(out, np.ndarray)
    return out, graph


def rand(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    """Standard normal float32 values times ``scale``."""
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-4) -> None:
    """Same shape, and equal within ``rtol`` of the largest magnitude."""
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(1.0, float(np.abs(want).max())))
