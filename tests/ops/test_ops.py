"""Built-in operators and the workload registry."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from autosched import expr as te
from autosched.expr import ComputeOp, PlaceholderOp, topo_order
from autosched.flops import count_flops
from autosched.ops import Workload, get_workload, list_workloads, workload

BUILTINS = {
    "matmul", "batch_matmul", "dense", "conv2d_nchw", "conv2d_nhwc", "depthwise_conv2d_nchw",
    "max_pool2d", "avg_pool2d", "softmax", "relu", "add",
}

# Small shapes, many of them odd: nothing divides evenly, strides skip the last rows, dilations spread.
CASES = [
    ("matmul", (7, 9, 5)),
    ("matmul", (7, 9, 5, "float32", True)),
    ("matmul", (6, 6, 6, "float32", True)),
    ("matmul", (1, 13, 3, "float64")),
    ("matmul", (4, 3, 11, "int32")),
    ("batch_matmul", (3, 5, 7, 4)),
    ("dense", (5, 7, 9)),
    ("conv2d_nchw", (1, 3, 9, 11, 4, 3, 3, 2, 1, 2)),
    ("conv2d_nchw", (2, 3, 7, 7, 5, 1, 1)),
    ("conv2d_nchw", (1, 2, 8, 9, 3, 3, 2, 1, 1)),
    ("conv2d_nchw", (1, 4, 10, 10, 2, 5, 5, 3, 2)),
    ("conv2d_nhwc", (1, 9, 11, 3, 4, 3, 3, 2, 1, 2)),
    ("conv2d_nhwc", (2, 6, 5, 3, 2, 3, 2, 1, 1)),
    ("depthwise_conv2d_nchw", (2, 3, 9, 11, 3, 3, 2, 1, 2)),
    ("depthwise_conv2d_nchw", (1, 4, 7, 6, 3, 3)),
    ("max_pool2d", (1, 2, 9, 9, 3, 2, 1)),
    ("max_pool2d", (2, 3, 8, 7, 2, 2)),
    ("avg_pool2d", (1, 2, 9, 10, 3, 2, 1)),
    ("avg_pool2d", (1, 1, 5, 5, 3, 1)),
    ("softmax", (5, 7)),
    ("softmax", (1, 13, "float64")),
    ("relu", (5, 7)),
    ("add", (5, 7)),
    ("add", (3, 4, "int8")),
]


@pytest.mark.parametrize(("name", "args"), CASES, ids=[f"{n}{a}" for n, a in CASES])
def test_reference_matches_generic_evaluator(name: str, args: tuple) -> None:
    wl = get_workload(name, args)
    arrays = wl.random_inputs(seed=1)
    ref, gen = wl.reference(*arrays), wl.evaluate(*arrays)
    assert len(ref) == len(gen) == len(wl.outputs)
    for out, r, g in zip(wl.outputs, ref, gen, strict=True):
        assert r.shape == g.shape == out.shape
        assert r.dtype == g.dtype == np.dtype(out.dtype)
        if np.issubdtype(r.dtype, np.integer):
            np.testing.assert_array_equal(r, g)
        else:
            np.testing.assert_allclose(r, g, rtol=1e-5, atol=1e-5)
        assert np.abs(r).max() > 0  # a reference of zeros would compare equal to anything


@pytest.mark.parametrize(("name", "args"), CASES, ids=[f"{n}{a}" for n, a in CASES])
def test_analytic_flops_match_generic_counter(name: str, args: tuple) -> None:
    wl = get_workload(name, args)
    assert wl.flops() == count_flops(wl.outputs) > 0


def test_pinned_flops() -> None:
    assert get_workload("matmul", (256, 256, 256)).flops() == 2 * 256**3
    assert get_workload("conv2d_nchw", (1, 64, 56, 56, 64, 3, 3, 1, 1)).flops() == 231_211_008
    assert get_workload("conv2d_nchw", (1, 3, 224, 224, 64, 7, 7, 2, 3)).flops() == 236_027_904
    assert get_workload("dense", (4, 5, 6)).flops() == 2 * 4 * 5 * 6 + 2 * 4 * 5
    assert get_workload("softmax", (4, 5)).flops() == 100
    assert get_workload("avg_pool2d", (1, 2, 4, 4, 2, 2)).flops() == 2 * 2 * 2 * 5


def test_reference_semantics_on_known_values() -> None:
    ones = np.ones((1, 1, 3, 3), np.float32)
    avg = get_workload("avg_pool2d", (1, 1, 3, 3, 3, 1, 1))
    expect = np.array([[4, 6, 4], [6, 9, 6], [4, 6, 4]], np.float32) / 9  # count_include_pad=True
    for out in (avg.reference(ones)[0], avg.evaluate(ones)[0]):
        np.testing.assert_allclose(out[0, 0], expect, rtol=1e-6)
    neg = -np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)
    mx = get_workload("max_pool2d", (1, 1, 3, 3, 2, 2, 1))  # padding never wins a max
    for out in (mx.reference(neg)[0], mx.evaluate(neg)[0]):
        np.testing.assert_array_equal(out[0, 0], [[-1, -2], [-4, -5]])
    data = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    conv = get_workload("conv2d_nchw", (1, 1, 4, 4, 1, 2, 2, 2, 0, 2))  # taps 2 apart, stride 2
    kernel = np.array([[[[1, 10], [100, 1000]]]], np.float32)
    for out in (conv.reference(data, kernel)[0], conv.evaluate(data, kernel)[0]):
        np.testing.assert_array_equal(out, [[[[0 + 20 + 800 + 10000]]]])


def test_tensor_names_and_stages() -> None:
    for name, args in CASES:
        wl = get_workload(name, args)
        names = [op.name for op in topo_order(wl.outputs)]
        assert len(names) == len(set(names))
        assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n) for n in names), names
    mm = get_workload("matmul", (8, 4, 2, "float32", True))
    assert [t.name for t in mm.tensors()] == ["A", "B", "C"]
    assert mm.inputs[1].shape == (4, 2) and mm.outputs[0].shape == (8, 4)
    assert [iv.name for iv in mm.outputs[0].op.reduce_axis] == ["k"]
    conv = get_workload("conv2d_nchw", (1, 3, 8, 8, 4, 3, 3, 1, 1))
    assert {op.name for op in topo_order(conv.outputs)} == {"data", "pad", "kernel", "conv"}
    assert [iv.name for iv in conv.outputs[0].op.reduce_axis] == ["rc", "ry", "rx"]
    assert conv.outputs[0].shape == (1, 4, 8, 8)
    unpadded = get_workload("conv2d_nchw", (1, 3, 8, 8, 4, 3, 3))
    assert {op.name for op in topo_order(unpadded.outputs)} == {"data", "kernel", "conv"}
    dense = get_workload("dense", (3, 4, 5))
    stages = [op for op in topo_order(dense.outputs) if isinstance(op, ComputeOp)]
    assert [op.name for op in stages] == ["dense", "out"]
    assert [t.name for t in dense.inputs] == ["data", "weight", "bias"]
    soft = get_workload("softmax", (3, 4))
    stages = [op.name for op in topo_order(soft.outputs) if isinstance(op, ComputeOp)]
    assert stages == ["maxelem", "expval", "expsum", "softmax"]
    assert get_workload("depthwise_conv2d_nchw", (1, 4, 7, 6, 3, 3)).inputs[1].shape == (4, 1, 3, 3)
    assert get_workload("conv2d_nhwc", (1, 7, 6, 3, 5, 3, 3)).inputs[1].shape == (3, 3, 3, 5)


def test_keys_are_stable_and_distinct() -> None:
    a = get_workload("matmul", (256, 256, 256))
    b = get_workload("matmul", [256, 256, 256, "float32", False])
    assert a == b and hash(a) == hash(b) and a.key == b.key
    assert re.fullmatch(r"matmul\(256,256,256,'float32',False\)#[0-9a-f]{16}", a.key)
    others = [("matmul", (256, 256, 128)), ("matmul", (256, 256, 256, "float16")),
              ("matmul", (256, 256, 256, "float32", True)), ("batch_matmul", (1, 256, 256, 256))]
    keys = {get_workload(n, args).key for n, args in others} | {a.key}
    assert len(keys) == len(others) + 1
    script = "from autosched.ops import get_workload; print(get_workload('matmul', (256, 256, 256)).key)"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == a.key


def test_json_round_trip_and_keywords() -> None:
    wl = get_workload("conv2d_nchw", (1, 64, 56, 56, 64, 3, 3), pad=1)
    assert wl.args == (1, 64, 56, 56, 64, 3, 3, 1, 1, 1, "float32")
    again = Workload.from_json(json.loads(json.dumps(wl.to_json())))
    assert again == wl and again.key == wl.key
    assert get_workload("matmul", (np.int64(4), 5, 6)).args == (4, 5, 6, "float32", False)
    with pytest.raises(ValueError, match=r"\[name, \[args"):
        Workload.from_json({"name": "matmul"})  # type: ignore[arg-type]


def test_registry_errors_are_clear() -> None:
    with pytest.raises(ValueError, match=r"unknown workload 'matmull'.*known workloads: .*matmul"):
        get_workload("matmull", (1, 2, 3))
    sig = re.escape("matmul(M: int, N: int, K: int, dtype: str = 'float32', transpose_b: bool = False)")
    with pytest.raises(TypeError, match=sig + r".*missing a required argument: 'K'"):
        get_workload("matmul", (256, 256))
    with pytest.raises(TypeError, match=sig + r".*too many"):
        get_workload("matmul", (1, 2, 3, "float32", False, 7))
    with pytest.raises(TypeError, match=sig + r": argument 'N' must be int, got str '256'"):
        get_workload("matmul", (256, "256", 256))
    with pytest.raises(TypeError, match=r"argument 'M' must be int, got float"):
        get_workload("matmul", (2.5, 2, 2))
    with pytest.raises(ValueError, match="already registered"):
        workload("matmul")(lambda M: [])
    with pytest.raises(ValueError, match="window of 5 .* does not fit input 2"):
        get_workload("conv2d_nchw", (1, 1, 2, 2, 1, 5, 5)).tensors()
    with pytest.raises(ValueError, match="pad .* must be smaller than kernel"):
        get_workload("max_pool2d", (1, 1, 4, 4, 2, 1, 2)).tensors()
    with pytest.raises(TypeError, match="unknown dtype"):
        get_workload("relu", (2, 2, "flot32")).tensors()


def test_list_workloads() -> None:
    infos = {info.name: info for info in list_workloads()}
    assert set(infos) >= BUILTINS
    conv = infos["conv2d_nchw"]
    assert conv.signature == ("(N: int, C: int, H: int, W: int, K: int, R: int, S: int, stride: int = 1, "
                              "pad: int = 0, dilation: int = 1, dtype: str = 'float32')")
    assert all(infos[n].doc and "\n" not in infos[n].doc for n in BUILTINS)


def test_random_inputs() -> None:
    wl = get_workload("dense", (3, 4, 5))
    a, b = wl.random_inputs(7), wl.random_inputs(7)
    assert [x.shape for x in a] == [(3, 5), (4, 5), (4,)]
    assert all(x.dtype == np.float32 and x.min() >= -1 and x.max() < 1 for x in a)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0], wl.random_inputs(8)[0])
    (x,) = get_workload("relu", (50, 50, "int8")).random_inputs(0)
    assert x.dtype == np.int8 and -4 <= x.min() < 0 < x.max() <= 4


def test_user_workload_with_two_outputs_and_override() -> None:
    def ref(x: np.ndarray, *, scale: float) -> tuple[np.ndarray, np.ndarray]:
        return x * scale, x.sum(axis=1)

    @workload("test.scale_and_rowsum", num_outputs=2, reference=ref)
    def scale_and_rowsum(n: int, scale: float = 2.0) -> list[te.Tensor]:
        """Scale a matrix and sum its rows."""
        X = te.placeholder((n, n + 1), name="X")
        k = te.reduce_axis(n + 1, "k")
        Y = te.compute((n, n + 1), lambda i, j: X[i, j] * scale, name="Y")
        Z = te.compute((n,), lambda i: te.sum(X[i, k], axis=k), name="Z")
        return [X, Y, Z]

    wl = get_workload("test.scale_and_rowsum", (3,), scale=3)
    assert wl.args == (3, 3.0) and [t.name for t in wl.outputs] == ["Y", "Z"]
    assert isinstance(wl.inputs[0].op, PlaceholderOp)
    (x,) = wl.random_inputs(0)
    for got, want in zip(wl.evaluate(x), wl.reference(x), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert wl.flops() == 3 * 4 + 3 * 4

    @workload("test.scale_and_rowsum", override=True)
    def replaced(n: int) -> list[te.Tensor]:
        X = te.placeholder((n,), name="X")
        return [X, te.compute((n,), lambda i: X[i] + 1.0, name="Y")]

    assert get_workload("test.scale_and_rowsum", (3,)).outputs[0].shape == (3,)
    with pytest.raises(TypeError, match=r"reference parameters \['alpha'\]"):
        workload("test.bad_ref", reference=lambda x, *, alpha: x)(replaced)
