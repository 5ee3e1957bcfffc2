"""Activations blocked by channels between convolutions (autosched.graph.activation_layout).

Which convolutions a CPU graph runs on blocked activations, where the layout changes are, and
that the network computes what onnxruntime computes (real gcc, real onnxruntime).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")

import graph_models as gm  # noqa: E402  (needs onnx)

import autosched as asc  # noqa: E402
from autosched.graph import extract_tasks  # noqa: E402
from autosched.graph.layout import for_target  # noqa: E402
from autosched.graph.repack import BLOCKED_ATTR  # noqa: E402
from autosched.records import load_records  # noqa: E402

TARGET = "c -num-threads=2 -vector-bytes=32"


def _kinds(model: onnx.ModelProto, target: str = TARGET) -> Counter[str]:
    """How often each workload kind runs in ``model`` compiled for ``target``."""
    tasks = extract_tasks(asc.from_onnx(model), target)
    return Counter(t.workload.name for t in tasks for _ in range(t.weight))


def _matches_onnxruntime(model: onnx.ModelProto, target: str = TARGET) -> None:
    graph = asc.from_onnx(model)
    x = np.random.default_rng(3).standard_normal(graph.shapes[graph.inputs[0]]).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, {session.get_inputs()[0].name: x})[0]
    got = asc.build_network(graph, target=target)(x)
    assert np.abs(got - expected).max() <= 1e-5 * np.abs(expected).max()


def test_bottlenecks_run_blocked_from_the_first_convolution_to_the_pool() -> None:
    model = gm.bottleneck_stack()
    kinds = _kinds(model)
    # every convolution blocked, the 1x1 ones too (alone they would run flat: 16 and 32 channels);
    # the input blocked once (read by the first 1x1 layer and as the first residual), the last
    # block's output made NCHW once, for the pool
    assert kinds["fused_conv2d_nchwc"] == 6 and kinds["transpose"] == 2
    assert kinds["fused_conv2d"] == kinds["fused_conv2d_packed"] == 0
    tasks = [str(t.workload) for t in extract_tasks(asc.from_onnx(model), TARGET)]
    assert "fused_conv2d_nchwc(1,16,6,6,32,1,1,1,0,8,'bias,add,relu','float32')" in tasks  # residual fused


def test_inverted_residuals_run_blocked_through_their_depthwise_layers() -> None:
    # 1x1 layers of 16 and 64 channels and depthwise ones, all flat on their own: blocked together
    model = gm.inverted_residuals(blocks=3)
    kinds = _kinds(model)
    assert kinds == {
        "fused_conv2d_nchwc": 6, "fused_depthwise_nchwc": 3, "transpose": 2, "global_avg_pool2d": 1,
    }
    tasks = [str(t.workload) for t in extract_tasks(asc.from_onnx(model), TARGET)]
    # the strided one, with its epilogue
    assert "fused_depthwise_nchwc(1,64,8,8,3,3,2,1,8,'bias,relu','float32')" in tasks
    # a depthwise layer with nothing blocked around it stays flat
    assert _kinds(gm.conv_bn_relu_pool_dense())["fused_conv2d"] == 2


@pytest.mark.requires("gcc")
def test_a_blocked_network_matches_onnxruntime() -> None:
    _matches_onnxruntime(gm.bottleneck_stack())
    _matches_onnxruntime(gm.inverted_residuals(blocks=3))
    _matches_onnxruntime(gm.conv_chain(3))
    _matches_onnxruntime(gm.resnet18(size=32, width=8, classes=10), "c -num-threads=2 -vector-bytes=64")


def test_convolutions_stay_nchw_where_blocking_costs_as_many_layout_changes() -> None:
    # two convolutions between an NCHW input and an NCHW pool: two changes for two blocked layers
    assert _kinds(gm.conv_chain(2)) == {"fused_conv2d_packed": 2, "global_avg_pool2d": 1}
    # three: two changes for three layers
    assert _kinds(gm.conv_chain(3)) == {"fused_conv2d_nchwc": 3, "transpose": 2, "global_avg_pool2d": 1}


def test_a_gpu_graph_a_scalar_core_and_a_flat_pointwise_layer_alone_are_not_blocked() -> None:
    assert "fused_conv2d_nchwc" not in _kinds(gm.conv_chain(3), "opencl")
    # a Cortex-M4 has no float vectors: the weights are packed, the activations stay NCHW
    assert _kinds(gm.conv_chain(3), "c -cc=arm-none-eabi-gcc -mcpu=cortex-m4")["fused_conv2d_packed"] == 3
    # a lone bottleneck block: its last 1x1 layer makes the graph's output, the other two would
    # need two layout changes; its 1x1 layers of 16 and 32 channels stay flat
    lone = gm.bottleneck_block(channels=32, mid=16, size=6)
    assert _kinds(lone) == {"fused_conv2d": 2, "fused_conv2d_packed": 1}


def test_the_rewrite_is_done_once() -> None:
    graph = asc.from_onnx(gm.bottleneck_stack())
    once = for_target(graph, TARGET)
    assert sum(BLOCKED_ATTR in dict(n.attrs) for n in once.nodes) == 6
    twice = for_target(once, TARGET)
    assert twice.nodes == once.nodes and twice.shapes == once.shapes
    # blocked values have blocked shapes; the graph's own are as they were
    assert all(once.shapes[v] == graph.shapes[v] for v in [*graph.inputs, *graph.outputs])
    blocked = [n.output for n in once.nodes if BLOCKED_ATTR in dict(n.attrs)]
    assert all(once.shapes[v][-1] == 8 and len(once.shapes[v]) == 5 for v in blocked)


@pytest.mark.requires("gcc")
def test_tuning_searches_blocked_convolutions_in_their_template(tmp_path: Path) -> None:
    graph = asc.from_onnx(gm.conv_chain(3))
    log = tmp_path / "chain.jsonl"
    asc.tune_network(graph, trials=8, log=log, target=TARGET, round_trials=4, remeasure=0, checkpoints=0)
    records = [r for r in load_records(log) if r.workload_key.startswith("fused_conv2d_nchwc")]
    spaces = {r.program.get("space") for r in records if isinstance(r.program, dict)}
    assert spaces == {"template"}  # its hand-written schedule is a point of the template too
    x = np.random.default_rng(4).standard_normal((1, 16, 8, 8)).astype(np.float32)
    tuned, untuned = asc.build_network(graph, log, TARGET), asc.build_network(graph, target=TARGET)
    assert any(b.tuned for b in tuned.built)
    np.testing.assert_allclose(tuned(x), untuned(x), rtol=1e-4, atol=1e-5)
