"""Small ONNX models built with onnx.helper, and their check against onnxruntime, for the
tests/graph/test_onnx_*.py files (no downloads, no torch)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import autosched as asc

#: the largest error allowed, relative to the largest magnitude of the reference output
RTOL = 1e-4


def model(
    nodes: Sequence[onnx.NodeProto], inputs: Mapping[str, np.ndarray], outputs: Sequence[str],
    inits: Mapping[str, np.ndarray] | None = None, opset: int = 17, check: bool = True,
    out_type: int = TensorProto.FLOAT,
) -> onnx.ModelProto:
    """A model of ``nodes`` whose inputs are typed and shaped like the example arrays ``inputs``,
    with float outputs and initializers ``inits``; with ``check``, the outputs' shapes inferred and
    the model checked by onnx (else the outputs' shapes are left unstated)."""
    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
           for k, v in inputs.items()]
    outs = [helper.make_tensor_value_info(o, out_type, None) for o in outputs]
    tensors = [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()]
    graph = helper.make_graph(list(nodes), "case", ins, outs, tensors)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if check:  # the outputs' shapes from onnx's inference, then the checker
        proto = onnx.shape_inference.infer_shapes(proto, strict_mode=True)
        onnx.checker.check_model(proto)
    return proto


def node(op: str, inputs: Sequence[str], outputs: Sequence[str] = ("y",), **attrs: object) -> onnx.NodeProto:
    """A node named after its operator in lower case (and its first output, unless that is ``y``)."""
    name = op.lower() if outputs[0] == "y" else f"{op.lower()}_{outputs[0]}"
    return helper.make_node(op, list(inputs), list(outputs), name=name, **attrs)


def onnxruntime(proto: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The model's outputs, computed by onnxruntime."""
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return [np.asarray(v) for v in session.run(None, dict(feeds))]


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| over max |want| (shapes must be equal)."""
    assert got.shape == want.shape, f"shape {got.shape} != onnxruntime's {want.shape}"
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-30)
    return float(np.max(np.abs(got.astype(np.float64) - want))) / scale if want.size else 0.0


def compare(
    proto: onnx.ModelProto, feeds: Mapping[str, np.ndarray], rtol: float = RTOL, target: str = "c"
) -> float:
    """Import ``proto``, build its network for ``target``, run it on ``feeds`` and check every
    output against onnxruntime's (relative error <= ``rtol``); the largest relative error."""
    graph = asc.from_onnx(proto)
    got = asc.build_network(graph, target=target)(*(feeds[name] for name in graph.inputs))
    outs = got if isinstance(got, list) else [got]
    want = onnxruntime(proto, feeds)
    assert len(outs) == len(want)
    errors = [relative_error(g, w) for g, w in zip(outs, want, strict=True)]
    assert max(errors) <= rtol, f"relative errors {errors} above {rtol}"
    return max(errors)


def rand(*shape: int, seed: int = 0, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    """A float32 array uniform in [low, high)."""
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)
