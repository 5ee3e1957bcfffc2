"""A network of the newer operators, with an int64 input of token ids, exported as one C library:
built with make and gcc (strict C99), its ``main.c`` check run against the outputs of numpy
written here; a float-only network keeps ``model_run``'s float signature."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.export.network import export_network, write_network
from autosched.graph.inputs import sample_inputs


def _make_run(out: Path, *extra: str) -> str:
    done = subprocess.run(["make", "-s", "-C", str(out), "run", *extra], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _network(rng: np.random.Generator) -> tuple[asc.Graph, dict[str, np.ndarray]]:
    w = {"table": rng.standard_normal((20, 6)), "wt": rng.standard_normal((6, 3, 2)) * 0.5,
         "scale": rng.uniform(0.5, 1.5, 3), "bias": rng.standard_normal(3)}
    w = {k: v.astype(np.float32) for k, v in w.items()}
    g = asc.GraphBuilder("tokens")
    ids = g.input("ids", (2, 5), "int64")
    x = g.transpose(g.gather(g.constant(w["table"], "table"), ids), (0, 2, 1))  # (2, 6, 5): channels first
    y = g.conv_transpose(x, g.constant(w["wt"], "wt"), strides=(2,), pads=(1, 0), output_padding=(1,),
                         dilations=(1,))  # (2, 3, 10)
    y = g.unary(y, "leaky_relu", alpha=0.1)
    y = g.instance_norm(y, g.constant(w["scale"], "scale"), g.constant(w["bias"], "bias"))
    y = g.pool(y, "avg", (3,), (2,), (1, 1), ceil_mode=True)  # (2, 3, 6)
    y = g.resize(g.slice(y, (0, 0, 1), (2, 3, 6), (1, 1, 2)), (2, 3, 5), mode="linear")
    g.output(g.reduce(y, "max", (1,), keepdims=False))
    return g.build(), w


def _numpy(ids: np.ndarray, w: dict[str, np.ndarray]) -> np.ndarray:
    x = w["table"][ids].astype(np.float64).transpose(0, 2, 1)
    y = np.zeros((2, 3, 11))
    for c in range(6):  # input i of channel c adds w[c, k, :] at 2 * i
        for i in range(5):
            y[:, :, 2 * i : 2 * i + 2] += x[:, c, i, None, None] * w["wt"][c]
    y = y[:, :, 1:]  # pad 1 at the front: 2 * 4 + 1 + 1 + 1 - 1 = 10 outputs (output padding 1)
    y = np.where(y < 0, 0.1 * y, y)
    y = (y - y.mean(2, keepdims=True)) / np.sqrt(y.var(2, keepdims=True) + 1e-5)
    y = y * w["scale"][:, None] + w["bias"][:, None]
    padded = np.pad(y, ((0, 0), (0, 0), (1, 2)))  # ceil mode: the last window reaches one further
    inside = np.pad(np.ones(10), (1, 2))
    pooled = np.stack([padded[:, :, 2 * o : 2 * o + 3].sum(2) / inside[2 * o : 2 * o + 3].sum()
                       for o in range(6)], 2)
    s = pooled[:, :, 1:6:2]  # (2, 3, 3) -> linear to 5, half_pixel
    src = np.clip((np.arange(5) + 0.5) * 3 / 5 - 0.5, 0, 2)
    lo = np.floor(src).astype(int)
    hi = np.minimum(lo + 1, 2)
    r = s[:, :, lo] * (1 - (src - lo)) + s[:, :, hi] * (src - lo)
    return r.max(axis=1)


@pytest.mark.requires("gcc", "make")
def test_a_network_with_token_ids_exports_and_its_main_c_check_passes(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    graph, w = _network(rng)
    (ids,) = sample_inputs(graph, seed=1)
    assert ids.dtype == np.int64 and ids.min() >= 0 and ids.max() < 20
    ids[0, 0] = -1  # the last row, as ONNX counts
    want = _numpy(ids, w)
    np.testing.assert_allclose(asc.build_network(graph)(ids), want, rtol=1e-4, atol=1e-5)
    export = export_network(graph, portable=True)
    assert export.input_dtypes == ("int64",)
    header = export.files["model.h"]
    assert "typedef void model_input_t;" in header and "0: ids, int64_t[10]" in header
    out = write_network(export, tmp_path / "tokens", [ids], [want])
    assert (out / "input0.bin").stat().st_size == 8 * 10
    assert "ok: outputs match the reference" in _make_run(out, "CFLAGS=-O2 -pedantic-errors")
    (out / "reference0.bin").write_bytes((want + 0.01).astype(np.float32).tobytes())  # the check can fail
    done = subprocess.run(["./model"], cwd=out, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and "WRONG" in done.stdout


def test_a_float_only_network_keeps_model_run_taking_floats() -> None:
    g = asc.GraphBuilder("floats")
    g.output(g.global_pool(g.input("x", (1, 2, 3, 4, 5)), "max"))
    header = export_network(g.build()).files["model.h"]
    assert "typedef float model_input_t;" in header
    signature = "int model_run(const model_input_t* const* inputs, float* const* outputs, void* workspace);"
    assert signature in header
