"""The CPU convolution kernels of the seeds' networks (issue 30): 2-D convolutions over flat pixels
(1x1, depthwise, grouped, small ones: autosched.graph.conv_flat) and their template, N-d and
transposed convolutions with packed kernels (autosched.graph.conv_packed), and which weights a CPU
network packs. Random shapes (odd sizes, tails) are checked against the numpy references on one
and two threads; random programs of the template too."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime (pip install onnxruntime)")

import graph_models as gm  # noqa: E402  (needs onnx)
from schedule_cases import check_against_reference  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.graph.conv_flat import FLAT_REDUCTION, POINTWISE_PACKED, FlatGeometry, runs_flat  # noqa: E402
from autosched.graph.conv_packed import pack_weight, unpack_weight  # noqa: E402
from autosched.graph.layout import for_target  # noqa: E402
from autosched.graph.repack import BLOCKED_ATTR  # noqa: E402
from autosched.ops import get_workload  # noqa: E402
from autosched.ops.schedules import default_schedule  # noqa: E402
from autosched.records import load_records  # noqa: E402
from autosched.space.generated import SketchSpace  # noqa: E402
from autosched.space.templates.handwritten import hand_written_config  # noqa: E402
from autosched.space.templates.registry import instantiate, template_space  # noqa: E402

TARGETS = ("c", "c -num-threads=2")
EPILOGUES = ("", "bias", "bias,relu", "bias,add,relu", "bias,clip:0.0:6.0", "scale,sigmoid")


def _random_conv2d(rng: random.Random) -> tuple[object, ...]:
    """Arguments of a ``fused_conv2d``: plain, depthwise, grouped or 1x1, any stride and padding."""
    kind = rng.choice(["plain", "depthwise", "grouped", "pointwise"])
    groups = 1
    if kind == "depthwise":
        c = k = groups = rng.randint(1, 20)
    elif kind == "grouped":
        groups = rng.choice([2, 3, 4])
        c, k = groups * rng.randint(1, 6), groups * rng.randint(1, 7)
    else:
        c, k = rng.randint(1, 24), rng.randint(1, 40)
    r = s = 1 if kind == "pointwise" else rng.choice([1, 2, 3, 5])
    stride = 1 if kind == "pointwise" else rng.choice([1, 2, 3])
    pad = 0 if kind == "pointwise" else rng.randint(0, r - 1 if r > 1 else 1)
    h, w = rng.randint(max(r, 1), 23), rng.randint(max(s, 1), 37)
    return (rng.choice([1, 2]), c, h, w, k, r, s, stride, pad, groups, rng.choice(EPILOGUES))


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("seed", range(16))
def test_flat_convolutions_of_random_shapes_match_the_reference(seed: int) -> None:
    args = _random_conv2d(random.Random(seed))
    wl = get_workload("fused_conv2d", args)
    for target in TARGETS:
        schedule, name = default_schedule(wl, target)
        assert name == "autosched.graph.fused.fused_conv2d_cpu"
        check_against_reference(wl, schedule, target, seed=seed)


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(
    "args",
    [
        (1, 16, 28, 28, 24, 1, 1, 1, 0, 1, "bias,clip:0.0:6.0"),  # MobileNet-V2's expansion, 1x1
        (1, 24, 15, 13, 24, 3, 3, 2, 1, 24, "bias,relu"),  # depthwise, stride 2, odd sizes
        (1, 12, 11, 9, 18, 3, 3, 1, 1, 3, "bias,add,relu"),  # grouped
        (1, 3, 17, 19, 8, 3, 3, 2, 1, 1, "bias"),  # a first layer: 27 values per output
    ],
    ids=["pointwise", "depthwise-stride2", "grouped", "first-layer"],
)
def test_random_programs_of_the_flat_template_match_the_reference(args: tuple[object, ...]) -> None:
    wl = get_workload("fused_conv2d", args)
    rng = random.Random(str(args))
    for target in TARGETS:
        tgt = asc.Target.parse(target)
        space = template_space(wl, tgt)
        hand = hand_written_config(wl, tgt)
        assert hand is not None  # the hand-written schedule is a point of the template
        assert instantiate(wl, tgt, hand).steps == default_schedule(wl, tgt)[0].steps
        for _ in range(3):
            check_against_reference(wl, instantiate(wl, tgt, space.get(rng.randrange(len(space)))), target)


@pytest.mark.parametrize(
    ("h", "w", "r", "s", "stride", "pad"), [(7, 7, 3, 3, 1, 1), (112, 112, 3, 3, 2, 1), (9, 13, 5, 3, 3, 2)]
)
def test_flat_phase_planes_hold_every_position_a_tap_reads(
    h: int, w: int, r: int, s: int, stride: int, pad: int
) -> None:
    g = FlatGeometry.of(h, w, r, s, stride, pad)
    assert g.pitch * stride >= w + 2 * pad and g.out_w <= g.pitch
    last = g.out_h * g.pitch - 1 + (r - 1) // stride * g.pitch + (s - 1) // stride
    assert last < g.rows * g.pitch  # the garbage columns past a row's end read inside the plane


def test_which_convolutions_run_flat() -> None:
    inputs, outputs = POINTWISE_PACKED
    assert not runs_flat(inputs, 1, 1, 1, 0, outputs)  # a 1x1 of stride 1 with many channels: packed
    assert runs_flat(inputs - 1, 1, 1, 1, 0, 1024) and runs_flat(1024, 1, 1, 1, 0, outputs - 1)  # flat
    assert runs_flat(3, 3, 3, 2, 1, 64)  # 27 values per output
    assert not runs_flat(64, 1, 1, 2, 0, 8) and not runs_flat(8, 3, 3, 1, 1, 8)  # 64, 72 >= FLAT_REDUCTION
    assert FLAT_REDUCTION == 64


@pytest.mark.parametrize("transposed", [False, True])
def test_packed_weights_round_trip(transposed: bool) -> None:
    weight = np.arange(2 * 32 * 3 * 2 * 2, dtype=np.float32).reshape((32, 2, 3, 2, 2) if not transposed
                                                                      else (2, 32, 3, 2, 2))
    packed = pack_weight(weight, 16, transposed)
    assert packed.shape == (2, 2, 3, 2, 2, 16)
    want = weight[1, 17, 2, 1, 0] if transposed else weight[17, 1, 2, 1, 0]
    assert packed[1, 1, 2, 1, 0, 1] == want  # output channel 17 = block 1, lane 1; input channel 1
    np.testing.assert_array_equal(unpack_weight(packed, transposed), weight)
    with pytest.raises(ValueError, match=r"block \(16\) must divide the output channels \(8\)"):
        pack_weight(weight[:8] if not transposed else weight[:, :8], 16, transposed)


PACKED_ND = [
    ("fused_conv", ("1x4x5x9x11", "2x4x3x3x3x8", "1,2,2", "1,1,1,1,1,1", "1,1,1", 1, "bias,add,relu")),
    ("fused_conv", ("2x3x13", "3x3x5x4", "2", "2,1", "2", 1, "bias")),  # 1-D, dilated
    ("fused_conv", ("1x5x6x7", "1x5x2x3x16", "1,2", "0,1,1,0", "1,1", 1, "relu")),  # asymmetric pads
    ("fused_conv_transpose", ("1x6x3x5", "2x6x4x4x8", "2,2", "1,1,1,1", "0,0", "1,1", 1, "bias,relu")),
    ("fused_conv_transpose", ("1x4x2x2", "1x4x3x4x16", "3,2", "0,1,1,0", "1,0", "1,1", 1, "tanh")),
    ("fused_conv_transpose", ("1x5x1x1", "2x5x4x4x8", "1,1", "0,0,0,0", "0,0", "1,1", 1, "bias")),  # spread
    ("fused_conv_transpose", ("1x3x4x3", "1x3x3x3x8", "2,2", "1,1,1,1", "0,0", "2,1", 1, "")),  # dilated
]


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(("name", "args"), PACKED_ND, ids=[f"{n}-{i}" for i, (n, _) in enumerate(PACKED_ND)])
def test_packed_nd_and_transposed_convolutions_match_the_reference(
    name: str, args: tuple[object, ...]
) -> None:
    wl = get_workload(name, args)
    assert "conv_blk" in default_schedule(wl, "c")[0].stages  # vectorized along output channels
    for target in TARGETS:
        schedule, _ = default_schedule(wl, target)
        check_against_reference(wl, schedule, target, seed=4)


@pytest.mark.requires("gcc")
@pytest.mark.parametrize(("name", "args"), [PACKED_ND[0], PACKED_ND[3]], ids=["3d", "transposed"])
def test_sketch_programs_of_packed_convolutions_match_the_reference(
    name: str, args: tuple[object, ...]
) -> None:
    wl = get_workload(name, args)
    space = SketchSpace(wl, "c -num-threads=2")
    rng = random.Random(name)
    for _ in range(6):
        check_against_reference(wl, space.schedule(space.sample(rng)), "c -num-threads=2")


def test_a_packed_kernel_needs_one_group() -> None:
    with pytest.raises(ValueError, match="a packed kernel '1x4x3x3x8' needs groups 1, got 2"):
        get_workload("fused_conv", ("1x8x6x6", "1x4x3x3x8", "1,1", "0,0,0,0", "1,1", 2, "")).tensors()


def _mixed_model() -> onnx.ModelProto:
    """1x1, depthwise, a small first layer, a 3x3 of many channels, a transposed convolution."""
    m = gm.ModelWriter(5)
    y = m.conv("x", 3, 16, 3, stride=2, pad=1)  # 27 values per output: flat
    y = m.conv(y, 16, 32, 1)  # 1x1: flat
    y = m.conv(y, 32, 32, 3, stride=2, pad=1, groups=32)  # depthwise
    y = m.conv(y, 32, 32, 3, pad=1)  # 288 values: packed
    w = m.const((32, 16, 4, 4), scale=0.1)
    y = m.node("ConvTranspose", [y, w, m.const((16,))], strides=[2, 2], pads=[1, 1, 1, 1])  # packed
    return m.model({"x": (1, 3, 18, 14)}, y, (1, 16, 10, 8), "mixed")


@pytest.mark.requires("gcc")
def test_a_network_of_every_kind_matches_onnxruntime_and_packs_what_it_should() -> None:
    model = _mixed_model()
    graph = asc.from_onnx(model)
    packed = for_target(graph, "c -vector-bytes=64")
    blocks = [(n.op, dict(n.attrs).get("kernel_block")) for n in packed.nodes if "conv" in n.op]
    # flat: the first layer; packed, reading and writing blocked activations: the 1x1, the
    # depthwise and the 3x3 of 32 channels (three layers, two layout changes); packed: the transposed
    assert blocks == [("conv2d", None)] + [("conv2d", 16)] * 3 + [("conv_transpose", 16)]
    assert [n.op for n in packed.nodes if BLOCKED_ATTR in dict(n.attrs)] == ["conv2d"] * 3
    x = np.random.default_rng(1).standard_normal((1, 3, 18, 14)).astype(np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    for target in TARGETS:
        got = asc.build_network(graph, target=target)(x)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))


@pytest.mark.requires("gcc")
def test_tune_network_searches_flat_convolutions_in_their_template(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    b = asc.GraphBuilder("pointwise_depthwise")
    y = b.conv2d(b.input("x", (1, 8, 9, 9)), b.constant(rng.standard_normal((16, 8, 1, 1))))  # 1x1
    y = b.relu(b.conv2d(y, b.constant(rng.standard_normal((16, 1, 3, 3))), pad=1, groups=16))
    b.output(y)
    graph = b.build()
    log = tmp_path / "net.jsonl"
    asc.tune_network(graph, trials=8, log=log, round_trials=2, remeasure=0, checkpoints=0)
    spaces = {r.program.get("space") for r in load_records(log) if isinstance(r.program, dict)}
    assert "template" in spaces and r"fused_conv2d(" in log.read_text()
    xv = rng.standard_normal((1, 8, 9, 9)).astype(np.float32)
    np.testing.assert_allclose(asc.build_network(graph, log)(xv), asc.build_network(graph)(xv), rtol=1e-4,
                               atol=1e-4)
