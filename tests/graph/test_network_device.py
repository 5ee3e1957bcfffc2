"""Networks on a GPU target (``asc.build_network(graph, log, target="opencl")``, PoCL's CPU device
in CI; ``"cuda"`` on a lent GPU): the seeds' networks match onnxruntime with every value kept on the
device; concatenations on any axis; calls from threads; a tuned network from its log with the
whole network measured at checkpoints; ``autosched run`` and ``export`` on a GPU target; every
kernel of a network compiles for CUDA with NVRTC."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")

import graph_models as gm  # noqa: E402  (needs onnx)
from onnx_cases import compare, model, node, onnxruntime, rand, relative_error  # noqa: E402
from onnx_zoo import ZOO  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.backends import backend_for  # noqa: E402
from autosched.backends.cuda.driver import nvrtc_compile  # noqa: E402
from autosched.export.network import export_network  # noqa: E402
from autosched.graph import GraphError  # noqa: E402
from autosched.graph.network import network_tasks  # noqa: E402
from autosched.graph.network_device import DeviceNetwork  # noqa: E402
from autosched.ops.schedules import default_schedule  # noqa: E402
from autosched.records import load_records  # noqa: E402


@pytest.mark.requires("pyopencl")
@pytest.mark.parametrize("name", list(ZOO))
def test_the_seeds_networks_match_onnxruntime_on_opencl(name: str) -> None:
    proto, feeds = ZOO[name]()
    compare(proto, feeds, target="opencl")


@pytest.mark.requires("pyopencl")
@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1])
def test_concatenation_on_any_axis_is_copied_on_the_device(axis: int) -> None:
    x, w = rand(2, 3, 4, 5), rand(2, 3, 4, 5, seed=1)
    nodes = [node("Relu", ["x"], ["r"]), node("Concat", ["r", "x", "w"], ["c"], axis=axis),
             node("Sigmoid", ["c"], ["y"])]
    proto = model(nodes, {"x": x}, ["y"], inits={"w": w})
    net = asc.build_network(asc.from_onnx(proto), target="opencl")
    assert isinstance(net, DeviceNetwork)
    assert relative_error(net(x), onnxruntime(proto, {"x": x})[0]) <= 1e-6


@pytest.mark.requires("pyopencl")
def test_calls_from_threads_and_bad_inputs() -> None:
    proto, feeds = ZOO["bert"]()  # token ids: an integer input read by Gather
    graph = asc.from_onnx(proto)
    net = asc.build_network(graph, target="opencl")
    (ids,) = (feeds[v] for v in graph.inputs)
    want = onnxruntime(proto, feeds)[0]
    results: list[np.ndarray] = []
    threads = [threading.Thread(target=lambda: results.append(net(ids))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(results) == 4 and all(relative_error(r, want) <= 1e-4 for r in results)
    with pytest.raises(ValueError, match="outside"):
        net(np.full_like(ids, 10_000))
    with pytest.raises(ValueError, match="must have shape"):
        net(ids[..., :-1])
    with pytest.raises(TypeError, match="takes 1 inputs"):
        net(ids, ids)


@pytest.mark.requires("pyopencl")
def test_a_network_tuned_on_opencl_runs_from_its_log(tmp_path: Path) -> None:
    proto = gm.conv_bn_relu_pool_dense()
    graph = asc.from_onnx(proto)
    log = tmp_path / "net.jsonl"
    result = asc.tune_network(graph, trials=12, log=log, target="opencl", round_trials=2, remeasure=0,
                              checkpoints=1)
    assert result.checkpoints and result.checkpoints[-1].measured_ms > 0  # the network ran here
    records = load_records(log)
    assert {r.workload_key for r in records} == {t.workload.key for t in network_tasks(graph, "opencl")}
    net = asc.build_network(graph, log, target="opencl")
    assert all(b.tuned for b in net.built)
    x = np.random.default_rng(3).standard_normal(graph.shapes["x"]).astype(np.float32)
    assert relative_error(net(x), onnxruntime(proto, {"x": x})[0]) <= 1e-4


@pytest.mark.requires("pyopencl")
def test_run_and_export_on_a_gpu_target(tmp_path: Path) -> None:
    path = tmp_path / "net.onnx"
    onnx.save(gm.residual_block(), path)
    run = subprocess.run([sys.executable, "-m", "autosched", "run", str(path), "--target", "opencl",
                          "--rounds", "1", "--json"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert summary["ok"] and summary["device"] == "opencl" and summary["error"]["relative"] <= 1e-4
    assert summary["autosched_ms"] > 0 and summary["onnxruntime_ms"] > 0
    with pytest.raises(GraphError, match="exports as C for a CPU target, not for opencl"):
        export_network(asc.from_onnx(path), target="opencl")


@pytest.mark.requires("nvrtc")
@pytest.mark.parametrize("name", ["resnet50", "bert", "lstm_lm"])
def test_every_kernel_of_a_network_compiles_for_cuda(name: str) -> None:
    graph = asc.from_onnx(ZOO[name]()[0])
    tasks = network_tasks(graph, "cuda -arch=sm_80")
    for task in tasks:
        steps = default_schedule(task.workload, task.target)[0].steps
        program = backend_for(task.target).program(task.lowered(steps).func(), task.target)
        assert b".entry" in nvrtc_compile(program.source, "sm_80")


@pytest.mark.requires("pycuda")
@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v2", "bert", "lstm_lm", "dcgan_generator"])
def test_the_seeds_networks_match_onnxruntime_on_cuda(name: str) -> None:
    proto, feeds = ZOO[name]()
    compare(proto, feeds, target="cuda")
