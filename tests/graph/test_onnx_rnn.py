"""ONNX LSTM, GRU and RNN unrolled at import, against onnxruntime: forward, reverse and
bidirectional, initial states given (as inputs or constants) or not, every output, GRU's
linear_before_reset both ways, batch-first layout; the forms autosched does not run are one line."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")

from onnx_cases import RTOL, compare, model, node, onnxruntime, rand, relative_error  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.graph import GraphError  # noqa: E402

SEQ, BATCH, INPUT, HIDDEN = 4, 2, 3, 5
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def recurrent(op: str, direction: str = "forward", states: str = "none", outputs: tuple[str, ...] = ("Y",),
              layout: int = 0, **attrs: object) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A one-node ``op`` model; ``states`` none, inputs (graph inputs) or constants."""
    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    x = rand(*((BATCH, SEQ, INPUT) if layout else (SEQ, BATCH, INPUT)), seed=1, low=-2.0, high=2.0)
    inits = {"W": rand(dirs, g * HIDDEN, INPUT, seed=2), "R": rand(dirs, g * HIDDEN, HIDDEN, seed=3),
             "B": rand(dirs, 2 * g * HIDDEN, seed=4)}
    feeds = {"x": x}
    state_shape = (BATCH, dirs, HIDDEN) if layout else (dirs, BATCH, HIDDEN)
    names = ["x", "W", "R", "B", ""]
    for i, s in enumerate(["h0", "c0"] if op == "LSTM" else ["h0"]):
        value = rand(*state_shape, seed=5 + i)
        if states == "inputs":
            feeds[s] = value
        elif states == "constants":
            inits[s] = value
        names.append(s if states != "none" else "")
    while names and not names[-1]:
        names.pop()
    all_outputs = {"Y": "Y", "Y_h": "Y_h", "Y_c": "Y_c"}
    outs = [all_outputs[k] if k in outputs else "" for k in ("Y", "Y_h", "Y_c")[: 3 if op == "LSTM" else 2]]
    while not outs[-1]:
        outs.pop()
    if layout:
        attrs["layout"] = layout
    n = node(op, names, outs, hidden_size=HIDDEN, direction=direction, **attrs)
    return model([n], feeds, [o for o in outs if o], inits), feeds


CASES = {
    "lstm-forward-Y": ("LSTM", "forward", "none", ("Y",), 0, {}),
    "lstm-reverse-states-all-outputs": ("LSTM", "reverse", "inputs", ("Y", "Y_h", "Y_c"), 0, {}),
    "lstm-bidirectional-constant-states": ("LSTM", "bidirectional", "constants", ("Y", "Y_h", "Y_c"), 0, {}),
    "gru-forward-state": ("GRU", "forward", "inputs", ("Y", "Y_h"), 0, {}),
    "gru-reverse-no-state": ("GRU", "reverse", "none", ("Y",), 0, {}),
    "gru-bidirectional-linear-before-reset": ("GRU", "bidirectional", "none", ("Y", "Y_h"), 0,
                                              {"linear_before_reset": 1}),
    "gru-linear-before-reset-state": ("GRU", "forward", "inputs", ("Y_h",), 0, {"linear_before_reset": 1}),
    "rnn-bidirectional-state": ("RNN", "bidirectional", "inputs", ("Y", "Y_h"), 0, {}),
}


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("case", list(CASES))
def test_recurrent_layers_unrolled_match_onnxruntime(case: str) -> None:
    op, direction, states, outputs, layout, attrs = CASES[case]
    proto, feeds = recurrent(op, direction, states, outputs, layout, **attrs)
    compare(proto, feeds)


@pytest.mark.requires("gcc")
def test_batch_first_layout_matches_onnxruntime_on_the_transposed_model() -> None:
    # onnxruntime does not run layout 1: its outputs for layout 0 and the inputs transposed are the reference
    first, feeds = recurrent("LSTM", "bidirectional", "inputs", ("Y", "Y_h", "Y_c"), layout=1)
    second, _ = recurrent("LSTM", "bidirectional", "inputs", ("Y", "Y_h", "Y_c"))
    y, h, c = asc.build_network(asc.from_onnx(first))(feeds["x"], feeds["h0"], feeds["c0"])
    want = onnxruntime(second, {k: v.transpose(1, 0, 2) for k, v in feeds.items()})
    errors = [relative_error(y, want[0].transpose(2, 0, 1, 3))] + [
        relative_error(got, w.transpose(1, 0, 2)) for got, w in ((h, want[1]), (c, want[2]))]
    assert max(errors) <= RTOL


def test_only_the_outputs_read_are_built() -> None:
    proto, _ = recurrent("LSTM", "forward", "none", ("Y_h",))
    graph = asc.from_onnx(proto)
    assert "concat" not in {n.op for n in graph.nodes}  # Y (the states of all steps joined) is not made
    assert graph.shapes[graph.outputs[0]] == (1, BATCH, HIDDEN)
    # one dense for the input projection of the whole sequence, one per later step for the recurrence
    assert [n.op for n in graph.nodes].count("dense") == SEQ


@pytest.mark.parametrize(
    ("op", "attrs", "message"),
    [("LSTM", {"clip": 3.0}, r"^LSTM node 'lstm_Y': attribute 'clip' = 3.0 is not supported"),
     ("GRU", {"activations": ["Relu", "Tanh"]},
      r"^GRU node 'gru_Y': attribute 'activations' = \[Relu, Tanh\] is not supported: only \['sigmoid'"),
     ("LSTM", {"input_forget": 1}, r"^LSTM node 'lstm_Y': attribute 'input_forget' = 1 is not supported"),
     ("RNN", {"activation_alpha": [0.5]},
      r"^RNN node 'rnn_Y': attribute 'activation_alpha' = \[0.5\] is not")],
    ids=["clip", "activations", "input-forget", "activation-alpha"],
)
def test_forms_not_run_are_one_line_naming_the_attribute(
    op: str, attrs: dict[str, object], message: str
) -> None:
    proto, _ = recurrent(op, **attrs)  # type: ignore[arg-type]
    with pytest.raises(GraphError, match=message) as info:
        asc.from_onnx(proto)
    assert "\n" not in str(info.value)


def test_peepholes_and_short_sequences_are_one_line() -> None:
    proto, _ = recurrent("LSTM")
    lstm = proto.graph.node[0]
    lstm.input.extend(["lens", "", "", "P"])
    proto.graph.initializer.extend([onnx.numpy_helper.from_array(np.full(BATCH, SEQ, np.int32), "lens"),
                                    onnx.numpy_helper.from_array(rand(1, 3 * HIDDEN, seed=9), "P")])
    with pytest.raises(GraphError, match=r"^LSTM node 'lstm_Y': peephole weights \(P\) are not supported$"):
        asc.from_onnx(proto)
    proto.graph.initializer[-2].CopyFrom(onnx.numpy_helper.from_array(np.array([SEQ, 2], np.int32), "lens"))
    zeros = np.zeros((1, 3 * HIDDEN), np.float32)  # peepholes of zeros are no peepholes
    proto.graph.initializer[-1].CopyFrom(onnx.numpy_helper.from_array(zeros, "P"))
    with pytest.raises(GraphError, match=r"^LSTM node 'lstm_Y': sequence_lens \[4, 2\] must all be the"):
        asc.from_onnx(proto)
