"""Rewrites of an ONNX node list before import (after :mod:`.onnx_fold` made every value it could
a constant): patterns that become one graph operator.

The erf-form GELU subgraph becomes one Gelu node; a BatchNormalization after a Conv or a
ConvTranspose (of any rank) is folded into its weights; a zero Pad of the spatial axes before a
Conv becomes the Conv's padding.
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
    proto: Any = None  # the onnx.NodeProto it was read from (None for a node a rewrite made)


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


def _channel_scale(conv: OnnxNode, weight: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``weight`` of ``conv`` with each output channel multiplied by ``scale``: axis 0 of a Conv's
    weight (K, C/g, ...); of a ConvTranspose's (C, K/g, ...) the output channel of ``w[c, j]`` is
    ``(c // (C/g)) * (K/g) + j``."""
    spatial = (None,) * (weight.ndim - 2)
    if conv.op == "Conv":
        return weight * scale[(slice(None), None, *spatial)]
    groups = int(conv.attrs.get("group", 1))
    c, kg = weight.shape[:2]
    channel = (np.arange(c)[:, None] // (c // groups)) * kg + np.arange(kg)[None, :]
    return weight * scale[channel][(slice(None), slice(None), *spatial)]


def fold_batch_norm(
    nodes: list[OnnxNode], consts: dict[str, np.ndarray], outputs: frozenset[str] = frozenset()
) -> list[OnnxNode]:
    """Nodes with each inference BatchNormalization that follows a Conv or ConvTranspose (its only
    reader, and not a graph output; constant weights and parameters) folded into its weights and bias."""
    producer = {o: n for n in nodes for o in n.outputs}
    readers: dict[str, int] = dict.fromkeys(outputs, 1)
    for n in nodes:
        for v in n.inputs:
            readers[v] = readers.get(v, 0) + 1
    kept = []
    for n in nodes:
        conv = producer.get(n.inputs[0]) if n.op == "BatchNormalization" and n.inputs else None
        foldable = (
            conv is not None and conv.op in ("Conv", "ConvTranspose") and readers.get(n.inputs[0], 0) == 1
            and not n.attrs.get("training_mode", 0) and len([o for o in n.outputs if o]) == 1
            and all(v in consts for v in n.inputs[1:5]) and conv.inputs[1] in consts
            and (len(conv.inputs) < 3 or not conv.inputs[2] or conv.inputs[2] in consts)
        )
        if conv is None or not foldable:
            kept.append(n)
            continue
        gamma, beta, mean, var = (consts[v].astype(np.float64) for v in n.inputs[1:5])
        scale = gamma / np.sqrt(var + float(n.attrs.get("epsilon", 1e-5)))
        weight = consts[conv.inputs[1]].astype(np.float64)
        bias = consts[conv.inputs[2]].astype(np.float64) if len(conv.inputs) > 2 and conv.inputs[2] else 0.0
        wname, bname = f"{conv.name}.folded_weight", f"{conv.name}.folded_bias"
        dtype = consts[conv.inputs[1]].dtype  # the model's type
        consts[wname] = _channel_scale(conv, weight, scale).astype(dtype)
        consts[bname] = ((bias - mean) * scale + beta).astype(dtype)
        conv.inputs = [conv.inputs[0], wname, bname]
        conv.outputs = [n.outputs[0]]
    return kept


#: the ONNX Pad modes autosched runs (numpy's ``np.pad`` modes of the same names)
PAD_MODES = ("constant", "reflect", "edge")


def pad_widths(
    n: OnnxNode, consts: dict[str, np.ndarray], rank: int | None = None
) -> tuple[list[int], float, str]:
    """A Pad node's widths (all begins, then all ends, of every axis of its ``rank``-axis input),
    fill value (constant mode) and mode; GraphError (its message without the node) for a form
    autosched does not run."""
    raw = n.attrs.get("mode", b"constant")
    mode = raw.decode() if isinstance(raw, bytes) else str(raw)
    if mode not in PAD_MODES:
        raise GraphError(f"mode {mode!r} is not supported (only {', '.join(PAD_MODES)})")
    if len(n.inputs) < 2 or n.inputs[1] not in consts:
        raise GraphError("the pads must be a constant")
    fill = None
    if len(n.inputs) > 2 and n.inputs[2]:
        if n.inputs[2] not in consts:
            raise GraphError("the constant_value must be a constant")
        fill = consts[n.inputs[2]]
    value = float(fill.reshape(-1)[0]) if fill is not None and fill.size and mode == "constant" else 0.0
    widths = [int(p) for p in consts[n.inputs[1]].reshape(-1)]
    if len(n.inputs) > 3 and n.inputs[3]:
        if n.inputs[3] not in consts or rank is None:
            raise GraphError("the axes must be a constant")
        axes = [int(a) + rank if a < 0 else int(a) for a in consts[n.inputs[3]].reshape(-1)]
        if len(widths) != 2 * len(axes):
            raise GraphError(f"pads {widths} must be 2 ints per axis of {axes}")
        full = [0] * 2 * rank
        for i, a in enumerate(axes):
            full[a], full[rank + a] = widths[i], widths[len(axes) + i]
        widths = full
    return widths, value, mode


def fold_pad(nodes: list[OnnxNode], consts: dict[str, np.ndarray], outputs: set[str]) -> list[OnnxNode]:
    """Nodes with each zero Pad of spatial axes only, read only by a Conv (and not a graph output),
    folded into the Conv's explicit pads where they come out equal on every side."""
    readers: dict[str, list[OnnxNode]] = {}
    for n in nodes:
        for v in n.inputs:
            readers.setdefault(v, []).append(n)
    dropped: set[int] = set()
    for n in nodes:
        plain = n.op == "Pad" and n.outputs[0] not in outputs and not (len(n.inputs) > 3 and n.inputs[3])
        users = readers.get(n.outputs[0], []) if plain else []
        if len(users) != 1 or users[0].op != "Conv" or users[0].inputs[0] != n.outputs[0]:
            continue
        try:
            widths, value, mode = pad_widths(n, consts)
        except GraphError as e:
            raise GraphError(f"Pad node {n.name!r}: {e}") from None
        conv, rank = users[0], len(widths) // 2
        pads = list(conv.attrs.get("pads", [0] * 2 * (rank - 2)))
        auto = conv.attrs.get("auto_pad", b"NOTSET") in (b"NOTSET", "NOTSET")
        spatial = rank > 2 and widths[:2] == [0, 0] and widths[rank : rank + 2] == [0, 0]
        total = [p + w for p, w in zip(pads, widths[2:rank] + widths[rank + 2 :], strict=False)]
        if mode != "constant" or value != 0.0 or not auto or not spatial or len(set(total)) != 1:
            continue
        conv.attrs["pads"] = total
        conv.inputs = [n.inputs[0], *conv.inputs[1:]]
        dropped.add(id(n))
    return [n for n in nodes if id(n) not in dropped]
