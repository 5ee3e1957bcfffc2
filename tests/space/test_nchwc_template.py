"""Convolutions on blocked activations (autosched.graph.conv_nchwc, .depthwise_nchwc) and their
knob templates.

Sampled configs on shapes the tiles do not divide are built with gcc, checked against the numpy
reference (which computes in NCHW and blocks the result) and replayed from JSON on a fresh DAG;
the hand-written schedule is one of the configs; the blocked layout round-trips.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from schedule_cases import check_against_reference, check_template_samples

import autosched as asc
from autosched.graph.conv_nchwc import block_nchw, nchwc_default, unblock_nchw
from autosched.graph.depthwise_nchwc import pack_depthwise, unpack_depthwise
from autosched.ops.schedules import default_schedule
from autosched.space.templates import instantiate, template_space
from autosched.space.templates.handwritten import hand_written_config

TARGET = "c -num-threads=2"
AVX2 = "c -num-threads=2 -vector-bytes=32 -l2=512K"
AVX512 = "c -num-threads=2 -vector-bytes=64 -l2=1M"
#: (N, C, H, W, K, R, S, stride, pad, block, epilogue): widths 11 and 7 that 4-8 columns leave
#: partial, 4 output blocks (1, 2 or 4 per tile), a strided 1x1 with a residual add
SHAPES = {
    "3x3": (1, 16, 9, 11, 32, 3, 3, 1, 1, 8, "bias,relu"),
    "1x1-stride2": (2, 24, 13, 14, 16, 1, 1, 2, 0, 8, "bias,add,relu"),
}
#: (N, C, H, W, R, S, stride, pad, block, epilogue) of depthwise ones: a partial last tile, stride 2
DEPTHWISE = {
    "3x3": (1, 24, 11, 11, 3, 3, 1, 1, 8, "bias,add,relu"),
    "5x5-stride2": (1, 16, 13, 9, 5, 5, 2, 2, 8, ""),
}
CONFIGS = max(12, int(os.environ.get("AUTOSCHED_RANDOM_PROGRAMS", "150")) // 10)


def _wl(case: str) -> asc.Workload:
    return asc.get_workload("fused_conv2d_nchwc", SHAPES[case])


def test_blocking_round_trips_and_puts_each_channel_in_its_block() -> None:
    x = np.arange(2 * 16 * 3 * 5, dtype=np.float32).reshape(2, 16, 3, 5)
    blocked = block_nchw(x, 8)
    assert blocked.shape == (2, 2, 3, 5, 8)
    assert blocked[1, 1, 2, 4, 3] == x[1, 11, 2, 4]
    assert np.array_equal(unblock_nchw(blocked), x)


def test_the_reference_is_the_nchw_convolution_blocked() -> None:
    args = (1, 16, 7, 6, 8, 3, 3, 2, 1, 8, "bias,add,relu")
    wl, packed = asc.get_workload("fused_conv2d_nchwc", args), asc.get_workload("fused_conv2d_packed", args)
    rng = np.random.default_rng(0)
    x, bias = rng.standard_normal((1, 16, 7, 6)), rng.standard_normal(8)
    kernel = rng.standard_normal((1, 16, 3, 3, 8))
    residual = rng.standard_normal((1, 8, 4, 3))
    (nchw,) = packed.reference(x, kernel, bias, residual)
    (blocked,) = wl.reference(block_nchw(x, 8), kernel, bias, block_nchw(residual, 8))
    assert np.allclose(blocked, block_nchw(nchw, 8))


def test_a_block_must_divide_both_channel_counts() -> None:
    with pytest.raises(ValueError, match="must divide C"):
        asc.get_workload("fused_conv2d_nchwc", (1, 12, 8, 8, 16, 3, 3, 1, 1, 8, "")).tensors()


def test_knobs_of_the_space() -> None:
    space = template_space(_wl("3x3"), TARGET)
    assert space.knobs == {"blocks": 3, "cols": 3, "channels_inner": 2, "rows_outer": 2, "parallel": 2}
    assert "parallel" not in template_space(_wl("3x3"), "c -num-threads=1").knobs


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("case", sorted(SHAPES))
def test_sampled_configs_are_correct_and_replayable(case: str) -> None:
    check_template_samples(lambda: _wl(case), TARGET, CONFIGS)


@pytest.mark.parametrize(
    ("args", "target"),
    [
        ((1, 64, 56, 56, 64, 3, 3, 1, 1, 8, "bias,relu"), TARGET),
        ((1, 256, 14, 14, 1024, 1, 1, 1, 0, 8, "bias,add,relu"), AVX2),
        ((1, 256, 14, 14, 1024, 1, 1, 1, 0, 16, "bias"), AVX512),
        ((1, 64, 14, 14, 64, 1, 1, 1, 0, 8, ""), "c -num-threads=1"),  # no epilogue: a local accumulator
    ],
    ids=["3x3", "1x1-avx2", "1x1-avx512", "no-epilogue"],
)
def test_the_hand_written_schedule_is_a_config(args: tuple, target: str) -> None:
    wl = asc.get_workload("fused_conv2d_nchwc", args)
    cfg = hand_written_config(wl, target)
    assert cfg is not None
    assert instantiate(wl, target, cfg).steps == default_schedule(wl, target)[0].steps


def test_a_pointwise_tile_takes_a_blocks_channels_innermost_and_a_window_outside_them() -> None:
    def tile(args: tuple) -> tuple[int, int, bool]:
        out = asc.get_workload("fused_conv2d_nchwc", args).outputs[0]
        acc = next(op.output(0) for op in asc.expr.topo_order([out]) if op.name == "conv_blk")
        t = nchwc_default(out, acc, asc.Target.parse(AVX2))
        return t.blocks, t.cols, t.channels_inner

    assert tile((1, 256, 14, 14, 1024, 1, 1, 1, 0, 8, "bias")) == (2, 6, True)
    assert tile((1, 256, 14, 14, 256, 3, 3, 1, 1, 8, "bias")) == (1, 7, False)


@pytest.mark.requires("gcc")
def test_the_default_schedule_without_an_epilogue_is_correct() -> None:
    wl = asc.get_workload("fused_conv2d_nchwc", (1, 16, 10, 10, 24, 1, 1, 1, 0, 8, ""))
    check_against_reference(wl, default_schedule(wl, TARGET)[0], TARGET)


def test_a_depthwise_kernel_packs_and_the_reference_is_the_nchw_one_blocked() -> None:
    rng = np.random.default_rng(1)
    kernel = rng.standard_normal((16, 1, 3, 3))
    assert np.array_equal(unpack_depthwise(pack_depthwise(kernel, 8)), kernel)
    assert pack_depthwise(kernel, 8)[1, 2, 0, 5] == kernel[13, 0, 2, 0]
    args = (1, 16, 7, 6, 3, 3, 2, 1, 8, "bias,relu")
    wl = asc.get_workload("fused_depthwise_nchwc", args)
    nchw = asc.get_workload("fused_conv2d", (1, 16, 7, 6, 16, 3, 3, 2, 1, 16, "bias,relu"))
    x, bias = rng.standard_normal((1, 16, 7, 6)), rng.standard_normal(16)
    (expected,) = nchw.reference(x, kernel, bias)
    (blocked,) = wl.reference(block_nchw(x, 8), pack_depthwise(kernel, 8), bias)
    assert np.allclose(blocked, block_nchw(expected, 8))


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("case", sorted(DEPTHWISE))
def test_sampled_depthwise_configs_are_correct_and_replayable(case: str) -> None:
    space = template_space(asc.get_workload("fused_depthwise_nchwc", DEPTHWISE[case]), TARGET)
    assert set(space.knobs) == {"cols", "inline_pad"} and space.knobs["inline_pad"] == 2
    check_template_samples(lambda: asc.get_workload("fused_depthwise_nchwc", DEPTHWISE[case]), TARGET, 6)


@pytest.mark.parametrize("case", sorted(DEPTHWISE))
def test_the_hand_written_depthwise_schedule_is_a_config(case: str) -> None:
    wl = asc.get_workload("fused_depthwise_nchwc", DEPTHWISE[case])
    cfg = hand_written_config(wl, TARGET)
    assert cfg is not None and cfg.to_dict()["inline_pad"] == 1
    assert instantiate(wl, TARGET, cfg).steps == default_schedule(wl, TARGET)[0].steps
