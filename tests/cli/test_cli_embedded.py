"""``autosched export LOG --embedded --target TARGET``, as a user runs it: a program tuned on this
host re-targeted for a Cortex-M55 and checked on the emulated board; the default schedule for a
workload the log lacks; bad input refused in one line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import autosched as asc

REPO = Path(__file__).resolve().parents[2]
M55 = "c -cc=arm-none-eabi-gcc -mcpu=cortex-m55 -mfloat-abi=hard"


def _autosched(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autosched", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log of a few programs of one matmul measured on this host."""
    path = tmp_path_factory.mktemp("log") / "mm.jsonl"
    asc.tune(asc.Task("matmul", (24, 20, 18, "float32"), target="c"), trials=4, log=str(path), seed=3)
    return path


@pytest.mark.requires("gcc", "arm-none-eabi-gcc", "qemu-system-arm", "make")
def test_a_log_tuned_here_exports_for_a_microcontroller(log: Path, tmp_path: Path) -> None:
    out = tmp_path / "m55"
    done = _autosched("export", str(log), "--embedded", "--target", M55, "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "for cortex-m55: the program tuned for c -cc=gcc" in done.stdout
    assert "flash " in done.stdout and "workspace 0 B (the caller's)" in done.stdout
    assert "on the emulated mps3-an547" in done.stdout
    run = subprocess.run(["make", "-s", "-C", str(out), "run"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.endswith("check: OK\n"), run.stdout + run.stderr
    # a workload the log does not hold: its default schedule, static workspace
    out = tmp_path / "pool"
    done = _autosched("export", str(log), "--embedded", "--static", "--target", M55, "--out", str(out),
                      "--workload", "avg_pool2d", "1", "2", "9", "10", "3", "2", "1")
    assert done.returncode == 0, done.stderr
    assert "the default schedule" in done.stdout and "(static, in RAM)" in done.stdout
    run = subprocess.run(["make", "-s", "-C", str(out), "run"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.endswith("check: OK\n"), run.stdout + run.stderr


@pytest.mark.requires("gcc")
def test_bad_input_is_one_line(log: Path, tmp_path: Path) -> None:
    cases = [
        ([], "--embedded needs --target"),
        (["--target", "c -cc=gcc"], "--embedded needs a bare-metal target"),
        (["--target", "c -cc=arm-none-eabi-gcc -mcpu=cortex-m3"], "cortex-m3 has no floating-point unit"),
    ]
    for k, (extra, message) in enumerate(cases):
        done = _autosched("export", str(log), "--embedded", *extra, "--out", str(tmp_path / str(k)))
        assert done.returncode != 0 and message in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    done = _autosched("export", str(log), "--static", "--out", str(tmp_path / "s"))
    assert done.returncode != 0 and "add --embedded" in done.stderr


@pytest.mark.requires("gcc", "arm-none-eabi-gcc", "qemu-system-arm", "make")
def test_a_model_exports_for_a_microcontroller_within_its_ram(tmp_path: Path) -> None:
    pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
    gm = pytest.importorskip("graph_models")
    gm.onnx.save(gm.conv_bn_relu_pool_dense(), tmp_path / "net.onnx")
    target = "c -cc=arm-none-eabi-gcc -mcpu=cortex-m4 -ram=64K"
    done = _autosched("export", str(tmp_path / "net.onnx"), "--embedded", "--target", target,
                      "--out", str(tmp_path / "lib"))
    assert done.returncode == 0, done.stderr
    assert "for cortex-m4: 5 kernels (0 from the log)" in done.stdout and "at its peak" in done.stdout
    run = subprocess.run(["make", "-s", "-C", str(tmp_path / "lib"), "run"], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0 and run.stdout.endswith("check: OK\n"), run.stdout + run.stderr
    done = _autosched("export", str(tmp_path / "net.onnx"), "--embedded", "--target",
                      target.replace("64K", "8K"), "--out", str(tmp_path / "small"))
    assert done.returncode != 0 and "more than the 8192 bytes of RAM" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.requires("gcc", "arm-none-eabi-gcc", "qemu-system-arm", "make")
def test_a_model_exports_with_a_static_workspace(tmp_path: Path) -> None:
    """``--static``: model_run keeps its workspace in model.c (static RAM, counted in the RAM bound)
    and takes none; model.c declares each kernel as its file defines it (inputs const)."""
    pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
    gm = pytest.importorskip("graph_models")
    gm.onnx.save(gm.conv_bn_relu_pool_dense(), tmp_path / "net.onnx")
    target = "c -cc=arm-none-eabi-gcc -mcpu=cortex-m4 -ram=64K"
    done = _autosched("export", str(tmp_path / "net.onnx"), "--embedded", "--static", "--target", target,
                      "--out", str(tmp_path / "lib"))
    assert done.returncode == 0, done.stderr
    assert "(static, in model.c) at its peak" in done.stdout
    peak = int(re.search(r"workspace (\d+) B \(static", done.stdout).group(1))  # type: ignore[union-attr]
    assert int(re.search(r"static RAM (\d+) B", done.stdout).group(1)) >= peak  # type: ignore[union-attr]
    lib = tmp_path / "lib"
    header = (lib / "model.h").read_text()
    assert "int model_run(const model_input_t* const* inputs, float* const* outputs);" in header
    model_c = (lib / "model.c").read_text()
    assert "static unsigned char model_static_workspace[MODEL_WORKSPACE_BYTES]" in model_c
    for kernel in lib.glob("kernel*.c"):
        head = re.search(r"^int (model_k\d+)\((.*)\) \{$", kernel.read_text(), re.MULTILINE)
        assert head is not None and "const float*" in head.group(2)
        assert f"int {head.group(1)}({head.group(2).replace('* restrict ', '* ')});" in model_c
    run = subprocess.run(["make", "-s", "-C", str(lib), "run"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.endswith("check: OK\n"), run.stdout + run.stderr
