"""PyTorch (CPU, eager) running an ONNX model node by node: the "vs PyTorch" column of the network
benchmark, with no converter package. Batch-normalization after a convolution is folded into the
convolution's weights and bias first (as onnxruntime and ``autosched.from_onnx`` do), so every
framework runs the same arithmetic; convolutions go to PyTorch's own kernels (oneDNN on x86).

Only the operators of the benchmark's models are known (Conv, BatchNormalization, Relu, Add,
MaxPool, AveragePool, GlobalAveragePool, Flatten, Gemm, MatMul); any other is a clear error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _fold_batch_norms(model: onnx.ModelProto, consts: dict[str, np.ndarray]) -> list[onnx.NodeProto]:
    """The graph's nodes with each Conv -> BatchNormalization pair (the conv's output used only by
    the batch-norm) replaced by one Conv with folded weights and bias, added to ``consts``."""
    nodes = list(model.graph.node)
    users: dict[str, int] = {}
    for n in nodes:
        for name in n.input:
            users[name] = users.get(name, 0) + 1
    producer = {n.output[0]: n for n in nodes}
    out: list[onnx.NodeProto] = []
    for n in nodes:
        conv = producer.get(n.input[0]) if n.op_type == "BatchNormalization" else None
        if conv is None or conv.op_type != "Conv" or users[conv.output[0]] != 1:
            out.append(n)
            continue
        scale, shift, mean, var = (consts[i] for i in n.input[1:5])
        eps = float(_attrs(n).get("epsilon", 1e-5))
        factor = scale / np.sqrt(var + eps)
        w = consts[conv.input[1]] * factor[:, None, None, None]
        b = consts[conv.input[2]] if len(conv.input) > 2 else np.zeros_like(factor)
        consts[n.output[0] + "/w"] = w.astype(np.float32)
        consts[n.output[0] + "/b"] = ((b - mean) * factor + shift).astype(np.float32)
        merged = onnx.NodeProto()
        merged.CopyFrom(conv)
        del merged.input[:], merged.output[:]
        merged.input.extend([conv.input[0], n.output[0] + "/w", n.output[0] + "/b"])
        merged.output.append(n.output[0])
        out[out.index(conv)] = merged
    return out


def torch_runner(model: onnx.ModelProto, threads: int) -> Callable[[np.ndarray], np.ndarray]:
    """A callable running ``model`` (one input, one output) with PyTorch on ``threads`` threads;
    raises ImportError if PyTorch is missing."""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    nodes = _fold_batch_norms(model, consts)
    params = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in consts.items()}

    def conv(a: dict[str, Any], x: Any, w: Any, b: Any = None) -> Any:
        pads = a.get("pads", [0, 0, 0, 0])
        if pads[:2] != pads[2:]:
            raise ValueError(f"asymmetric Conv pads {pads}")
        return F.conv2d(x, w, b, stride=a.get("strides", 1), padding=pads[:2],
                        dilation=a.get("dilations", 1), groups=a.get("group", 1))

    def pool(kind: Callable[..., Any]) -> Callable[..., Any]:
        def run(a: dict[str, Any], x: Any) -> Any:
            pads = a.get("pads", [0, 0, 0, 0])
            return kind(x, a["kernel_shape"], a.get("strides", a["kernel_shape"]), pads[:2])
        return run

    def gemm(a: dict[str, Any], x: Any, w: Any, b: Any = None) -> Any:
        x = x.t() if a.get("transA", 0) else x
        w = w.t() if a.get("transB", 0) else w
        y = torch.matmul(x, w) * a.get("alpha", 1.0)
        return y if b is None else y + b * a.get("beta", 1.0)

    ops: dict[str, Callable[..., Any]] = {
        "Conv": conv,
        "Relu": lambda a, x: torch.relu(x),
        "Add": lambda a, x, y: x + y,
        "MaxPool": pool(F.max_pool2d),
        "AveragePool": pool(F.avg_pool2d),
        "GlobalAveragePool": lambda a, x: F.adaptive_avg_pool2d(x, 1),
        "Flatten": lambda a, x: torch.flatten(x, a.get("axis", 1)),
        "Gemm": gemm,
        "MatMul": lambda a, x, y: torch.matmul(x, y),
    }
    plan = []
    for n in nodes:
        if n.op_type not in ops:
            raise ValueError(f"torch_onnx: operator {n.op_type} (node {n.name}) is not supported")
        plan.append((ops[n.op_type], _attrs(n), list(n.input), n.output[0]))
    (inp,) = [i.name for i in model.graph.input if i.name not in consts]
    result = model.graph.output[0].name

    def run(x: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            env = dict(params)
            env[inp] = torch.from_numpy(x)
            for fn, attrs, ins, out in plan:
                env[out] = fn(attrs, *(env[i] for i in ins))
            return env[result].numpy()

    return run
