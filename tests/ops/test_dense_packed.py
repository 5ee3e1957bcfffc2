"""Dense layers with their constant weight packed by output blocks (autosched.graph.dense_packed):
the packing round-trips; the default schedule and random sketch programs match the reference on
shapes that divide no tile (M = 1, fewer rows than a tile, N and K off the block and the unroll);
a graph's dense nodes read packed weights on C targets only, each weight packed once; the network
computes what numpy does."""

from __future__ import annotations

import random

import numpy as np
import pytest
from repro import reproducible, stable_seed

import autosched as asc
from autosched.graph import extract_tasks
from autosched.graph.dense_packed import (
    DENSE_BLOCK_ATTR,
    dense_block,
    pack_dense_weight,
    pack_dense_weights,
    unpack_dense_weight,
)
from autosched.graph.layout import for_target
from autosched.ops import get_workload
from autosched.ops.schedules import default_schedule
from autosched.space.generated import SketchSpace

TARGET = "c -num-threads=2"
WORKLOADS = [
    (1, 37, 19, 16, "add"),  # a matrix-vector product (an LSTM step)
    (3, 70, 33, 16, "bias,gelu"),  # fewer rows than a tile
    (13, 64, 8, 64, "bias,add"),  # a partial row tile
    (7, 130, 65, 64, ""),  # N and K off the block and the unroll
    (5, 20, 9, 8, "scale,relu"),
]


def test_packing_round_trips_and_pads_the_last_block_with_zeros() -> None:
    w = np.arange(5 * 3, dtype=np.float32).reshape(5, 3)
    packed = pack_dense_weight(w, 4)
    assert packed.shape == (2, 3, 4)
    assert packed[0, 1, 2] == w[2, 1] and packed[1, 2, 0] == w[4, 2]
    assert not packed[1, :, 1:].any()
    np.testing.assert_array_equal(unpack_dense_weight(packed, 5), w)


def test_the_block_is_the_register_tile_or_the_outputs_rounded_up() -> None:
    assert dense_block("c -vector-bytes=64", 1000) == 64
    assert dense_block("c -vector-bytes=32", 1000) == 16
    assert dense_block("c -vector-bytes=64", 10) == 16
    assert dense_block("c -vector-bytes=64", 5) == 8


def _check(wl: asc.Workload, sched: asc.Schedule, target: str, seed: int, **context: object) -> None:
    with reproducible(sched.steps, seed, workload=wl, **context):
        f = asc.build(sched, wl.tensors(), target)
        inputs = wl.random_inputs(seed)
        out = np.full(wl.outputs[0].shape, np.nan, np.float32)
        f(*inputs, out)
        (want,) = wl.reference(*inputs)
        scale = max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * scale)


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("args", WORKLOADS, ids=[str(a) for a in WORKLOADS])
def test_default_schedule_matches_the_reference_with_one_and_two_threads(args: tuple) -> None:
    wl = get_workload("fused_dense_packed", args)
    for target in ("c -num-threads=1", TARGET):
        sched, how = default_schedule(wl, target)
        assert how.endswith("fused_dense_packed_cpu")
        _check(wl, sched, target, 0, default=how)


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("args", WORKLOADS[:3], ids=[str(a) for a in WORKLOADS[:3]])
def test_random_sketch_programs_match_the_reference(args: tuple) -> None:
    wl = get_workload("fused_dense_packed", args)
    space = SketchSpace(wl, TARGET)
    rng = random.Random(stable_seed("fused_dense_packed", args))
    for i in range(4):
        _check(wl, space.schedule(space.sample(rng)), TARGET, i, sample=i)


@pytest.mark.requires("gcc")
def test_the_vector_product_streams_whole_blocks_without_guards() -> None:
    # the padded block holds zeros: the product of a partial block needs no bounds check
    wl = get_workload("fused_dense_packed", (1, 2600, 650, 64, "add"))
    source = asc.Task(wl, target=TARGET).source(default_schedule(wl, TARGET)[0].steps)
    kernel = source.split("int default_function(")[1].split("\n}\n")[0]
    product = kernel.split("residual_add0[")[0]  # up to the first store of the result
    assert "if (" not in product and "#pragma omp parallel for" in kernel


def _mlp(dtype: str = "float32") -> tuple[asc.Graph, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    w = {"w1": rng.standard_normal((40, 12)), "b1": rng.standard_normal(40),
         "w2": rng.standard_normal((7, 40))}
    g = asc.GraphBuilder("mlp")
    x = g.input("x", (3, 12))
    w1, w2 = g.constant(w["w1"], "w1"), g.constant(w["w2"], "w2")
    h = g.unary(g.dense(x, w1, g.constant(w["b1"], "b1")), "tanh")
    g.output(g.dense(h, w2), g.dense(g.dense(h, w2), g.constant(np.eye(7), "eye")))
    return g.build(), w


def test_dense_weights_are_packed_once_on_c_targets_only() -> None:
    graph, _ = _mlp()
    packed = for_target(graph, "c -vector-bytes=64")
    dense = [n for n in packed.nodes if n.op == "dense"]
    assert [dict(n.attrs)[DENSE_BLOCK_ATTR] for n in dense] == [64, 8, 8, 8]
    assert dense[1].inputs[1] == dense[2].inputs[1] == "w2.packed"
    assert packed.shapes["w1.packed"] == (1, 12, 64) and "w1" not in packed.constants
    assert pack_dense_weights(packed, "c -vector-bytes=64") is packed
    assert for_target(graph, "opencl") is graph
    assert {t.workload.name for t in extract_tasks(graph, "opencl")} == {"fused_dense"}


def test_a_weight_other_nodes_read_stays_beside_its_packed_copy() -> None:
    g = asc.GraphBuilder("tied")
    table = g.constant(np.ones((6, 4), np.float32), "table")
    rows = g.gather(table, g.input("ids", (3,), "int64"))
    g.output(g.dense(rows, table))
    packed = for_target(g.build(), "c")
    assert {"table", "table.packed"} <= set(packed.constants)


@pytest.mark.requires("gcc")
def test_a_network_of_packed_dense_layers_computes_what_numpy_does() -> None:
    graph, w = _mlp()
    x = np.random.default_rng(1).standard_normal((3, 12)).astype(np.float32)
    first, second = asc.build_network(graph, target=TARGET)(x)
    h = np.tanh(x @ w["w1"].T + w["b1"])
    np.testing.assert_allclose(first, h @ w["w2"].T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(second, h @ w["w2"].T, rtol=1e-5, atol=1e-5)
