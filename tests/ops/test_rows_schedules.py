"""The hand-written defaults of the memory-bound graph workloads (autosched.graph.rows_cpu):
elementwise chains, softmax and layer norm are vector loops (their exp, erf and tanh too), parallel
over rows only where the tensor is large, and match their references on shapes off the vector
width, with one and two threads."""

from __future__ import annotations

import numpy as np
import pytest

import autosched as asc
from autosched.ops import get_workload
from autosched.ops.schedules import default_schedule

WORKLOADS = [
    ("fused_elementwise", (3, 5, 7, "bias,gelu")),  # channels in the middle: vectors along the inner axis
    ("fused_elementwise", (2, 650, 1, "sigmoid,mul")),  # channels last: vectors along them
    ("fused_elementwise", (7, 100, 333, "scale,add,tanh")),
    ("fused_elementwise", (300, 1, 1000, "exp,log")),
    ("softmax", (3, 5)),
    ("softmax", (37, 37)),
    ("softmax", (200, 300)),
    ("layer_norm", (3, 5, 1e-5)),
    ("layer_norm", (257, 333, 1e-5)),
]
IDS = [f"{n}{a}" for n, a in WORKLOADS]


def _source(name: str, args: tuple, target: str) -> str:
    wl = get_workload(name, args)
    return asc.Task(wl, target=target).source(default_schedule(wl, target)[0].steps)


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(("name", "args"), WORKLOADS, ids=IDS)
def test_default_schedule_matches_the_reference_with_one_and_two_threads(name: str, args: tuple) -> None:
    wl = get_workload(name, args)
    for target in ("c -num-threads=1", "c -num-threads=2"):
        sched, how = default_schedule(wl, target)
        assert how.startswith("autosched.graph.rows_cpu.")
        f = asc.build(sched, wl.tensors(), target)
        inputs = [np.abs(a) + 0.5 for a in wl.random_inputs(1)] if "log" in str(args) else wl.random_inputs(1)
        out = np.full(wl.outputs[0].shape, np.nan, np.float32)
        f(*inputs, out)
        (want,) = wl.reference(*inputs)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6 * max(1.0, float(np.abs(want).max())))


def test_rows_are_vector_loops_and_math_stays_vector_code() -> None:
    target = "c -num-threads=2 -vector-bytes=64"
    gelu = _source("fused_elementwise", (128, 3072, 1, "bias,gelu"), target)
    assert "asc_float32x16_erf(" in gelu and "#pragma omp parallel for" in gelu
    softmax = _source("softmax", (1536, 128), target)
    assert "asc_float32x16_exp(" in softmax and "asc_float32x16_max(" in softmax
    assert "#pragma omp parallel for" in softmax
    norm = _source("layer_norm", (128, 768, 1e-12), target)
    assert "asc_float32x16u*)&row_sum_rf" in norm and "#pragma omp parallel for" in norm


def test_a_small_tensor_runs_on_one_thread() -> None:
    source = _source("fused_elementwise", (1, 650, 1, "tanh"), "c -num-threads=2 -vector-bytes=64")
    assert "asc_float32x16_tanh(" in source
    kernel = source.split("int default_function(")[1].split("\n}\n")[0]
    assert "#pragma omp parallel" not in kernel
