"""The knob template of packed convolutions (autosched.graph.packed_template) and the ``auto`` space.

Sampled configs on shapes the tiles do not divide are built with gcc and checked against the numpy
reference, and replayed from JSON on a fresh DAG; the hand-written schedule is one of the configs;
``space="auto"`` gives a packed convolution its template and other fused workloads their sketches,
also through ``tune_network`` and the command line (real gcc, real runner).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from schedule_cases import check_against_reference, check_template_samples

import autosched as asc
from autosched.graph.packed_template import col_choices
from autosched.ops.schedules import PackedConvTile, default_schedule, packed_conv_default, rows_outer_pays
from autosched.records import load_records
from autosched.search import SpaceError, make_space, space_kind
from autosched.space.templates import instantiate, template_space
from autosched.space.templates.handwritten import hand_written_config
from autosched.task import Task

TARGET = "c -num-threads=2"
#: targets of 16 and 32 vector registers, whatever the host (schedules only: nothing is compiled)
AVX2 = "c -num-threads=2 -vector-bytes=32 -l2=512K"
AVX512 = "c -num-threads=2 -vector-bytes=64 -l2=1M"
#: (N, C, H, W, K, R, S, stride, pad, block, epilogue): widths 11 and 6 that 4-8 columns leave
#: partial, 4 channel blocks (1, 2 or 4 per tile), a strided 1x1 with a residual add
SHAPES = {
    "3x3": (1, 5, 9, 11, 32, 3, 3, 1, 1, 8, "bias,relu"),
    "1x1-stride2": (1, 6, 11, 12, 16, 1, 1, 2, 0, 8, "bias,add,relu"),
}
#: configs per shape, each built and checked (more with AUTOSCHED_RANDOM_PROGRAMS=N)
CONFIGS = max(12, int(os.environ.get("AUTOSCHED_RANDOM_PROGRAMS", "150")) // 10)


def _wl(case: str) -> asc.Workload:
    return asc.get_workload("fused_conv2d_packed", SHAPES[case])


def test_knobs_of_the_space() -> None:
    space = template_space(_wl("3x3"), TARGET)
    assert space.knobs == {
        "blocks": 3, "cols": 3, "reorder_reduce": 6, "unroll": 3, "rows_outer": 2, "parallel": 2,
    }
    assert "parallel" not in template_space(_wl("3x3"), "c -num-threads=1").knobs
    assert template_space(_wl("1x1-stride2"), TARGET).knobs["blocks"] == 2  # 2 blocks: 1 or 2 per tile
    assert col_choices(56) == [4, 6, 7, 8] and col_choices(7) == [4, 6, 7] and col_choices(3) == [3]


def test_rows_outside_the_channel_tiles_only_where_the_kernel_fits_in_l2() -> None:
    """A 9 MiB kernel is out of cache when its layer starts in a network: reading it once per row
    is not offered."""
    big = asc.get_workload("fused_conv2d_packed", (1, 512, 7, 7, 512, 3, 3, 1, 1, 8, "bias,relu"))
    l2 = "c -num-threads=2 -l2=1048576"
    assert template_space(big, l2).knobs["rows_outer"] == 1
    assert template_space(_wl("3x3"), l2).knobs["rows_outer"] == 2  # 5.6 KiB
    assert hand_written_config(big, l2) is not None


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("case", sorted(SHAPES))
def test_sampled_configs_are_correct_and_replayable(case: str) -> None:
    check_template_samples(lambda: _wl(case), TARGET, CONFIGS)


@pytest.mark.parametrize(
    ("args", "target"),
    [
        ((1, 64, 56, 56, 64, 3, 3, 1, 1, 8, "bias,relu"), "c -num-threads=2"),
        ((1, 256, 14, 14, 512, 1, 1, 2, 0, 8, "bias"), "c -num-threads=2"),
        ((1, 3, 20, 20, 8, 7, 7, 2, 3, 8, "bias,relu"), "c -num-threads=1"),  # 1 block: 1 per tile
        ((1, 256, 14, 14, 1024, 1, 1, 1, 0, 8, "bias,relu"), AVX2),  # 2 blocks x 6 columns
        ((1, 256, 14, 14, 1024, 1, 1, 1, 0, 16, "bias,relu"), AVX512),
        ((1, 512, 28, 28, 1024, 1, 1, 2, 0, 8, "bias"), AVX2),  # rows outer, a 2 MiB kernel
    ],
    ids=["conv64", "1x1-stride2", "one-block", "1x1-avx2", "1x1-avx512", "rows-outer-large-kernel"],
)
def test_the_hand_written_schedule_is_a_config(args: tuple, target: str) -> None:
    wl = asc.get_workload("fused_conv2d_packed", args)
    cfg = hand_written_config(wl, target)
    assert cfg is not None
    assert instantiate(wl, target, cfg).steps == default_schedule(wl, target)[0].steps


def _default_tile(args: tuple, target: str) -> PackedConvTile:
    out = asc.get_workload("fused_conv2d_packed", args).outputs[0]
    acc = next(op.output(0) for op in asc.expr.topo_order([out]) if op.name == "conv_blk")
    return packed_conv_default(out, acc, asc.Target.parse(target))


def test_the_default_tile_keeps_its_accumulators_in_the_registers() -> None:
    pointwise = (1, 256, 14, 14, 1024, 1, 1, 1, 0, 8, "bias")
    window = (1, 256, 14, 14, 256, 3, 3, 1, 1, 8, "bias")
    # 16 registers: 12 accumulators where no window taps are unrolled, else at most 8
    assert (_default_tile(pointwise, AVX2).blocks, _default_tile(pointwise, AVX2).cols) == (2, 6)
    assert (_default_tile(window, AVX2).blocks, _default_tile(window, AVX2).cols) == (1, 7)
    # 32 registers: 2 blocks x up to 8 columns for both
    wide = (1, 256, 14, 14, 1024, 1, 1, 1, 0, 16, "bias")
    assert (_default_tile(wide, AVX512).blocks, _default_tile(wide, AVX512).cols) == (2, 7)
    # an odd number of blocks: one per tile
    assert _default_tile((1, 64, 14, 14, 24, 1, 1, 1, 0, 8, "bias"), AVX2).blocks == 1


def test_the_default_loop_order_re_reads_the_smaller_operand() -> None:
    # a 128 KiB kernel re-read per row (56 x) moves less than a 3 MiB input per channel tile (8 x)
    assert _default_tile((1, 256, 56, 56, 128, 1, 1, 1, 0, 8, "bias"), AVX2).rows_outer
    # a 1 MiB kernel per row (14 x) moves more than a 196 KiB input per channel tile (64 x)
    assert not _default_tile((1, 256, 14, 14, 1024, 1, 1, 1, 0, 8, "bias"), AVX2).rows_outer
    assert rows_outer_pays(kernel_bytes=100, input_bytes=1000, rows=9, channel_tiles=1)
    assert not rows_outer_pays(kernel_bytes=100, input_bytes=1000, rows=10, channel_tiles=1)


@pytest.mark.requires("gcc")
def test_the_default_of_a_pointwise_conv_with_rows_outer_and_partial_tiles_is_correct() -> None:
    args = (1, 128, 20, 20, 16, 1, 1, 1, 0, 8, "bias,add,relu")  # rows outer; 6 columns leave 2
    assert _default_tile(args, AVX2).rows_outer
    wl = asc.get_workload("fused_conv2d_packed", args)
    check_against_reference(wl, default_schedule(wl, TARGET)[0], TARGET)


def test_auto_picks_the_template_where_there_is_one() -> None:
    conv = Task("fused_conv2d_packed", SHAPES["3x3"], target=TARGET)
    dense = Task("fused_dense", (2, 10, 16, "bias"), target=TARGET)
    assert space_kind(conv, "auto") == "template" and make_space(conv, "auto").kind == "template"
    assert space_kind(dense, "auto") == "sketch" and make_space(dense, "auto").kind == "sketch"
    assert space_kind(dense, "sketch") == "sketch"
    with pytest.raises(SpaceError, match="sketch, template, auto"):
        make_space(conv, "knobs")


def _spaces(log: Path) -> dict[str, set[str]]:
    """The space kinds of the searched (not default) programs of each workload name in ``log``."""
    out: dict[str, set[str]] = {}
    for r in load_records(log):
        space = r.program.get("space") if isinstance(r.program, dict) else None
        if space not in (None, "default"):  # "default": the untuned schedule measured first
            out.setdefault(r.workload_key.split("(")[0], set()).add(str(space))
    return out


@pytest.mark.requires("gcc")
def test_tune_network_searches_packed_convolutions_in_their_template(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    b = asc.GraphBuilder("conv_dense")
    # 32 channels x 3 x 3 values per output: packed (fewer run flat, .conv_flat.runs_flat)
    y = b.relu(b.conv2d(b.input("x", (1, 32, 6, 6)), b.constant(rng.standard_normal((16, 32, 3, 3))), pad=1))
    b.output(b.dense(b.flatten(y), b.constant(rng.standard_normal((5, 576)))))
    graph = b.build()
    log = tmp_path / "net.jsonl"
    result = asc.tune_network(graph, trials=10, log=log, round_trials=3, remeasure=0)
    assert sum(t["trials"] for t in result.tasks) >= 10
    spaces = _spaces(log)
    assert spaces["fused_conv2d_packed"] == {"template"}
    assert spaces.get("fused_dense", {"sketch"}) == {"sketch"}
    net = asc.build_network(graph, log)
    xv = np.random.default_rng(2).standard_normal((1, 32, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(net(xv), asc.build_network(graph)(xv), rtol=1e-4, atol=1e-4)


@pytest.mark.requires("gcc")
def test_cli_tune_takes_space_auto(tmp_path: Path) -> None:
    log = tmp_path / "conv.jsonl"
    args = ["fused_conv2d_packed", "1", "4", "6", "6", "16", "3", "3", "1", "1", "8", "bias,relu"]
    run = subprocess.run(
        [sys.executable, "-m", "autosched", "tune", *args, "--space", "auto", "--trials", "3",
         "--log", str(log)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "space auto, tuner sa" in run.stdout
    assert _spaces(log) == {"fused_conv2d_packed": {"template"}}
