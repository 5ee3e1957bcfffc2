"""The workloads of the newer graph operators as tuning sees them: their default schedules and
random programs of their sketch spaces (what ``tune_network`` measures) build with gcc and match
the workloads' numpy references, on shapes that divide no tile size; one short network tuning run."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from repro import reproducible, stable_seed

import autosched as asc
from autosched.ops import get_workload
from autosched.ops.schedules import default_schedule
from autosched.space.generated import SketchSpace

pytestmark = pytest.mark.requires("gcc")

TARGET = "c -num-threads=2"
SAMPLES = 6

WORKLOADS = [
    ("fused_conv", ("2x4x11", "6x2x3", "2", "1,2", "2", 2, "bias,clip:0.0:6.0")),
    ("fused_conv", ("1x3x5x7x6", "5x3x3x2x3", "1,2,1", "1,0,1,0,1,2", "1,1,2", 1, "bias,relu")),
    ("fused_conv", ("1x4x9x7", "4x1x3x3", "2,1", "1,0,2,1", "1,1", 4, "leaky_relu:0.2")),
    ("fused_conv_transpose", ("1x4x5x6", "4x3x4x4", "2,2", "1,1,1,1", "0,0", "1,1", 1, "bias,tanh")),
    ("fused_conv_transpose", ("1x4x5x3", "4x1x3x2", "3,2", "0,2,1,0", "1,1", "2,1", 2, "")),
    ("fused_conv_transpose", ("1x4x5x6", "4x3x3x3", "2,3", "1,0,0,2", "1,2", "1,1", 2, "elu:0.5")),
    ("pool", ("1x3x9x10", "max", "3,3", "2,2", "0,1,0,1", "1,1", True, False)),
    ("pool", ("1x3x9x10", "avg", "3,2", "2,1", "1,0,1,1", "1,1", True, False)),
    ("pool", ("1x2x5x6x7", "avg", "2,2,3", "2,2,2", "0,0,1,0,0,1", "1,1,1", False, True)),
    ("reduce", ("5x7x3", "1", "mean")),
    ("reduce", ("13x7", "0", "max")),
    ("slice", ("4x9x10", "1,0,3", "4,9,10", "2,3,1")),
    ("gather", (2, 7, 5, 6)),
    ("instance_norm", (2, 3, 17, 1e-5)),
    ("resize", ("1x2x5x6", "1x2x9x13", "nearest", "half_pixel", "round_prefer_floor")),
    ("resize", ("1x2x5x6", "1x2x7x3", "linear", "align_corners", "round_prefer_floor")),
    ("fused_elementwise", (2, 3, 5, "hard_swish,elu:1.0,hard_sigmoid:0.2:0.5,softplus,maximum")),
]
IDS = [f"{n}{a}" for n, a in WORKLOADS]


def check(wl: asc.Workload, sched: asc.Schedule, target: str, seed: int, **context: object) -> None:
    """``sched`` built for ``target`` computes the reference on inputs drawn with ``seed``."""
    with reproducible(sched.steps, seed, workload=wl, **context):
        f = asc.build(sched, wl.tensors(), target)
        inputs = wl.random_inputs(seed)
        outs = [np.full(t.shape, np.nan, t.dtype) for t in wl.outputs]
        f(*inputs, *outs)
        for got, want in zip(outs, wl.reference(*inputs), strict=True):
            scale = max(1.0, float(np.abs(want).max()))
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale)


@pytest.mark.parametrize(("name", "args"), WORKLOADS, ids=IDS)
def test_default_schedule_matches_the_reference_with_one_and_two_threads(name: str, args: tuple) -> None:
    wl = get_workload(name, args)
    for target in ("c", TARGET):
        sched, how = default_schedule(wl, target)
        assert how != "default schedule"  # a hand-written one
        check(wl, sched, target, 0, default=how)


@pytest.mark.parametrize(("name", "args"), WORKLOADS, ids=IDS)
def test_random_sketch_programs_match_the_reference(name: str, args: tuple) -> None:
    wl = get_workload(name, args)
    space = SketchSpace(wl, TARGET)
    seed = stable_seed(name, args)
    rng = random.Random(seed)
    for i in range(SAMPLES):
        check(wl, space.schedule(space.sample(rng)), TARGET, i, sample=i)


def test_a_network_of_the_new_operators_tunes_and_builds_from_its_log(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    g = asc.GraphBuilder("video")
    x, ids = g.input("x", (1, 3, 4, 9, 9)), g.input("ids", (2,), "int64")
    w = g.constant(rng.standard_normal((4, 3, 3, 3, 3)).astype(np.float32) * 0.2, "w")
    y = g.conv(x, w, strides=(1, 2, 2), pads=(1,) * 6, dilations=(1, 1, 1))
    y = g.pool(g.unary(y, "clip", alpha=0.0, beta=6.0), "max", (2, 3, 3), (2, 2, 2), (0,) * 6, ceil_mode=True)
    y = g.reshape(g.global_pool(y, "avg"), (1, 4))
    table = g.constant(rng.standard_normal((5, 4)).astype(np.float32), "table")
    g.output(g.add(g.broadcast(y, (2, 4)), g.gather(table, ids)))
    graph = g.build()
    log = tmp_path / "video.jsonl"
    result = asc.tune_network(graph, trials=8, log=log, round_trials=2, tuner="random")
    assert all(t["best_ms"] is not None for t in result.tasks)
    net = asc.build_network(graph, log=log)
    assert all(b.tuned for b in net.built)
    inputs = (rng.standard_normal((1, 3, 4, 9, 9)).astype(np.float32), np.array([4, -1]))
    np.testing.assert_allclose(net(*inputs), asc.build_network(graph)(*inputs), rtol=1e-5, atol=1e-6)
