"""Sizes that cannot fit are refused before any work, in one line that gives the shape and the
bytes: a built-in task (``asc.Task``, ``autosched tune WORKLOAD``), a graph built by hand, and an
ONNX model given to every command that takes one (``tasks``, ``tune``, ``export``, ``report --model``)."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

import autosched as asc
from autosched.graph import GraphBuilder, GraphError
from autosched.memory import format_bytes, memory_bytes
from autosched.records import Record, append_records
from autosched.runner.measure import MeasureInput, MeasureResult
from autosched.search.baseline import default_candidate

REPO = Path(__file__).resolve().parents[2]
G = 10**9
MEMORY = f"more than this machine's memory ({format_bytes(memory_bytes())})"


def autosched(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "autosched", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def assert_refused(run: subprocess.CompletedProcess[str], *words: str) -> None:
    """Exit status 2 and one error line on stderr holding ``words`` (so no traceback)."""
    (line,) = run.stderr.splitlines() or [""]
    assert run.returncode == 2 and line.startswith("autosched: error: "), run.stderr
    assert all(w in line for w in words), line


# ---------------------------------------------------------------------------------------------
# Tasks


def test_a_task_too_big_for_memory_is_refused_at_creation() -> None:
    with pytest.raises(ValueError) as refused:
        asc.Task("matmul", (10**6, 10**6, 10**6), target="c")
    assert str(refused.value) == (
        "workload matmul(1000000,1000000,1000000,'float32',False) would take 10.9 TiB for its tensors "
        f"(C (1000000, 1000000): 3.64 TiB, B (1000000, 1000000): 3.64 TiB, A (1000000, 1000000): 3.64 TiB), "
        f"{MEMORY}; use smaller sizes"
    )
    # the bound is this machine's memory: add(M, N) has three float32 tensors of M * N elements
    rows = memory_bytes() // (3 * 4 * 1024)
    assert asc.Task("add", (rows, 1024), target="c").flops() == rows * 1024  # fits: nothing is allocated
    with pytest.raises(ValueError, match=r"would take [0-9.]+ [GTP]iB for its tensors"):
        asc.Task("add", (rows + 1, 1024), target="c")


@pytest.mark.requires("aarch64-linux-gnu-gcc")
def test_a_gpu_or_cross_target_is_held_to_this_machines_memory() -> None:
    """Inputs are made and outputs checked here, whatever the target runs on."""
    gpu = ("cuda -arch=sm_80 -max-threads-per-block=1024 -shared-memory-bytes=49152 -warp-size=32 "
           "-compute-units=108")
    for target in (gpu, "c -cc=aarch64-linux-gnu-gcc -mcpu=cortex-a72"):
        with pytest.raises(ValueError, match=r"10\.9 TiB for its tensors"):
            asc.Task("matmul", (10**6, 10**6, 10**6), target=target)


def test_the_cli_refuses_a_huge_task_before_tuning(tmp_path: Path) -> None:
    run = autosched("tune", "matmul", "1000000", "1000000", "1000000", "--trials", "5", "--log", "mm.jsonl",
                    cwd=tmp_path)  # fmt: skip
    assert_refused(run, "matmul(1000000,1000000,1000000,'float32',False)", "10.9 TiB", MEMORY)
    assert run.stdout == ""
    assert not (tmp_path / "mm.jsonl").exists()  # no trial was spent, nothing logged


# ---------------------------------------------------------------------------------------------
# Graphs


def test_the_graph_builder_counts_the_inputs_and_constants_that_stay() -> None:
    part = memory_bytes() // 4 * 6 // 10  # float32 elements in 60% of the memory
    b = GraphBuilder("big")
    huge = rf"^input 'x' of shape \(1000000000, 1000000000\) would take 3.47 EiB, {re.escape(MEMORY)}$"
    with pytest.raises(GraphError, match=huge):
        b.input("x", (G, G))
    x = b.input("a", (part,))  # 60%: fits
    flat = b.reshape(x, (part, 1))  # a view of the input: no more memory
    with pytest.raises(GraphError, match=r"^relu output of shape .* would take .* with the graph's inputs"):
        b.relu(flat)  # a copy beside the input: 120%
    with pytest.raises(GraphError, match=r"^input 'b' of shape .* with the graph's inputs and constants"):
        b.input("b", (part,))
    b.output(b.relu(b.input("c", (1024,))))  # small values still go in
    assert b.build().shapes["c"] == (1024,)


def _model(
    path: Path, nodes: list[onnx.NodeProto], inputs: dict[str, list[int]], output: tuple[str, list[int]],
    inits: tuple[onnx.TensorProto, ...] = (),
) -> Path:
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()]
    out = helper.make_tensor_value_info(output[0], TensorProto.FLOAT, output[1])
    graph = helper.make_graph(nodes, path.stem, ins, [out], list(inits))
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _huge_input(where: Path) -> Path:
    """MatMul of an input of 1e9 x 1e9 floats (int64 dims, as ONNX has them)."""
    return _model(where / "huge_input.onnx", [helper.make_node("MatMul", ["x", "x"], ["y"], name="mm")],
                  {"x": [G, G]}, ("y", [G, G]))  # fmt: skip


def _huge_initializer(where: Path) -> Path:
    """An initializer that declares 1e9 x 1e9 floats and holds no data: refused, not allocated."""
    weight = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[G, G])
    return _model(where / "huge_initializer.onnx", [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                  {"x": [4, G]}, ("y", [4, G]), (weight,))  # fmt: skip


def _huge_product(where: Path) -> Path:
    """Two small inputs whose outer product (an inferred shape) is 2.25 times this machine's memory."""
    n = int(math.isqrt(memory_bytes() // 4) * 1.5)
    return _model(where / "huge_product.onnx", [helper.make_node("MatMul", ["x", "y"], ["z"], name="outer")],
                  {"x": [n, 1], "y": [1, n]}, ("z", [n, n]))  # fmt: skip


MODELS = {
    "huge_input": (_huge_input, ["'x'", "(1000000000, 1000000000)", "3.47 EiB"]),
    "huge_initializer": (_huge_initializer, ["'w'", "(1000000000, 1000000000)", "3.47 EiB"]),
    "huge_product": (_huge_product, ["output of shape", "GiB"]),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_command_that_takes_a_model_refuses_one_too_big(name: str, tmp_path: Path) -> None:
    make, words = MODELS[name]
    model = str(make(tmp_path))
    log = tmp_path / "log.jsonl"  # report reads a log, then the model it names
    task = asc.Task("matmul", (8, 8, 8), target="c -num-threads=1")
    steps = default_candidate(task).steps
    append_records(log, [Record.from_measure(MeasureInput(task, steps), MeasureResult((1e-6,)))])
    commands = [
        ["tasks", model],
        ["tune", model, "--trials", "2", "--log", "tuned.jsonl"],
        ["export", model, "--out", "out"],
        ["report", str(log), "--model", model, "--html", "report.html"],
    ]
    for argv in commands:
        run = autosched(*argv, cwd=tmp_path)
        assert_refused(run, *words, MEMORY)
        assert run.stdout == "" or argv[0] == "report"  # report prints the log's table, then reads the model
    assert not any((tmp_path / f).exists() for f in ("tuned.jsonl", "out", "report.html"))


def test_the_python_api_refuses_the_models_too(tmp_path: Path) -> None:
    for make, words in MODELS.values():
        with pytest.raises(GraphError) as refused:
            asc.from_onnx(str(make(tmp_path)))  # what asc.build_network and asc.tune_network are given
        assert all(w in str(refused.value) for w in [*words, MEMORY]), refused.value
