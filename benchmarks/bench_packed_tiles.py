"""Register tiles (channel blocks x output columns) of ``fused_conv2d_packed`` on this CPU.

    python benchmarks/bench_packed_tiles.py [--target "c -num-threads=1"] [--rounds 15]

Each layer's kernels (one per tile) are built once and timed in interleaved rounds; the table gives
GFLOP/s of the fastest round per tile (interference from other processes only adds time, so the
minimum is the figure that compares tiles on a shared machine), then the tile the default schedule
picks on this target and its figure. Layers: DCGAN's discriminator, DQN at batch 16, ResNet's 3x3
convolutions, in channel blocks of 8. Results go to benchmarks/results/packed_tiles.json.
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

import numpy as np

import autosched as asc
from autosched.expr import Tensor, as_int
from autosched.graph import epilogue as epi
from autosched.ops.schedules import PackedConvTile, packed_conv_blocks, packed_conv_cols, tile_conv2d_packed
from autosched.runner.kernel import Kernel

TILES = [(2, 8), (2, 6), (2, 4), (1, 8), (1, 6), (4, 3)]
LAYERS = [
    (1, 64, 32, 32, 128, 4, 4, 2, 1, 8, "bias,leaky_relu:0.2", "float32"),
    (1, 128, 16, 16, 256, 4, 4, 2, 1, 8, "bias,leaky_relu:0.2", "float32"),
    (1, 256, 8, 8, 512, 4, 4, 2, 1, 8, "bias,leaky_relu:0.2", "float32"),
    (16, 32, 20, 20, 64, 4, 4, 2, 0, 8, "bias,relu", "float32"),
    (1, 128, 28, 28, 128, 3, 3, 1, 1, 8, "bias,relu", "float32"),
    (1, 64, 56, 56, 64, 3, 3, 1, 1, 8, "bias,relu", "float32"),
    (1, 256, 14, 14, 256, 3, 3, 1, 1, 8, "bias,relu", "float32"),
]
RESULTS = Path(__file__).with_name("results") / "packed_tiles.json"


def kernel_for(tensors: list[Tensor], target: asc.Target, blocks: int, cols: int) -> Kernel | None:
    """The layer built with one register tile; None where ``blocks`` does not divide its blocks."""
    s = epi.inline_default(tensors, target)
    out = tensors[-1]
    if out.op.name != "conv":
        s[s.stages["conv"].op.output(0)].compute_inline()
    acc = s.stages["conv_blk"].op.output(0)
    if as_int(acc.shape[1]) % blocks:
        return None
    tile_conv2d_packed(s, out, acc, target, PackedConvTile(blocks, min(cols, as_int(out.shape[3]))))
    built = asc.build(s, tensors, target)
    assert isinstance(built, Kernel)
    return built


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--target", default="c -num-threads=1")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    target = asc.Target.parse(args.target)
    print(f"{platform.processor() or platform.machine()}, target {target}")
    print("GFLOP/s per tile (blocks x cols):", "  ".join(f"{b}x{c}" for b, c in TILES), "| the default's")
    rows = []
    for layer in LAYERS:
        wl = asc.Workload("fused_conv2d_packed", layer)
        tensors = wl.tensors()
        rng = np.random.default_rng(0)
        arrays = [rng.standard_normal([as_int(d) for d in t.shape]).astype("float32") for t in tensors]
        out = tensors[-1]
        cols = packed_conv_cols(as_int(out.shape[3]))
        default = (packed_conv_blocks(layer[4] // layer[9], target, cols), cols)
        tiles = [*TILES, default]
        kernels = [kernel_for(tensors, target, b, c) for b, c in tiles]
        best = [float("inf")] * len(tiles)
        for _ in range(args.rounds):
            for i, k in enumerate(kernels):
                if k is not None:
                    best[i] = min(best[i], *k.time(*arrays, repeat=3, min_repeat_ms=10))
        gflops = [wl.flops() / b / 1e9 if b < float("inf") else None for b in best]
        cells = [f"{g:6.1f}" if g else "    - " for g in gflops]
        print(" ".join(cells[:-1]), f"| {default[0]}x{default[1]} {cells[-1]}", layer[:10])
        names = [f"{b}x{c}" for b, c in TILES]
        rows.append({"layer": list(layer), "gflops": dict(zip(names, gflops[:-1], strict=True)),
                     "default": f"{default[0]}x{default[1]}", "default_gflops": gflops[-1]})
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"target": str(target), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
