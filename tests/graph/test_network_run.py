"""``autosched run MODEL.onnx``, as a user runs it (a real process): the network built, checked
against onnxruntime (max |error| / max |reference|, exit status 1 above ``--rtol``) and timed
beside it on the same threads; integer token-id inputs fed as the model declares them."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")

import graph_models as gm  # noqa: E402  (needs onnx)
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from autosched.cli import main  # noqa: E402
from autosched.graph.side_by_side import max_relative_error  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "autosched", "run", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("run") / "net.onnx"
    onnx.save(gm.conv_bn_relu_pool_dense(), path)
    return path


def _token_model() -> onnx.ModelProto:
    """Token ids (int64) -> embedding table (Gather) -> MatMul by a constant."""
    rng = np.random.default_rng(5)
    table = numpy_helper.from_array(rng.standard_normal((20, 8)).astype(np.float32), "table")
    proj = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "proj")
    nodes = [helper.make_node("Gather", ["table", "ids"], ["e"], axis=0),
             helper.make_node("MatMul", ["e", "proj"], ["y"])]
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 4])
    graph = helper.make_graph(nodes, "tokens", [ids], [y], [table, proj])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.requires("gcc")
def test_run_checks_a_model_against_onnxruntime_and_times_both(model: Path) -> None:
    done = _run(model.parent, model.name, "--threads", "1", "--rounds", "2", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["ok"] is True and summary["against"] == "onnxruntime" and summary["threads"] == 1
    error = summary["error"]
    assert math.isfinite(error["relative"]) and error["relative"] < 1e-4
    assert error["max_abs_error"] <= 1e-4 * error["max_abs_reference"] and error["max_abs_reference"] > 0
    assert summary["autosched_ms"] > 0 and summary["onnxruntime_ms"] > 0
    assert summary["ratio"] == pytest.approx(summary["autosched_ms"] / summary["onnxruntime_ms"])
    assert summary["tasks"] == 5 and summary["tuned"] == 0 and "-num-threads=1" in summary["target"]


@pytest.mark.requires("gcc")
def test_the_text_output_is_a_table_of_both_timings_and_the_error(model: Path) -> None:
    done = _run(model.parent, model.name, "--threads", "1", "--rounds", "1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "check against onnxruntime: max |error|" in lines[1] and lines[1].endswith(": ok")
    assert lines[2].split() == ["ms/run", "ratio"]
    ours, theirs = lines[3].split(), lines[4].split()
    assert ours[0] == "autosched" and float(ours[1]) > 0 and ours[2].endswith("x")
    assert theirs == ["onnxruntime", theirs[1], "1.00x"] and float(theirs[1]) > 0
    assert "1 thread each; onnxruntime: inter-op 1, spinning off" in lines[5]


@pytest.mark.requires("gcc")
def test_outputs_beyond_the_tolerance_fail_with_exit_status_1(model: Path) -> None:
    # float results of two runtimes differ in their last bits (summation order): rtol 0 refuses them
    done = _run(model.parent, model.name, "--threads", "1", "--rtol", "0", "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    assert summary["ok"] is False and 0 < summary["error"]["relative"] < 1e-4
    assert "autosched_ms" not in summary  # a wrong network is not timed
    assert done.stderr.strip() == "autosched: the outputs differ from onnxruntime's by more than --rtol 0"


@pytest.mark.requires("gcc")
def test_token_id_inputs_are_fed_to_both_and_against_none_times_ours_alone(tmp_path: Path) -> None:
    onnx.save(_token_model(), tmp_path / "tokens.onnx")
    done = _run(tmp_path, "tokens.onnx", "--threads", "1", "--rounds", "1", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["error"]["relative"] < 1e-6
    alone = _run(tmp_path, "tokens.onnx", "--threads", "1", "--rounds", "1", "--against", "none")
    assert alone.returncode == 0, alone.stderr
    assert "check: none (--against none)" in alone.stdout and "onnxruntime " not in alone.stdout
    assert alone.stdout.splitlines()[3].split()[::2] == ["autosched", "-"]


def test_bad_uses_are_one_line_errors(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(model), "3", "4"]) == 2
    assert "a model takes no workload arguments" in capsys.readouterr().err
    assert main(["run", "matmul", "8", "8", "8", "--against", "onnxruntime"]) == 2
    assert "--against and --rtol are for a model" in capsys.readouterr().err
    assert main(["run", str(model), "--target", "c -mtriple=aarch64-linux-gnu"]) == 2
    assert "must be this machine's C target (e.g. 'c') or a GPU target" in capsys.readouterr().err


def test_the_relative_error_is_taken_at_the_worst_output_and_nan_is_never_within_tolerance() -> None:
    small, large = np.full(3, 1e-9), np.full(2, 5.0)
    err = max_relative_error([small * 1.01, large + 1e-6], [small, large])
    assert err.output == 0 and err.relative == pytest.approx(0.01)  # 1e-11 absolute, yet 1% off
    nan = max_relative_error([large, np.array([1.0, np.nan])], [large, np.array([1.0, 2.0])])
    assert nan.output == 1 and math.isnan(nan.relative) and not nan.relative <= 1.0
    assert max_relative_error([np.full(2, 1e-30)], [np.zeros(2)]).relative == math.inf
