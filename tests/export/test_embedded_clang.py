"""Embedded exports built by clang for a bare-metal core (``c -cc=clang -mtriple=thumbv7em-none-eabi
-mcpu=cortex-m4``): clang compiles the library with newlib's headers, the GNU Arm toolchain links
the board check, and the kernels and a network match numpy / onnxruntime under qemu-system-arm;
sizes and the stack of the deepest call path are measured from clang's own objects."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")

import graph_models as gm  # noqa: E402  (needs onnx)

import autosched as asc  # noqa: E402
from autosched.backends.c import microcontroller  # noqa: E402
from autosched.export.mcu import export_embedded  # noqa: E402
from autosched.export.network_mcu import export_network_embedded  # noqa: E402
from autosched.ops.schedules import default_schedule  # noqa: E402
from autosched.target import Target, TargetError  # noqa: E402
from autosched.task import Task  # noqa: E402

M4 = "c -cc=clang -mtriple=thumbv7em-none-eabi -mcpu=cortex-m4 -mfloat-abi=hard"
M55 = "c -cc=clang -mtriple=thumbv8.1m.main-none-eabi -mcpu=cortex-m55 -mfloat-abi=hard"
BOARD = pytest.mark.requires("clang", "arm-none-eabi-gcc", "qemu-system-arm", "make")


def _run(out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "-s", "-C", str(out), "run"], capture_output=True, text=True, timeout=300)


@BOARD
@pytest.mark.parametrize(("name", "args"), [("matmul", (7, 9, 5)), ("softmax", (5, 7)),
                                            ("conv2d_nchw", (1, 3, 9, 11, 4, 3, 3, 2, 1, 2))])
def test_kernels_built_by_clang_match_numpy_on_the_board(name: str, args: tuple, tmp_path: Path) -> None:
    task = Task(asc.get_workload(name, args), target=M4)
    export = export_embedded(task, default_schedule(task.workload, task.target)[0].steps, tmp_path)
    run = _run(tmp_path)
    assert run.returncode == 0 and run.stdout.endswith("check: OK\n"), run.stdout + run.stderr
    assert "warning" not in run.stderr  # clang's objects and newlib agree on the ABI (enum sizes)
    assert "CC = clang" in (tmp_path / "Makefile").read_text()
    assert export.sizes is not None and export.sizes.flash > 0
    assert export.stack is not None and export.stack.path == (f"{name}_kernel",) and export.stack.bytes > 0
    assert export.stack.uncounted == (("expf",) if name == "softmax" else ())


@BOARD
@pytest.mark.parametrize("target", [M4, M55], ids=["cortex-m4", "cortex-m55"])
def test_a_network_built_by_clang_matches_onnxruntime_on_the_board(target: str, tmp_path: Path) -> None:
    model = gm.conv_bn_relu_pool_dense()
    x = np.random.default_rng(5).standard_normal((1, 3, 16, 16)).astype(np.float32)
    refs = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    export = export_network_embedded(asc.from_onnx(model), target, tmp_path, [x], refs)
    run = _run(tmp_path)
    assert run.returncode == 0 and run.stdout.endswith("check: OK\n"), run.stdout + run.stderr
    assert export.stack is not None and export.stack.path[0] == "model_run" and len(export.stack.path) == 2
    assert export.sizes is not None and export.sizes.flash > export.weight_bytes


def test_clang_without_the_gnu_arm_c_library_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(microcontroller, "GNU_ARM", "no-such-arm-none-eabi-gcc")
    microcontroller.newlib_include.cache_clear()
    try:
        with pytest.raises(TargetError, match="C library of no-such-arm-none-eabi-gcc, which is missing"):
            Target.parse(M4).cflags(shared=False)
    finally:
        microcontroller.newlib_include.cache_clear()
