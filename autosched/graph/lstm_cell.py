"""The elementwise part of an LSTM step in two kernels: ``lstm_state`` (the new cell state) and
``lstm_hidden`` (the new hidden state).

An unrolled LSTM step is a dense layer (the recurrent product, with the step's input projection
added as its epilogue) followed by gates: four slices of the (batch, 4 hidden) pre-activations, three
sigmoids, two tanh, three products and a sum, each a kernel of its own when written as graph
nodes. Here the cell state is one kernel reading the pre-activations and the previous cell state,
and the hidden state one more reading the pre-activations and the new cell state. The gates are in
ONNX's order: input, output, forget, cell (``i, o, f, g``):

    c = sigmoid(f) * c_prev + sigmoid(i) * tanh(g)          (no c_prev: the first step of a zero state)
    h = sigmoid(o) * tanh(c)

The nodes (``GraphBuilder.lstm_state`` / ``lstm_hidden``) are made by the ONNX importer
(:mod:`.onnx_rnn`); each numpy reference is written apart from the te definition.
"""

from __future__ import annotations

import numpy as np

from .. import expr as te
from ..expr import Expr, Tensor, as_int
from ..ops import Workload, get_workload
from ..ops.common import accumulator, check_positive
from ..ops.registry import workload
from ..ops.schedules import SCHEDULES
from ..schedule import Schedule, create_schedule
from ..target import Target
from .fusion import single_op
from .ir import Graph, Node, Shape
from .rows_cpu import parallel_rows, vectorize_row


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _gate(gates: np.ndarray, k: int, hidden: int) -> np.ndarray:
    return gates[:, k * hidden : (k + 1) * hidden]


def _state_ref(gates: np.ndarray, *previous: np.ndarray, hidden: int) -> np.ndarray:
    g: np.ndarray = gates.astype(accumulator(gates.dtype.name))
    new = _sigmoid(_gate(g, 0, hidden)) * np.tanh(_gate(g, 3, hidden))
    return new + _sigmoid(_gate(g, 2, hidden)) * previous[0] if previous else new


def _state_flops(batch: int, hidden: int, *_: object) -> int:
    return 8 * batch * hidden


@workload("lstm_state", reference=_state_ref, flops=_state_flops)
def lstm_state(batch: int, hidden: int, previous: bool = True, dtype: str = "float32") -> list[Tensor]:
    """c(batch, hidden) = sigmoid(f) * c_prev + sigmoid(i) * tanh(g) of the pre-activations
    gates(batch, 4 * hidden) (i, o, f, g) and c_prev(batch, hidden) (without ``previous``: no
    c_prev, a zero state)."""
    check_positive("lstm_state", batch=batch, hidden=hidden)
    gates = te.placeholder((batch, 4 * hidden), dtype, name="gates")
    prev = te.placeholder((batch, hidden), dtype, name="c_prev") if previous else None

    def body(b: Expr, j: Expr) -> Expr:
        new = te.sigmoid(gates[b, j]) * te.tanh(gates[b, j + 3 * hidden])
        return new if prev is None else new + te.sigmoid(gates[b, j + 2 * hidden]) * prev[b, j]

    c = te.compute((batch, hidden), body, name="lstm_state")
    return [gates, c] if prev is None else [gates, prev, c]


def _hidden_ref(gates: np.ndarray, state: np.ndarray, *, hidden: int) -> np.ndarray:
    g: np.ndarray = gates.astype(accumulator(gates.dtype.name))
    return _sigmoid(_gate(g, 1, hidden)) * np.tanh(state.astype(g.dtype))


def _hidden_flops(batch: int, hidden: int, *_: object) -> int:
    return 6 * batch * hidden


@workload("lstm_hidden", reference=_hidden_ref, flops=_hidden_flops)
def lstm_hidden(batch: int, hidden: int, dtype: str = "float32") -> list[Tensor]:
    """h(batch, hidden) = sigmoid(o) * tanh(c) of the pre-activations gates(batch, 4 * hidden)
    (i, o, f, g) and the new cell state c(batch, hidden)."""
    check_positive("lstm_hidden", batch=batch, hidden=hidden)
    gates = te.placeholder((batch, 4 * hidden), dtype, name="gates")
    c = te.placeholder((batch, hidden), dtype, name="c")
    h = te.compute((batch, hidden), lambda b, j: te.sigmoid(gates[b, j + hidden]) * te.tanh(c[b, j]),
                   name="lstm_hidden")
    return [gates, c, h]


def lstm_cell_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """``lstm_state`` and ``lstm_hidden``: each row of hidden units one vector loop (the sigmoid
    and tanh vectorized), rows in parallel for large batches."""
    tgt = Target.parse(target)
    out = tensors[-1]
    s = create_schedule(out)
    rows, hidden = (as_int(d) for d in out.shape)
    b, j = s[out].op.axis
    vectorize_row(s[out], j, hidden, tgt.vector_lanes(out.dtype))
    parallel_rows(s[out], b, tgt, rows * hidden, rows)
    return s


SCHEDULES.update(lstm_state=lstm_cell_cpu, lstm_hidden=lstm_cell_cpu)


@single_op("lstm_state")
def _state_workload(graph: Graph, node: Node, shape: Shape) -> Workload:
    batch, hidden = graph.shapes[node.output]
    return get_workload("lstm_state", (batch, hidden, len(node.inputs) == 2, graph.dtype))


@single_op("lstm_hidden")
def _hidden_workload(graph: Graph, node: Node, shape: Shape) -> Workload:
    batch, hidden = graph.shapes[node.output]
    return get_workload("lstm_hidden", (batch, hidden, graph.dtype))
