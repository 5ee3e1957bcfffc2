"""Rewrites of an ONNX node list before import: patterns that become one graph operator.

The erf-form GELU subgraph becomes one Gelu node; a BatchNormalization after a Conv is folded into
its weights; a zero Pad of the spatial axes before a Conv becomes the Conv's padding; elementwise
arithmetic on constants only is computed at import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .ir import GraphError


@dataclass(slots=True)
class OnnxNode:
    """One ONNX node, as plain Python values (attributes decoded)."""

    op: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)


def _scalar(consts: dict[str, np.ndarray], name: str, value: float) -> bool:
    return name in consts and consts[name].size == 1 and abs(float(consts[name].reshape(())) - value) < 1e-4


def find_gelu(nodes: list[OnnxNode], consts: dict[str, np.ndarray]) -> list[OnnxNode]:
    """Nodes with each erf-form GELU subgraph (Div by sqrt 2 or Mul by 1/sqrt 2, Erf, Add 1, and
    the two products by x and 0.5 in either order) replaced by one Gelu node."""
    readers: dict[str, list[OnnxNode]] = {}
    producer = {o: n for n in nodes for o in n.outputs}
    for n in nodes:
        for v in n.inputs:
            readers.setdefault(v, []).append(n)

    def only(value: str, op: str) -> OnnxNode | None:
        users = readers.get(value, [])
        return users[0] if len(users) == 1 and users[0].op == op else None

    def other(n: OnnxNode, value: str) -> str:
        return n.inputs[1] if n.inputs[0] == value else n.inputs[0]

    dropped: set[int] = set()
    for erf in [n for n in nodes if n.op == "Erf"]:
        scale = producer.get(erf.inputs[0])
        if scale is None or scale.op not in ("Div", "Mul"):
            continue
        x = scale.inputs[0]
        factor = (math.sqrt(2.0) if scale.op == "Div" else 1 / math.sqrt(2.0))
        plus = only(erf.outputs[0], "Add")
        if not _scalar(consts, scale.inputs[1], factor) or plus is None:
            continue
        mul1 = only(plus.outputs[0], "Mul")
        if not _scalar(consts, other(plus, erf.outputs[0]), 1.0) or mul1 is None:
            continue
        mul2 = only(mul1.outputs[0], "Mul")
        half_first = _scalar(consts, other(mul1, plus.outputs[0]), 0.5)
        if mul2 is None or not (half_first or other(mul1, plus.outputs[0]) == x):
            continue
        rest = other(mul2, mul1.outputs[0])
        if not (rest == x if half_first else _scalar(consts, rest, 0.5)):
            continue
        dropped |= {id(scale), id(erf), id(plus), id(mul1)}
        mul2.op, mul2.inputs, mul2.attrs = "Gelu", [x], {}
    return [n for n in nodes if id(n) not in dropped]


def fold_batch_norm(nodes: list[OnnxNode], consts: dict[str, np.ndarray]) -> list[OnnxNode]:
    """Nodes with each BatchNormalization that follows a Conv (its only reader) folded into it."""
    producer = {o: n for n in nodes for o in n.outputs}
    readers: dict[str, int] = {}
    for n in nodes:
        for v in n.inputs:
            readers[v] = readers.get(v, 0) + 1
    kept = []
    for n in nodes:
        conv = producer.get(n.inputs[0]) if n.op == "BatchNormalization" and n.inputs else None
        if conv is None or conv.op != "Conv" or readers.get(n.inputs[0], 0) != 1:
            kept.append(n)
            continue
        if not all(v in consts for v in n.inputs[1:5]) or conv.inputs[1] not in consts:
            raise GraphError(
                f"BatchNormalization node {n.name!r}: its parameters and the Conv's weight must be constants"
            )
        gamma, beta, mean, var = (consts[v].astype(np.float64) for v in n.inputs[1:5])
        scale = gamma / np.sqrt(var + float(n.attrs.get("epsilon", 1e-5)))
        weight = consts[conv.inputs[1]].astype(np.float64)
        bias = consts[conv.inputs[2]].astype(np.float64) if len(conv.inputs) > 2 and conv.inputs[2] else 0.0
        wname, bname = f"{conv.name}.folded_weight", f"{conv.name}.folded_bias"
        dtype = consts[conv.inputs[1]].dtype  # the model's type
        consts[wname] = (weight * scale[:, None, None, None]).astype(dtype)
        consts[bname] = ((bias - mean) * scale + beta).astype(dtype)
        conv.inputs = [conv.inputs[0], wname, bname]
        conv.outputs = [n.outputs[0]]
    return kept




_ARITH = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}


def fold_constants(nodes: list[OnnxNode], consts: dict[str, np.ndarray]) -> list[OnnxNode]:
    """Nodes with each Add/Sub/Mul/Div of constants only computed now (its output a constant)."""
    kept = []
    for n in nodes:
        if n.op in _ARITH and len(n.inputs) == 2 and all(v in consts for v in n.inputs):
            a, b = (consts[v] for v in n.inputs)
            consts[n.outputs[0]] = _ARITH[n.op](a, b).astype(np.result_type(a, b))
        else:
            kept.append(n)
    return kept


#: the ONNX Pad modes autosched runs (numpy's ``np.pad`` modes of the same names)
PAD_MODES = ("constant", "reflect", "edge")


def pad_widths(n: OnnxNode, consts: dict[str, np.ndarray]) -> tuple[list[int], float, str]:
    """A Pad node's widths (all begins, then all ends), fill value (constant mode) and mode;
    GraphError (its message without the node) for a form autosched does not run."""
    raw = n.attrs.get("mode", b"constant")
    mode = raw.decode() if isinstance(raw, bytes) else str(raw)
    if mode not in PAD_MODES:
        raise GraphError(f"mode {mode!r} is not supported (only {', '.join(PAD_MODES)})")
    if len(n.inputs) > 3 and n.inputs[3]:
        raise GraphError("the 'axes' input is not supported")
    if len(n.inputs) < 2 or n.inputs[1] not in consts:
        raise GraphError("the pads must be a constant")
    fill = None
    if len(n.inputs) > 2 and n.inputs[2]:
        if n.inputs[2] not in consts:
            raise GraphError("the constant_value must be a constant")
        fill = consts[n.inputs[2]]
    value = float(fill.reshape(-1)[0]) if fill is not None and fill.size and mode == "constant" else 0.0
    return [int(p) for p in consts[n.inputs[1]].reshape(-1)], value, mode


def fold_pad(nodes: list[OnnxNode], consts: dict[str, np.ndarray], outputs: set[str]) -> list[OnnxNode]:
    """Nodes with each zero Pad of a 4-D tensor's two spatial axes, equal on all four sides, read
    only by a Conv with equal explicit pads (and not a graph output), folded into the Conv's pads."""
    readers: dict[str, list[OnnxNode]] = {}
    for n in nodes:
        for v in n.inputs:
            readers.setdefault(v, []).append(n)
    dropped: set[int] = set()
    for n in nodes:
        users = readers.get(n.outputs[0], []) if n.op == "Pad" and n.outputs[0] not in outputs else []
        if len(users) != 1 or users[0].op != "Conv" or users[0].inputs[0] != n.outputs[0]:
            continue
        try:
            widths, value, mode = pad_widths(n, consts)
        except GraphError as e:
            raise GraphError(f"Pad node {n.name!r}: {e}") from None
        conv = users[0]
        pads = list(conv.attrs.get("pads", [0, 0, 0, 0]))
        auto = conv.attrs.get("auto_pad", b"NOTSET") in (b"NOTSET", "NOTSET")
        spatial = len(widths) == 8 and widths[:2] == [0, 0] and widths[4:6] == [0, 0]
        equal = len({*widths[2:4], *widths[6:]}) == 1 and len(set(pads)) == 1
        if mode != "constant" or value != 0.0 or not auto or not spatial or not equal:
            continue
        conv.attrs["pads"] = [pads[0] + widths[2]] * 4
        conv.inputs = [n.inputs[0], *conv.inputs[1:]]
        dropped.add(id(n))
    return [n for n in nodes if id(n) not in dropped]
