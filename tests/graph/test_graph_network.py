"""``asc.build_network``: whole networks built from their tasks' kernels (gcc), compared with
onnxruntime on the same ONNX model, and a hand-built graph compared with numpy; one real
end-to-end ``asc.tune_network`` of a 3-task model, resumed from its log by the CLI."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")

import graph_models as gm  # noqa: E402  (needs onnx)
from schedule_cases import check_against_reference  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.cli import main  # noqa: E402
from autosched.graph import GraphError  # noqa: E402
from autosched.graph.fused import pack_kernel, unpack_kernel  # noqa: E402
from autosched.graph.layout import for_target, pack_conv_weights  # noqa: E402
from autosched.ops import get_workload  # noqa: E402
from autosched.ops.schedules import default_schedule  # noqa: E402
from autosched.records import Record, append_records, is_remeasurement, load_records  # noqa: E402
from autosched.runner.measure import MeasureErrorNo  # noqa: E402
from autosched.task import Task  # noqa: E402


def _onnxruntime(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(
    "make",
    [gm.conv_bn_relu_pool_dense, gm.residual_block, gm.mlp, gm.erf_gelu_mlp,
     lambda: gm.resnet18(32, width=8, classes=10), gm.arithmetic, gm.attention_like, gm.padded_convs],
    ids=["conv-bn-relu-pool-dense", "residual-block", "mlp-gelu-softmax", "opset13-erf-gelu", "resnet18-32",
         "mul-sub-div-broadcast", "layernorm-transpose-softmax-axis", "pad"],
)
def test_build_network_matches_onnxruntime(make: object) -> None:
    model = make()  # type: ignore[operator]
    graph = asc.from_onnx(model)
    net = asc.build_network(graph)
    x = np.random.default_rng(5).standard_normal(graph.shapes["x"]).astype(np.float32)
    out = net(x)
    ref = _onnxruntime(model, x)
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
    assert not any(b.tuned for b in net.built)  # no log: every task runs its default schedule


@pytest.mark.requires("gcc")
def test_a_result_stays_as_returned_across_calls_and_threads() -> None:
    model = gm.resnet18(32, width=8, classes=10)
    net = asc.build_network(asc.from_onnx(model))
    rng = np.random.default_rng(6)
    xs = [rng.standard_normal((1, 3, 32, 32)).astype(np.float32) for _ in range(4)]
    refs = [_onnxruntime(model, x) for x in xs]
    first = net(xs[0])
    second = net(xs[1])  # the first result is not overwritten by the second call
    np.testing.assert_allclose(first, refs[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(second, refs[1], rtol=1e-4, atol=1e-5)
    results: dict[int, list[np.ndarray]] = {}

    def calls(i: int) -> None:  # two threads at once
        results[i] = [net(xs[2 + i]) for _ in range(5)]

    threads = [threading.Thread(target=calls, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for i in range(2):
        assert len(results[i]) == 5
        for out in results[i]:
            np.testing.assert_allclose(out, refs[2 + i], rtol=1e-4, atol=1e-5)


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_intermediates_share_one_workspace_and_an_output_reshaped_from_one_is_copied_out(dtype: str) -> None:
    g = asc.graph.GraphBuilder("views", dtype=dtype)
    x = g.input("x", (1, 3, 4, 4))
    a, b = g.relu(x), g.sigmoid(x)  # a and b live until the concat; the others may reuse them
    joined = g.concat([g.add(a, b), g.add(b, a)], axis=1)  # (1, 6, 4, 4), written in the workspace
    g.output(g.reshape(g.relu(g.add(joined, joined)), (6, 16)))  # an output that is a view
    net = asc.build_network(g.build())
    plan = net._plan  # 6 intermediates (add + relu fuse; the output is a view of the last); some share bytes
    assert len(plan.offsets) == 6 and plan.peak < plan.total, plan
    xs = [np.random.default_rng(i).standard_normal((1, 3, 4, 4)) for i in range(2)]

    def ref(x: np.ndarray) -> np.ndarray:
        s = np.maximum(x, 0) + 1 / (1 + np.exp(-x))
        return np.maximum(2 * np.concatenate([s, s], axis=1), 0).reshape(6, 16)

    first, second = net(xs[0]), net(xs[1])
    assert first.dtype == np.dtype(dtype) and first.shape == (6, 16) and first.flags.owndata
    np.testing.assert_allclose(first, ref(xs[0]), rtol=1e-5)  # not overwritten by the second call
    np.testing.assert_allclose(second, ref(xs[1]), rtol=1e-5)


@pytest.mark.requires("gcc")
def test_each_thread_binds_its_kernels_once_and_steps_show_what_each_group_got() -> None:
    g = asc.graph.GraphBuilder("steps")
    x = g.input("x", (1, 3, 4, 4))
    g.output(g.reshape(g.sigmoid(g.relu(g.add(x, x))), (3, 16)))
    net = asc.build_network(g.build())
    xs = np.random.default_rng(0).standard_normal((2, 1, 3, 4, 4)).astype(np.float32)
    seen = [(step.group, step.run, [a.copy() for a in step.arrays]) for step in net.steps(xs[0])]
    assert [group for group, _, _ in seen] == net.groups
    (kernel_group, run, (a, b, out)), (_, view, _) = seen  # one fused kernel (x + x), then the reshape
    assert kernel_group.workload is not None and run is not None and view is None
    np.testing.assert_array_equal(a.reshape(xs[0].shape), xs[0])
    np.testing.assert_array_equal(b, a)
    np.testing.assert_allclose(out.reshape(3, 16), 1 / (1 + np.exp(-np.maximum(2 * xs[0], 0))).reshape(3, 16),
                               rtol=1e-6)  # fmt: skip
    bound = net._bound()
    assert all(a.ctypes.data % 64 == 0 for step in bound.steps for a in step.arrays)  # as measured
    second = net(xs[1])
    assert net._bound() is bound  # the same arrays and bound kernels, call after call
    np.testing.assert_allclose(second, 1 / (1 + np.exp(-np.maximum(2 * xs[1], 0))).reshape(3, 16), rtol=1e-6)
    with pytest.raises(ValueError, match=r"input 'x' must have shape \(1, 3, 4, 4\)"):
        net(xs)


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(
    ("args", "target"),
    [
        ((1, 8, 10, 10, 16, 3, 3, 1, 1, 1, ""), "c"),
        ((1, 8, 10, 10, 16, 3, 3, 2, 1, 1, "bias,relu"), "c"),  # conv + folded batch-norm + relu
        ((1, 8, 9, 9, 8, 3, 3, 1, 1, 1, "bias,add,relu"), "c -num-threads=2"),  # a residual block's tail
        ((1, 8, 9, 9, 8, 3, 3, 1, 1, 8, "bias,relu"), "c"),  # depthwise
        ((1, 6, 7, 7, 9, 1, 1, 2, 0, 3, "bias,scale,sigmoid"), "c"),  # grouped 1x1/2
    ],
    ids=["plain", "bias-relu-stride2", "bias-add-relu-2-threads", "depthwise", "groups-scale-sigmoid"],
)
def test_the_untuned_default_of_a_fused_conv_is_the_hand_written_schedule(args: tuple[object, ...],
                                                                          target: str) -> None:
    wl = get_workload("fused_conv2d", args)
    schedule, name = default_schedule(wl, target)
    assert name == "autosched.graph.fused.fused_conv2d_cpu"
    assert any(getattr(step, "annotation", "") == "vectorize" for step in schedule.steps)
    check_against_reference(wl, schedule, target, seed=2)


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(
    ("args", "target"),
    [
        ((1, 8, 14, 14, 16, 3, 3, 2, 1, 8, ""), "c"),  # stride 2, 7 columns: one tile per row
        ((1, 5, 9, 23, 24, 3, 3, 1, 1, 8, "bias,add,relu"), "c -num-threads=2"),  # 23 columns: tails
        ((1, 6, 11, 11, 8, 1, 1, 2, 0, 8, "bias"), "c"),  # a projection (1x1/2)
        ((1, 3, 12, 20, 12, 3, 3, 1, 1, 4, "bias,gelu"), "c -num-threads=2"),  # block 4, 20 = 4 x 5 columns
    ],
    ids=["stride2", "odd-width-residual", "projection", "block4-gelu"],
)
def test_the_default_of_a_packed_conv_is_vectorized_along_channels(
    args: tuple[object, ...], target: str
) -> None:
    wl = get_workload("fused_conv2d_packed", args)
    schedule, name = default_schedule(wl, target)
    assert name == "autosched.graph.fused.fused_conv2d_packed_cpu"
    (vectorized,) = [st for st in schedule.steps if getattr(st, "annotation", "") == "vectorize"
                     and "conv_blk" in str(st)]  # the kernel block is the vector, not the row
    assert "fi" in str(vectorized)
    check_against_reference(wl, schedule, target, seed=3)


def test_packed_kernels_round_trip_and_a_block_must_divide_the_channels() -> None:
    kernel = np.arange(16 * 3 * 2 * 2, dtype=np.float32).reshape(16, 3, 2, 2)
    packed = pack_kernel(kernel, 8)
    assert packed.shape == (2, 3, 2, 2, 8) and packed[1, 2, 0, 1, 5] == kernel[13, 2, 0, 1]
    np.testing.assert_array_equal(unpack_kernel(packed), kernel)
    with pytest.raises(ValueError, match=r"block \(8\) must divide the output channels \(12\)"):
        pack_kernel(kernel[:12], 8)
    with pytest.raises(ValueError, match=r"block \(8\) must divide K \(12\)"):
        get_workload("fused_conv2d_packed", (1, 3, 5, 5, 12, 3, 3, 1, 1, 8, "")).tensors()


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(
    ("vector_bytes", "channels", "block"), [(32, 16, 8), (64, 16, 16), (64, 8, 8), (16, 16, 8)]
)
def test_kernels_are_packed_by_a_whole_vector_of_channels_where_it_divides_them(
    vector_bytes: int, channels: int, block: int
) -> None:
    model = gm.residual_block(channels=channels)
    graph = asc.from_onnx(model)
    target = f"c -vector-bytes={vector_bytes}"
    packed = for_target(graph, target)
    convs = [n for n in packed.nodes if n.op == "conv2d"]
    assert len(convs) == 2 and all(n.attr("kernel_block") == block for n in convs)
    assert all(packed.shapes[n.inputs[1]][-1] == block for n in convs)
    x = np.random.default_rng(0).standard_normal(graph.shapes[graph.inputs[0]]).astype(np.float32)
    out = asc.build_network(graph, target=target)(x)
    np.testing.assert_allclose(out, _onnxruntime(model, x), rtol=1e-4, atol=1e-4)


@pytest.mark.requires("gcc")
def test_a_bottleneck_packs_its_wide_1x1_conv_and_keeps_its_narrow_one_flat() -> None:
    model = gm.bottleneck_block()  # 1x1 256 -> 64 (packed, 2 blocks x 6 columns), 3x3, 1x1 64 -> 256 (flat)
    graph = asc.from_onnx(model)
    target = "c -num-threads=2 -vector-bytes=32"  # AVX2's register file, whatever the host
    convs = [n for n in for_target(graph, target).nodes if n.op == "conv2d"]
    assert [dict(n.attrs).get("kernel_block") is not None for n in convs] == [True, True, False]
    x = np.random.default_rng(1).standard_normal(graph.shapes["x"]).astype(np.float32)
    out = asc.build_network(graph, target=target)(x)
    np.testing.assert_allclose(out, _onnxruntime(model, x), rtol=1e-4, atol=1e-4)


def test_a_cpu_network_packs_its_conv_weights_once_and_a_gpu_one_does_not() -> None:
    graph = asc.from_onnx(gm.residual_block())  # two 3x3 convs of 8 channels
    before = {k: v.copy() for k, v in graph.constants.items()}
    packed = pack_conv_weights(graph)
    assert pack_conv_weights(packed) is packed  # idempotent
    on_gpu = for_target(graph, "opencl")  # the weights as they are, each pixel from its window
    assert on_gpu.constants.keys() == graph.constants.keys()
    assert all(on_gpu.constants[k] is v for k, v in graph.constants.items())
    assert for_target(graph, "c") is not graph
    assert [n.op for n in on_gpu.nodes if n.op.startswith("conv")] == ["conv", "conv"]
    assert all(np.array_equal(graph.constants[k], v) for k, v in before.items())  # left as it was
    convs = [n for n in packed.nodes if n.op == "conv2d"]
    assert len(convs) == 2 and all(n.attr("kernel_block") == 8 for n in convs)
    for old, new in zip([n for n in graph.nodes if n.op == "conv2d"], convs, strict=True):
        assert new.inputs[1] == f"{old.inputs[1]}.packed" and old.inputs[1] not in packed.constants
        unpacked = unpack_kernel(packed.constants[new.inputs[1]])
        np.testing.assert_array_equal(unpacked, graph.constants[old.inputs[1]])
        assert packed.shapes[new.inputs[1]] == packed.constants[new.inputs[1]].shape


@pytest.mark.requires("gcc")
def test_a_hand_built_graph_with_two_inputs_and_outputs_matches_numpy() -> None:
    graph, w = gm.hand_graph()
    net = asc.build_network(graph)
    rng = np.random.default_rng(8)
    x, y = rng.standard_normal((1, 4, 6, 6)), rng.standard_normal((1, 6, 2, 2))
    outs = net(x, y)
    refs = gm.hand_numpy(x.astype(np.float32), y.astype(np.float32), w)
    assert isinstance(outs, list) and len(outs) == 2
    for out, ref in zip(outs, refs, strict=True):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)
    with pytest.raises(TypeError, match=r"takes 2 inputs \['x', 'y'\], got 1"):
        net(x)
    with pytest.raises(ValueError, match=r"input 'y' must have shape \(1, 6, 2, 2\), got \(6, 2, 2\)"):
        net(x, y[0])


def test_a_log_made_for_another_model_is_one_clear_line(tmp_path: Path) -> None:
    other = Task("matmul", (8, 8, 8))
    log = tmp_path / "other.jsonl"
    record = Record(("matmul", (8, 8, 8, "float32", False)), other.workload.key, str(other.target),
                    "gcc", (), (1e-6,), MeasureErrorNo.NO_ERROR, "", 0.1, 0.0)
    append_records(log, [record])
    with pytest.raises(GraphError, match=r"other.jsonl has no records of the 2 tasks of 'residual'"):
        asc.build_network(asc.from_onnx(gm.residual_block()), log=log)
    with pytest.raises(GraphError, match="missing.jsonl does not exist"):
        asc.build_network(asc.from_onnx(gm.residual_block()), log=tmp_path / "missing.jsonl")


@pytest.mark.requires("gcc")
def test_tune_network_tunes_three_tasks_into_one_log_and_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = gm.mlp(batch=2, dims=(8, 16, 4))
    graph = asc.from_onnx(model)
    log = tmp_path / "mlp.jsonl"
    result = asc.tune_network(graph, trials=6, log=log, round_trials=2, tuner="random", progress=True)
    assert [t["trials"] for t in result.tasks] == [2, 2, 2]
    assert all(t["best_ms"] is not None for t in result.tasks) and math.isfinite(result.latency_ms)
    # the checkpoints at 2, 3 and 5 trials wait until every task has a program (6 trials, one
    # measurement), then the network is measured at the end: the estimate is the last measurement,
    # the kernels alone add up to weight x best
    points = result.checkpoints
    assert [p.trials for p in points] == [6, 6] and all(p.measured_ms > 0 for p in points)
    assert result.latency_ms == pytest.approx(points[-1].measured_ms)
    assert points[-1].kernels_ms == pytest.approx(sum(t["best_ms"] * t["weight"] for t in result.tasks))
    assert result.to_json()["checkpoints"][-1]["measured_ms"] == points[-1].measured_ms
    progress = capsys.readouterr().err
    assert progress.count("network measured after") == 2
    assert "[6/6] task 2 softmax(2,4,'float32'): 2 trials; estimated latency" in progress
    keys = {r.workload_key for r in load_records(log)}
    # each task's first trial is its untuned default schedule
    firsts = {}
    for r in load_records(log):
        firsts.setdefault(r.workload_key, r)
    assert all((r.program or {}).get("space") == "default" for r in firsts.values()) and len(firsts) == 3
    # at the end each task's fastest programs and its default were measured again, side by side
    assert "measuring the 3 fastest programs of each task and its default schedule again" in progress
    again = [r for r in load_records(log) if is_remeasurement(r)]
    for key, first in firsts.items():
        assert first.program_key in {r.program_key for r in again if r.workload_key == key}
    net = asc.build_network(graph, log=log)
    assert len(keys) == 3 and all(b.task.workload.key in keys and b.tuned for b in net.built)
    x = np.random.default_rng(3).standard_normal((2, 8)).astype(np.float32)
    np.testing.assert_allclose(net(x), _onnxruntime(model, x), rtol=1e-4, atol=1e-6)
    # the same budget again: everything is in the log, nothing is measured
    path = tmp_path / "mlp.onnx"
    onnx.save(model, path)
    lines = len(log.read_text().splitlines())
    assert main(["tune", str(path), "--trials", "6", "--log", str(log), "--json", "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert [t["trials"] for t in summary["tasks"]] == [2, 2, 2] and summary["rounds"] == []
    assert len(log.read_text().splitlines()) == lines
    # a budget smaller than a round per task is shared: one trial each while it lasts, and the
    # latency of a network with an unmeasured task is unknown, not inf
    small = tmp_path / "small.jsonl"
    assert main(["tune", str(path), "--trials", "2", "--log", str(small), "--quiet", "--remeasure", "0"]) == 0
    out = capsys.readouterr().out
    assert out.count(": 1 trials, ") == 2 and ": 0 trials, no valid program" in out, out
    assert "estimated end-to-end latency: unknown (1 task without a program)" in out, out
