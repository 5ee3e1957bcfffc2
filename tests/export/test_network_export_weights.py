"""An exported network's weights and its ``make run`` check: ``--weights auto`` writes weights.bin
above 1 MiB of constants (and says why), a C array below; main.c loads weights.bin; its check is
relative to each output's magnitude, so it catches a 1% error on outputs of 1e-9; the Makefile
compiles one object per file, on every core."""

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
from autosched.export.network import BLOB_BYTES, export_network, write_network  # noqa: E402


def _make_run(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "-s", "-C", str(out), "run", *extra], capture_output=True, text=True,
                          timeout=300, check=False)


def _dense(inputs: int, outputs: int, scale: float) -> onnx.ModelProto:
    """x (1, inputs) -> Gemm with a (outputs, inputs) weight and a bias, both uniform in +-scale."""
    m = gm.ModelWriter(7)
    y = m.node("Gemm", ["x", m.const((outputs, inputs), scale), m.const((outputs,), scale)], transB=1)
    return m.model({"x": (1, inputs)}, y, (1, outputs), "dense")


@pytest.mark.requires("gcc", "make")
def test_weights_above_the_threshold_export_as_a_blob_that_make_run_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _dense(512, 576, 0.05)  # 295,488 floats: 1.13 MiB (576 outputs: whole blocks when packed)
    assert BLOB_BYTES < 4 * (512 * 576 + 576)
    onnx.save(model, tmp_path / "big.onnx")
    out = tmp_path / "big"
    assert main(["export", str(tmp_path / "big.onnx"), "--out", str(out)]) == 0
    said = capsys.readouterr().out.splitlines()[0]
    why = "1.13 MiB of constants, above the 1.00 MiB a C array compiles fast"
    assert said == f"weights: weights.bin (model_set_weights): {why}"
    assert (out / "weights.bin").stat().st_size == 4 * (512 * 576 + 576)
    assert "model_weights[" not in (out / "weights.c").read_text()
    assert "#define MODEL_WEIGHTS_BLOB 295488" in (out / "model.h").read_text()
    x = np.fromfile(out / "input0.bin", dtype=np.float32).reshape(1, 512)
    ref = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    ref.astype(np.float32).tofile(out / "reference0.bin")  # against onnxruntime, not ourselves
    done = _make_run(out)
    assert done.returncode == 0 and "ok: outputs match" in done.stdout, done.stdout + done.stderr
    (out / "weights.bin").write_bytes((out / "weights.bin").read_bytes()[:-4])  # it is really read
    done = subprocess.run(["./model"], cwd=out, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "cannot read 295488 values of 4 bytes from weights.bin" in done.stderr


@pytest.mark.requires("gcc", "make")
def test_small_weights_stay_a_c_array_and_the_objects_compile_in_parallel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    onnx.save(gm.conv_bn_relu_pool_dense(), tmp_path / "small.onnx")
    out = tmp_path / "small"
    assert main(["export", str(tmp_path / "small.onnx"), "--out", str(out)]) == 0
    said = capsys.readouterr().out.splitlines()[0]
    assert said.startswith("weights: a C array in weights.c: 0.00 MiB of constants, at most the 1.00 MiB")
    assert not (out / "weights.bin").exists()
    assert "const float model_weights[" in (out / "weights.c").read_text()
    makefile = (out / "Makefile").read_text()
    assert "MAKEFLAGS += -j$(JOBS)" in makefile and "%.o: %.c model.h" in makefile
    done = _make_run(out, "JOBS=2")
    assert done.returncode == 0 and "ok: outputs match" in done.stdout, done.stdout + done.stderr
    assert sorted(p.name for p in out.glob("*.o")) == sorted(f"{p.stem}.o" for p in out.glob("*.c"))


def test_asked_forms_are_kept_and_a_large_c_array_is_said_to_compile_slowly() -> None:
    graph = asc.from_onnx(_dense(512, 600, 0.05))
    as_c = export_network(graph, weights="c")
    assert as_c.weights == "c" and as_c.blob is None and "compiles slowly: --weights blob" in as_c.weights_why
    small = export_network(asc.from_onnx(gm.conv_bn_relu_pool_dense()), weights="blob")
    assert small.weights == "blob" and small.blob is not None and small.weights_why.startswith("as asked")
    with pytest.raises(ValueError, match="weights must be 'auto', 'c'"):
        export_network(graph, weights="bin")


@pytest.mark.requires("gcc", "make")
def test_the_check_is_relative_so_it_catches_a_one_percent_error_on_tiny_outputs(tmp_path: Path) -> None:
    model = _dense(16, 8, 1e-9)
    x = np.random.default_rng(2).standard_normal((1, 16)).astype(np.float32)
    ref = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    assert 1e-10 < np.abs(ref).max() < 1e-7  # a tolerance of 1e-4 in absolute terms would pass anything
    out = write_network(export_network(asc.from_onnx(model), portable=True), tmp_path / "tiny", [x], [ref])
    done = _make_run(out, "CFLAGS=-O2 -pedantic-errors")
    assert done.returncode == 0 and "ok: outputs match" in done.stdout, done.stdout + done.stderr
    assert f"max |reference| {float(np.abs(ref).max()):.3g}" in done.stdout
    (ref * 1.01).astype(np.float32).tofile(out / "reference0.bin")
    wrong = subprocess.run(["./model"], cwd=out, capture_output=True, text=True, timeout=60, check=False)
    assert wrong.returncode == 1 and "WRONG: an output differs from its reference" in wrong.stdout
    assert "(relative 0.0099, tolerance 0.0001)" in wrong.stdout, wrong.stdout  # 0.01 / 1.01
    np.zeros_like(ref).tofile(out / "reference0.bin")  # all zeros: only zeros pass
    zeros = subprocess.run(["./model"], cwd=out, capture_output=True, text=True, timeout=60, check=False)
    assert zeros.returncode == 1 and "max |reference| 0 (relative inf" in zeros.stdout
