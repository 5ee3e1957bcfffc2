"""A network exported for a microcontroller (``export MODEL.onnx --embedded``): built with
arm-none-eabi-gcc -Wall -Werror for a Cortex-M4 and a Cortex-M55, run on QEMU's emulated boards
against onnxruntime; no heap, stdio or OpenMP in its C; a model beyond the target's RAM refused."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")

import graph_models as gm  # noqa: E402  (needs onnx)

import autosched as asc  # noqa: E402
from autosched.export.embedded import EmbeddedError  # noqa: E402
from autosched.export.network_mcu import export_network_embedded  # noqa: E402

M4 = "c -cc=arm-none-eabi-gcc -mcpu=cortex-m4 -mfloat-abi=hard"
M55 = "c -cc=arm-none-eabi-gcc -mcpu=cortex-m55 -mfloat-abi=hard"
M33 = "c -cc=arm-none-eabi-gcc -mcpu=cortex-m33 -mfloat-abi=hard"


def _sample(model: onnx.ModelProto, shape: tuple[int, ...], seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return x, ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})


@pytest.mark.requires("arm-none-eabi-gcc", "qemu-system-arm", "make")
@pytest.mark.parametrize("target", [M4, M55, M33], ids=["cortex-m4", "cortex-m55", "cortex-m33"])
@pytest.mark.parametrize(("model", "shape"), [(gm.conv_bn_relu_pool_dense(), (1, 3, 16, 16)),
                                              (gm.residual_block(), (1, 8, 8, 8))], ids=["cbrpd", "residual"])
def test_network_matches_onnxruntime_on_the_board(
    model: onnx.ModelProto, shape: tuple[int, ...], target: str, tmp_path: Path
) -> None:
    x, refs = _sample(model, shape, seed=5)
    export = export_network_embedded(asc.from_onnx(model), target, tmp_path, [x], refs)
    make = ["make", "-s", "-C", str(tmp_path), "run"]
    run = subprocess.run(make, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.endswith("check: OK\n"), run.stdout + run.stderr
    assert "0 of " in run.stdout
    library = [p for p in tmp_path.glob("*.c") if p.name not in ("check.c", "startup.c")]
    assert len(library) == export.tasks + 2  # the kernels, model.c and weights.c
    for p in library:
        assert not re.search(r"malloc|calloc|free\(|stdio|printf|omp parallel|_POSIX", p.read_text()), p.name
    assert "const float model_weights[" in (tmp_path / "weights.c").read_text()  # in flash
    assert export.sizes is not None and export.sizes.flash > export.weight_bytes > 0
    assert export.sizes.ram == 0  # nothing static: the workspace is the caller's
    assert 0 < export.plan.floor <= export.plan.peak <= export.plan.total
    header = (tmp_path / "model.h").read_text()
    assert f"#define MODEL_WORKSPACE_BYTES {export.plan.peak}" in header


def test_a_model_beyond_the_ram_is_refused_in_one_line(tmp_path: Path) -> None:
    model = gm.conv_bn_relu_pool_dense()
    x, refs = _sample(model, (1, 3, 16, 16), seed=1)
    with pytest.raises(EmbeddedError, match=r"needs a workspace of \d+ bytes at its peak, more than the 4096 "
                                            r"bytes of RAM") as caught:
        export_network_embedded(asc.from_onnx(model), M4 + " -ram=4K", tmp_path, [x], refs)
    assert "\n" not in str(caught.value) and not list(tmp_path.iterdir())  # nothing written


@pytest.mark.requires("arm-none-eabi-gcc")
def test_the_stack_is_the_deepest_call_path_and_ram_holds_all_three(tmp_path: Path) -> None:
    """The stack figure follows model_run into its deepest kernel (more than either frame alone);
    a -ram= that holds the workspace but not the workspace, static RAM and stack together is
    refused in one line naming the three."""
    model = gm.conv_bn_relu_pool_dense()
    x, refs = _sample(model, (1, 3, 16, 16), seed=4)
    export = export_network_embedded(asc.from_onnx(model), M4, tmp_path / "free", [x], refs)
    stack = export.stack
    assert stack is not None and stack.bounded and stack.path[0] == "model_run" and len(stack.path) >= 2
    assert f"stack {stack.text()}" in export.summary() and "model_run > " in stack.text()
    assert export.sizes is not None
    ram = export.plan.peak + export.sizes.ram + stack.bytes - 1
    three = rf"\(workspace {export.plan.peak}, static {export.sizes.ram}, stack {stack.bytes}\)"
    with pytest.raises(EmbeddedError, match=rf"needs {ram + 1} bytes of RAM {three}, more than the {ram} "
                                            r"bytes the target gives it") as caught:
        export_network_embedded(asc.from_onnx(model), f"{M4} -ram={ram}", tmp_path / "tight", [x], refs)
    assert "\n" not in str(caught.value)


@pytest.mark.requires("arm-none-eabi-gcc", "qemu-system-arm", "make")
def test_a_keyword_spotting_cnn_fits_a_small_board_at_its_floor(tmp_path: Path) -> None:
    """DS-CNN (49x10 input, ~23k parameters): its workspace is within 10% of the bytes live at once
    at its largest layer, its flash is the weights and a little code, and it matches onnxruntime
    on the emulated Cortex-M4 within 256 KiB of RAM."""
    model = gm.ds_cnn()
    x, refs = _sample(model, (1, 1, 49, 10), seed=2)
    export = export_network_embedded(asc.from_onnx(model), M4 + " -ram=256K", tmp_path, [x], refs)
    largest = 2 * 25 * 5 * 64 * 4  # a 64-channel 25x5 block's input and output, float32
    assert export.plan.floor >= largest and export.plan.peak <= 1.1 * export.plan.floor
    assert export.sizes is not None and export.weight_bytes < export.sizes.flash < 1.1 * export.weight_bytes
    assert f"workspace {export.plan.peak} B at its peak (floor {export.plan.floor} B" in export.summary()
    assert export.summary() in (tmp_path / "model.h").read_text()
    make = ["make", "-s", "-C", str(tmp_path), "run"]
    run = subprocess.run(make, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.endswith("check: OK\n"), run.stdout + run.stderr


@pytest.mark.requires("gcc", "arm-none-eabi-gcc", "qemu-system-arm", "make")
def test_programs_tuned_here_serve_the_network_on_the_board(tmp_path: Path) -> None:
    """Each task takes the fastest program the log holds for its workload on this host, printed for
    the Cortex-M55, and the network still matches onnxruntime."""
    model = gm.conv_bn_relu_pool_dense()
    graph = asc.from_onnx(model)
    asc.tune_network(graph, trials=10, log=tmp_path / "net.jsonl", progress=False)
    x, refs = _sample(model, (1, 3, 16, 16), seed=3)
    export = export_network_embedded(graph, M55, tmp_path / "lib", [x], refs, log=tmp_path / "net.jsonl")
    assert export.tuned >= 1
    make = ["make", "-s", "-C", str(tmp_path / "lib"), "run"]
    run = subprocess.run(make, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.endswith("check: OK\n"), run.stdout + run.stderr


@pytest.mark.requires("gcc", "arm-none-eabi-gcc", "qemu-system-arm", "make")
def test_a_log_tuned_with_wider_vectors_lends_the_core_its_weight_layout(tmp_path: Path) -> None:
    """Tuned for 64-byte vectors (AVX-512), the 16-channel convolutions are packed by 16; exported for
    the M4 (whose own packing is by 8) they are packed by 16 too, so every task takes its tuned
    program, re-targeted, and the network still matches onnxruntime on the board."""
    model = gm.residual_block(channels=16, size=6)
    graph = asc.from_onnx(model)
    log = tmp_path / "wide.jsonl"
    asc.tune_network(graph, trials=4, log=log, target="c -vector-bytes=64", round_trials=2, remeasure=0,
                     checkpoints=0)
    x, refs = _sample(model, (1, 16, 6, 6), seed=2)
    export = export_network_embedded(graph, M4, tmp_path / "out", [x], refs, log=log)
    assert export.tasks == 2 and export.tuned == 2
    kernels = "".join(p.read_text().splitlines()[0] for p in sorted((tmp_path / "out").glob("kernel*.c")))
    assert kernels.count("fused_conv2d_packed(1,16,6,6,16,3,3,1,1,16,") == 2, kernels
    make = ["make", "-s", "-C", str(tmp_path / "out"), "run"]
    run = subprocess.run(make, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.endswith("check: OK\n"), run.stdout + run.stderr
    alone = export_network_embedded(graph, M4, tmp_path / "untuned", [x], refs)  # no log: the core's own
    first = (tmp_path / "untuned" / "kernel0.c").read_text().splitlines()[0]
    assert alone.tuned == 0 and "fused_conv2d_packed(1,16,6,6,16,3,3,1,1,8," in first, first
