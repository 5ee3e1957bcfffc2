"""A whole network exported as one C library: built with make and gcc (and aarch64 under qemu),
checked against onnxruntime or numpy; the static workspace plan; ``autosched export MODEL.onnx``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")

import graph_models as gm  # noqa: E402  (needs onnx)

import autosched as asc  # noqa: E402
from autosched.cli import main  # noqa: E402
from autosched.export.network import export_network, write_network  # noqa: E402
from autosched.graph.fusion import fuse  # noqa: E402
from autosched.graph.layout import for_target  # noqa: E402


def _make_run(out: Path, *extra: str) -> str:
    done = subprocess.run(["make", "-s", "-C", str(out), "run", *extra], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.requires("gcc", "make")
def test_the_cli_exports_a_model_whose_library_matches_onnxruntime(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = gm.conv_bn_relu_pool_dense()
    onnx.save(model, tmp_path / "net.onnx")
    out = tmp_path / "lib"
    assert main(["export", str(tmp_path / "net.onnx"), "--out", str(out)]) == 0
    assert "5 kernels (0 tuned), workspace" in capsys.readouterr().out
    x = np.fromfile(out / "input0.bin", dtype=np.float32).reshape(1, 3, 16, 16)
    ref = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    ref.astype(np.float32).tofile(out / "reference0.bin")  # check against onnxruntime, not ourselves
    assert "ok: outputs match the reference" in _make_run(out)
    sources = [p.read_text() for p in out.glob("*.c") if p.name != "main.c"]
    assert all("malloc" not in s and "free(" not in s for s in sources)  # model_run allocates nothing


@pytest.mark.requires("gcc", "make")
def test_a_strict_c99_export_with_a_weights_blob_of_a_graph_with_concat_reshape_and_two_outputs(
    tmp_path: Path,
) -> None:
    graph, w = gm.hand_graph()
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((1, 4, 6, 6)), rng.standard_normal((1, 6, 2, 2))
    refs = gm.hand_numpy(x.astype(np.float32), y.astype(np.float32), w)
    export = export_network(graph, portable=True, weights="blob")
    out = write_network(export, tmp_path / "hand", [x, y], refs)
    blob = np.fromfile(out / "weights.bin", dtype="<f4")
    # the weights as the kernels read them: the dense one's 5 outputs packed in a block of 8
    assert blob.size == w["k"].size + w["b"].size + 8 * 24
    assert "model_weights[" not in (out / "weights.c").read_text()
    assert "ok: outputs match the reference" in _make_run(out, "CFLAGS=-O2 -pedantic-errors")


@pytest.mark.requires("aarch64-linux-gnu-gcc", "qemu-aarch64", "make")
def test_the_library_cross_builds_and_runs_on_aarch64_under_qemu(tmp_path: Path) -> None:
    model = gm.residual_block()
    graph = asc.from_onnx(model)
    x = np.random.default_rng(6).standard_normal((1, 8, 8, 8)).astype(np.float32)
    ref = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    out = write_network(export_network(graph, portable=True), tmp_path / "arm", [x], [ref])
    run_with = "RUN_WITH=qemu-aarch64 -L /usr/aarch64-linux-gnu"
    assert "ok: outputs match" in _make_run(out, "CC=aarch64-linux-gnu-gcc", "CFLAGS=-O2", run_with)
    head = (out / "model").read_bytes()[:20]
    assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == 183  # EM_AARCH64


def test_the_workspace_reuses_bytes_of_buffers_whose_lifetimes_do_not_overlap() -> None:
    model = asc.from_onnx(gm.resnet18(32, width=8, classes=10))
    plan = export_network(model).plan
    graph = for_target(model, "c")  # the graph as the export runs it: weights packed, activations blocked
    steps = fuse(graph)
    assert plan.peak < plan.total / 2  # ResNet's chain of activations: most buffers die early
    life: dict[str, tuple[int, int]] = {}
    for i, g in enumerate(steps):
        for v in (g.output, *g.inputs):
            root = plan.roots.get(v, v)
            if root in plan.offsets:
                start, _ = life.get(root, (i, i))
                life[root] = (start, i)
    sizes = {v: 4 * int(np.prod(graph.shapes[v])) for v in life}
    names = sorted(life)
    for a in names:
        for b in names:
            overlap_in_time = a < b and life[a][0] <= life[b][1] and life[b][0] <= life[a][1]
            if overlap_in_time:
                lo_a, lo_b = plan.offsets[a], plan.offsets[b]
                assert lo_a + sizes[a] <= lo_b or lo_b + sizes[b] <= lo_a, (a, b)


@pytest.mark.requires("gcc", "make")
def test_an_output_reached_through_a_reshape_is_copied_out(tmp_path: Path) -> None:
    g = asc.GraphBuilder("flat")
    g.output(g.flatten(g.relu(g.input("x", (2, 3, 4, 4)))))
    x = np.random.default_rng(2).standard_normal((2, 3, 4, 4)).astype(np.float32)
    out = write_network(export_network(g.build()), tmp_path / "flat", [x], [np.maximum(x, 0).reshape(2, 48)])
    assert "ok: outputs match the reference" in _make_run(out)
    assert "memcpy(outputs[0]" in (out / "model.c").read_text()


@pytest.mark.requires("gcc", "make")
def test_layer_norm_transpose_and_softmax_on_an_axis_export_and_match_onnxruntime(
    tmp_path: Path,
) -> None:
    model = gm.attention_like()
    graph = asc.from_onnx(model)
    x = np.random.default_rng(6).standard_normal(graph.shapes["x"]).astype(np.float32)
    ref = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    out = write_network(export_network(graph, portable=True), tmp_path / "attention", [x], [ref])
    assert "ok: outputs match the reference" in _make_run(out, "CFLAGS=-O2 -pedantic-errors")
