"""ONNX LSTM, GRU and RNN, unrolled at import over the sequence (its length is fixed once the input
shapes are known) into dense, slice, elementwise and concat nodes; onnxruntime's
DynamicQuantizeLSTM (what its ``quantize_dynamic`` makes of an LSTM) as the LSTM of its weights
dequantized at import.

Each direction multiplies the whole sequence by its input weights in one dense layer; each step
adds the recurrent product to its rows (the dense's epilogue) and applies the gates (an LSTM's in
two kernels: :mod:`.lstm_cell`). Initial states may be given (a constant of zeros is no state at
all); the outputs Y, Y_h and Y_c are built where they are read.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .ir import GraphError
from .onnx_context import Importer, unsupported
from .onnx_rewrite import OnnxNode
from .onnx_shape import take
from .onnx_table import Result, attr_text, converter

#: the gates of each cell, and its default activations (those autosched runs)
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
ACTIVATIONS = {"LSTM": ["sigmoid", "tanh", "tanh"], "GRU": ["sigmoid", "tanh"], "RNN": ["tanh"]}
DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}
COMMON = ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "layout")


@dataclass
class Cell:
    """One direction of a recurrent layer being unrolled: its weights and its running state."""

    w: np.ndarray  # (gates * H, I)
    r: np.ndarray  # (gates * H, H)
    wb: np.ndarray  # (gates * H,)
    rb: np.ndarray  # (gates * H,)
    h: str | None  # the hidden state (batch, H); None: zeros
    c: str | None = None  # the LSTM cell state
    consts: dict[str, str] = field(default_factory=dict)  # graph constants made once, by purpose

    def const(self, cx: Importer, key: str, array: np.ndarray) -> str:
        """The graph constant of ``array`` for ``key``, made on the first step and read by every
        step after it (one copy of the recurrent weights, which stay in the cache)."""
        if key not in self.consts:
            self.consts[key] = cx.constant(array)
        return self.consts[key]


def _check(cx: Importer, n: OnnxNode, dirs: int) -> None:
    for key in ("activation_alpha", "activation_beta", "clip"):
        if key in n.attrs:
            raise unsupported(key, n.attrs[key], "only the default activations, without clipping")
    given = [attr_text(a).lower() for a in n.attrs.get("activations", [])]
    if given and given != ACTIVATIONS[n.op] * dirs:
        raise unsupported("activations", n.attrs["activations"], f"only {ACTIVATIONS[n.op]} per direction")
    if n.attrs.get("input_forget", 0):
        raise unsupported("input_forget", n.attrs["input_forget"], "only 0")
    if cx.has(n, 7) and np.any(cx.const(n, 7, "peephole weights (P)")):
        raise GraphError("peephole weights (P) are not supported")


def _initial(
    cx: Importer, n: OnnxNode, i: int, d: int, layout: int, shape: tuple[int, int, int]
) -> str | None:
    """Direction ``d``'s initial state from input ``i`` of ``shape`` (dirs, batch, H; batch first
    in layout 1), or None where it is absent or zeros."""
    if not cx.has(n, i):
        return None
    want = (shape[1], shape[0], shape[2]) if layout else shape
    if cx.shape(n.inputs[i]) != want:
        raise GraphError(f"initial state {n.inputs[i]!r} has shape {cx.shape(n.inputs[i])}, not {want}")
    if cx.is_const(n.inputs[i]) and not np.any(cx.consts[n.inputs[i]]):
        return None
    state = cx.value(n.inputs[i])
    if layout:
        state = cx.b.transpose(state, (1, 0, 2))
    return cx.b.reshape(take(cx, state, 0, d, d + 1), shape[1:])


def _stack(cx: Importer, states: list[str], axis: int) -> str:
    """(batch, H) states stacked on a new axis ``axis`` of a 3-D result."""
    batch, hidden = cx.b.shape(states[0])
    shape = (batch, 1, hidden) if axis == 1 else (1, batch, hidden)
    parts = [cx.b.reshape(s, shape) for s in states]
    return parts[0] if len(parts) == 1 else cx.b.concat(parts, axis)


def _cols(cx: Importer, x: str, gate: int, hidden: int) -> str:
    return take(cx, x, 1, gate * hidden, (gate + 1) * hidden)


def _lstm_step(cx: Importer, cell: Cell, gates: str) -> None:
    """The gates of one LSTM step: two kernels (:mod:`.lstm_cell`), the cell state, then the hidden."""
    cell.c = cx.b.lstm_state(gates, cell.c)
    cell.h = cx.b.lstm_hidden(gates, cell.c)


def _gru_step(cx: Importer, n: OnnxNode, cell: Cell, xt: str, hidden: int) -> None:
    batch = cx.b.shape(xt)[0]
    if n.attrs.get("linear_before_reset", 0):
        if cell.h is None:
            hr = cell.const(cx, "rb rows", np.tile(cell.rb, (batch, 1)))
        else:
            hr = cx.b.dense(cell.h, cell.const(cx, "r", cell.r), cell.const(cx, "rb", cell.rb))
        z, r = (cx.b.sigmoid(cx.b.add(_cols(cx, xt, g, hidden), _cols(cx, hr, g, hidden))) for g in range(2))
        recurrent = cx.b.mul(r, _cols(cx, hr, 2, hidden))
    else:
        if cell.h is None:
            z = cx.b.sigmoid(_cols(cx, xt, 0, hidden))
            recurrent = None
        else:
            hzr = cx.b.dense(cell.h, cell.const(cx, "r zr", cell.r[: 2 * hidden]))
            z, r = (cx.b.sigmoid(cx.b.add(_cols(cx, xt, g, hidden), _cols(cx, hzr, g, hidden)))
                    for g in range(2))
            recurrent = cx.b.dense(cx.b.mul(r, cell.h), cell.const(cx, "r h", cell.r[2 * hidden :]))
    pre = _cols(cx, xt, 2, hidden)
    candidate = cx.b.unary(pre if recurrent is None else cx.b.add(pre, recurrent), "tanh")
    if cell.h is None:
        cell.h = cx.b.sub(candidate, cx.b.mul(z, candidate))  # (1 - z) * candidate
    else:
        cell.h = cx.b.add(candidate, cx.b.mul(z, cx.b.sub(cell.h, candidate)))  # (1 - z) * cand + z * h


def _unroll(
    cx: Importer, n: OnnxNode, cell: Cell, x: str, seq: int, backward: bool, hidden: int
) -> list[str]:
    """The hidden states of one direction at each time step (in time order)."""
    batch = cx.b.shape(x)[0] // seq
    input_bias = cell.wb + (cell.rb if n.op != "GRU" or not n.attrs.get("linear_before_reset", 0) else 0.0)
    projected = cx.b.dense(x, cx.constant(cell.w), cx.constant(input_bias))  # (seq * batch, gates * H)
    out: list[str] = [""] * seq
    for t in (reversed(range(seq)) if backward else range(seq)):
        xt = take(cx, projected, 0, t * batch, (t + 1) * batch)
        if n.op == "GRU":
            _gru_step(cx, n, cell, xt, hidden)
        else:
            gates = xt if cell.h is None else cx.b.add(xt, cx.b.dense(cell.h, cell.const(cx, "r", cell.r)))
            if n.op == "LSTM":
                _lstm_step(cx, cell, gates)
            else:
                cell.h = cx.b.unary(gates, "tanh")
        assert cell.h is not None
        out[t] = cell.h
    return out


@converter("LSTM", attrs=(*COMMON, "input_forget"),
           doc="forward, reverse, bidirectional; unrolled at import; initial states; outputs Y, Y_h, Y_c "
           "(default activations, no clip or peepholes)")
@converter("GRU", attrs=(*COMMON, "linear_before_reset"),
           doc="forward, reverse, bidirectional; unrolled at import; initial state; linear_before_reset 0 "
           "or 1; outputs Y, Y_h (default activations, no clip)")
@converter("RNN", attrs=COMMON, doc="forward, reverse, bidirectional; unrolled at import; tanh")
def _recurrent(cx: Importer, n: OnnxNode) -> list[Result]:
    direction = cx.text(n, "direction", "forward")
    if direction not in DIRECTIONS:
        raise unsupported("direction", direction, f"one of {', '.join(DIRECTIONS)}")
    dirs, gates, layout = DIRECTIONS[direction], GATES[n.op], int(n.attrs.get("layout") or 0)
    _check(cx, n, dirs)
    w, r = cx.const(n, 1, "input weights (W)"), cx.const(n, 2, "recurrence weights (R)")
    hidden = int(n.attrs["hidden_size"]) if "hidden_size" in n.attrs else int(r.shape[-1])
    if w.shape[0] != dirs or w.shape[1] != gates * hidden or r.shape != (dirs, gates * hidden, hidden):
        raise GraphError(f"weights W {w.shape} and R {r.shape} do not fit {dirs} direction(s) of "
                         f"{gates} gates of hidden_size {hidden}")
    bias = cx.optional_const(n, 3, "bias (B)")
    bias = np.zeros((dirs, 2 * gates * hidden)) if bias is None else bias.astype(np.float64)
    x = cx.value(n.inputs[0])
    if layout:
        x = cx.b.transpose(x, (1, 0, 2))
    seq, batch, width = cx.b.shape(x)
    lengths = cx.optional_const(n, 4, "sequence_lens")
    if lengths is not None and np.any(lengths != seq):
        raise GraphError(f"sequence_lens {lengths.tolist()} must all be the sequence length {seq}")
    rows = cx.b.reshape(x, (seq * batch, width))
    ys, last_h, last_c = [], [], []
    for d in range(dirs):
        states = (dirs, batch, hidden)
        h0 = _initial(cx, n, 5, d, layout, states)
        cell = Cell(w[d], r[d], bias[d, : gates * hidden], bias[d, gates * hidden :], h0)
        if n.op == "LSTM":
            cell.c = _initial(cx, n, 6, d, layout, states)
        steps = _unroll(cx, n, cell, rows, seq, direction == "reverse" or d == 1, hidden)
        ys.append(steps)
        last_h.append(steps[0] if direction == "reverse" or d == 1 else steps[-1])
        last_c.append(cell.c or "")
    results: list[Result] = []
    wanted = [o in cx.needed for o in n.outputs] + [False] * 3
    if wanted[0]:
        per_dir = [cx.b.reshape(_stack(cx, s, 0), (seq, 1, batch, hidden)) for s in ys]
        y = per_dir[0] if dirs == 1 else cx.b.concat(per_dir, 1)
        results.append(cx.b.transpose(y, (2, 0, 1, 3)) if layout else y)
    else:
        results.append("")
    for k, finals in ((1, last_h), (2, last_c)):
        results.append(_stack(cx, finals, 1 if layout else 0) if wanted[k] else "")
    return results[: 3 if n.op == "LSTM" else 2]


@converter("DynamicQuantizeLSTM", attrs=(*COMMON, "input_forget"),
           doc="(com.microsoft) as LSTM with W and R dequantized at import (int8 or uint8, a scale and "
           "zero point per direction or per gate column); activations stay float")
def _dynamic_quantize_lstm(cx: Importer, n: OnnxNode) -> list[Result]:
    weights = []
    for i, (name, what) in enumerate((("W", "input weights"), ("R", "recurrence weights")), start=1):
        q = cx.const(n, i, f"quantized {what} ({name})")
        scale = cx.const(n, 8 + 2 * (i - 1), f"{name}_scale").astype(np.float64)
        zero = cx.const(n, 9 + 2 * (i - 1), f"{name}_zero_point").astype(np.float64)
        shapes = ((q.shape[0],), (q.shape[0], q.shape[2])) if q.ndim == 3 else ()
        if q.dtype.kind not in "iu" or scale.shape != zero.shape or scale.shape not in shapes:
            raise GraphError(f"quantized {name} {q.shape} ({q.dtype}) with scale {scale.shape} and zero "
                             f"point {zero.shape}: expected (directions, rows, 4 x hidden) integers, a "
                             "scale per direction or per column")
        per = (slice(None), None, slice(None)) if scale.ndim == 2 else (slice(None), None, None)
        dequantized = (q.astype(np.float64) - zero[per]) * scale[per]  # (directions, rows, 4 x hidden)
        weights.append(dequantized.transpose(0, 2, 1).astype(np.float32))  # LSTM's (directions, 4H, rows)
    names = [f"{n.name or n.outputs[0]}/{w}.dequantized" for w in ("W", "R")]
    cx.consts.update(zip(names, weights, strict=True))
    inputs = [n.inputs[0], *names, *(n.inputs[3:8])]
    return list(_recurrent(cx, replace(n, op="LSTM", inputs=inputs, proto=None)))
