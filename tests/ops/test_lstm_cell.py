"""An LSTM step's gates in two kernels (autosched.graph.lstm_cell): the workloads match their
references (default schedule and random sketch programs), the importer writes each step as a
dense (with the step's input added as its epilogue) and the two cell kernels reading one copy of
the recurrent weights, and larger LSTMs than tests/graph/test_onnx_rnn.py's (hidden units off the
vector width, batch 3, both directions, initial states) match onnxruntime."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
from repro import stable_seed

import autosched as asc
from autosched.graph import GraphError, extract_tasks
from autosched.ops import get_workload
from autosched.ops.schedules import default_schedule
from autosched.space.generated import SketchSpace

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")

WORKLOADS = [("lstm_state", (1, 650, True)), ("lstm_state", (3, 37, False)), ("lstm_hidden", (3, 37)),
             ("lstm_hidden", (40, 650))]
IDS = [f"{n}{a}" for n, a in WORKLOADS]


def _check(wl: asc.Workload, sched: asc.Schedule, target: str) -> None:
    f = asc.build(sched, wl.tensors(), target)
    inputs = [a * 4 for a in wl.random_inputs(2)]  # the sigmoids and tanh beyond their linear part
    out = np.full(wl.outputs[0].shape, np.nan, np.float32)
    f(*inputs, out)
    (want,) = wl.reference(*inputs)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(("name", "args"), WORKLOADS, ids=IDS)
def test_the_cell_kernels_match_their_references(name: str, args: tuple) -> None:
    wl = get_workload(name, args)
    for target in ("c -num-threads=1", "c -num-threads=2"):
        sched, how = default_schedule(wl, target)
        assert how.endswith("lstm_cell_cpu")
        _check(wl, sched, target)
    space = SketchSpace(wl, "c -num-threads=2")
    rng = random.Random(stable_seed(name, args))
    for _ in range(3):
        _check(wl, space.schedule(space.sample(rng)), "c -num-threads=2")


def test_gates_of_the_wrong_shape_are_one_line() -> None:
    g = asc.GraphBuilder("cell")
    gates = g.input("gates", (2, 10))
    with pytest.raises(GraphError, match=r"gates \(2, 10\) must be \(batch, 4 \* hidden\)"):
        g.lstm_state(gates)
    gates = g.input("g8", (2, 8))
    with pytest.raises(GraphError, match=r"state \(2, 3\) does not fit gates \(2, 8\): expected \(2, 2\)"):
        g.lstm_hidden(gates, g.input("c", (2, 3)))


def _lstm(seq: int, batch: int, size: int, hidden: int, direction: str, states: bool
          ) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    from onnx_cases import model, node, rand

    dirs = 2 if direction == "bidirectional" else 1
    inits = {"W": rand(dirs, 4 * hidden, size, seed=2), "R": rand(dirs, 4 * hidden, hidden, seed=3, low=-0.3,
                                                                     high=0.3),
             "B": rand(dirs, 8 * hidden, seed=4)}
    feeds = {"x": rand(seq, batch, size, seed=1, low=-2.0, high=2.0)}
    names = ["x", "W", "R", "B", ""]
    if states:
        feeds["h0"] = rand(dirs, batch, hidden, seed=5)
        feeds["c0"] = rand(dirs, batch, hidden, seed=6)
        names += ["h0", "c0"]
    n = node("LSTM", names, ["Y", "Y_h", "Y_c"], hidden_size=hidden, direction=direction)
    return model([n], feeds, ["Y", "Y_h", "Y_c"], inits), feeds


def test_each_step_is_a_dense_and_two_cell_kernels_reading_one_copy_of_the_weights() -> None:
    seq, hidden = 6, 20
    proto, _ = _lstm(seq, 1, 8, hidden, "forward", False)
    graph = asc.from_onnx(proto)
    ops = Counter(n.op for n in graph.nodes)
    assert ops["lstm_state"] == ops["lstm_hidden"] == seq
    assert ops["dense"] == seq  # the input projection of the whole sequence, then seq - 1 recurrent steps
    assert not {"sigmoid", "mul", "unary"} & set(ops)
    projection, *steps = [n for n in graph.nodes if n.op == "dense"]
    assert {n.inputs[1] for n in steps} == {steps[0].inputs[1]} != {projection.inputs[1]}  # one copy
    tasks = {t.workload.name: t.weight for t in extract_tasks(graph, "c")}
    assert tasks["lstm_hidden"] == seq and tasks["fused_dense_packed"] == seq - 1


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(("direction", "states"), [("forward", False), ("bidirectional", True),
                                                   ("reverse", True)])
def test_lstms_wider_than_a_vector_match_onnxruntime(direction: str, states: bool) -> None:
    pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")
    from onnx_cases import compare

    proto, feeds = _lstm(5, 3, 11, 37, direction, states)
    compare(proto, feeds)
