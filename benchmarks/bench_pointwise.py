"""1x1 convolutions as a network runs them: flat, or with the kernel packed, per register tile
and loop order, each layer's weights and output out of the caches and its input in them.

    python benchmarks/bench_pointwise.py [--threads 2] [--rounds 5] [--calls 9] [--layers resnet50 ...]

In a network a layer's input was just written by the layer before it, while its weights (read
once per forward pass) and the buffer it writes come from memory. Each timed call here is set up
the same way: a 64 MiB buffer written (evicting everything), then the input read. Candidates per
layer: ``flat`` (``fused_conv2d``, vectorized along pixels), the packed kernel
(``fused_conv2d_packed``) with one block x 8 columns (the tile before 2026-12-07), two blocks x 6
columns with channel tiles or rows outermost, and the packed kernel's default
(:func:`autosched.ops.schedules.packed_conv_default`). GFLOP/s from the median call of each round,
the median of the rounds; rounds alternate the candidates. Layers: the stride-1 1x1
convolutions of ResNet-50 and MobileNet-V2 (224x224, batch 1). Results go to
benchmarks/results/pointwise.json.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from common import clean_blas_env

clean_blas_env()

import numpy as np  # noqa: E402
from common import cpu_name, print_table, write_results  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.expr import Tensor, as_int  # noqa: E402
from autosched.graph import epilogue as epi  # noqa: E402
from autosched.graph.conv_flat import runs_flat  # noqa: E402
from autosched.ops.schedules import PackedConvTile, default_schedule, tile_conv2d_packed  # noqa: E402

#: (input channels, width = height, output channels) of the stride-1 1x1 layers
LAYERS = {
    "resnet50": [(64, 56, 64), (64, 56, 256), (256, 56, 64), (256, 56, 128), (128, 28, 512), (512, 28, 128),
                 (256, 14, 1024), (1024, 14, 256), (512, 7, 2048), (2048, 7, 512)],
    "mobilenet_v2": [(16, 112, 96), (24, 56, 144), (144, 56, 24), (32, 28, 192), (192, 28, 32),
                     (96, 14, 576), (576, 14, 96), (960, 7, 160), (160, 7, 960), (320, 7, 1280)],
}
TILES = {"1x8": PackedConvTile(1, 8), "2x6": PackedConvTile(2, 6),
         "2x6 rows": PackedConvTile(2, 6, rows_outer=True)}
EVICT = np.zeros(64 << 20, dtype=np.uint8)


def packed_kernel(tensors: list[Tensor], target: asc.Target, tile: PackedConvTile | None) -> object | None:
    """The packed layer built with ``tile`` (None: its default); None where the tile's blocks do
    not divide the layer's."""
    s = epi.inline_default(tensors, target)
    out = tensors[-1]
    if out.op.name != "conv":
        s[s.stages["conv"].op.output(0)].compute_inline()
    acc = s.stages["conv_blk"].op.output(0)
    if tile is not None:
        if as_int(acc.shape[1]) % tile.blocks:
            return None
        tile = PackedConvTile(tile.blocks, min(tile.cols, as_int(out.shape[3])), rows_outer=tile.rows_outer)
    tile_conv2d_packed(s, out, acc, target, tile)
    return asc.build(s, tensors, target)


def cold_timer(kernel: object, arrays: list[np.ndarray], calls: int) -> Callable[[], float]:
    """Seconds of the median of ``calls`` calls, each after evicting the caches and reading the input."""

    def run() -> float:
        times = []
        for _ in range(calls):
            np.add(EVICT, 1, out=EVICT)
            arrays[0].sum()
            t0 = time.perf_counter()
            kernel(*arrays)  # type: ignore[operator]
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    return run


def candidates(
    c: int, hw: int, k: int, target: asc.Target, calls: int
) -> tuple[dict[str, Callable[[], float]], int]:
    """The timers of one layer's candidates, and its FLOPs."""
    rng = np.random.default_rng(0)

    def arrays(wl: asc.Workload) -> list[np.ndarray]:
        return [rng.standard_normal([as_int(d) for d in t.shape]).astype("float32") for t in wl.tensors()]

    flat = asc.Workload("fused_conv2d", (1, c, hw, hw, k, 1, 1, 1, 0, 1, "bias,relu", "float32"))
    packed = asc.Workload("fused_conv2d_packed", (1, c, hw, hw, k, 1, 1, 1, 0, 8, "bias,relu", "float32"))
    timers = {"flat": cold_timer(asc.build(default_schedule(flat, target)[0], flat.tensors(), target),
                                 arrays(flat), calls)}
    packed_arrays = arrays(packed)
    for name, tile in [*TILES.items(), ("packed default", None)]:
        kernel = packed_kernel(packed.tensors(), target, tile)
        if kernel is not None:
            timers[name] = cold_timer(kernel, packed_arrays, calls)
    return timers, flat.flops()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=9, help="cold calls per candidate and round")
    ap.add_argument("--layers", nargs="+", default=list(LAYERS), choices=list(LAYERS))
    args = ap.parse_args()
    target = asc.Target.parse(f"c -num-threads={args.threads}")
    names = ["flat", *TILES, "packed default"]
    print(f"{cpu_name()}, {target}: GFLOP/s, weights and output out of cache")
    rows, table = [], []
    for net in args.layers:
        for c, hw, k in LAYERS[net]:
            timers, flops = candidates(c, hw, k, target, args.calls)
            rounds: dict[str, list[float]] = {n: [] for n in timers}
            for _ in range(args.rounds):
                for n, timer in timers.items():
                    rounds[n].append(timer())
            gflops = {n: flops / statistics.median(v) / 1e9 for n, v in rounds.items()}
            chosen = "flat" if runs_flat(c, 1, 1, 1, 0, k) else "packed default"
            table.append([net, f"{c}->{k} {hw}x{hw}", *(gflops.get(n, "-") for n in names), chosen])
            rows.append({"network": net, "layer": [c, hw, k], "gflops": gflops, "network_runs": chosen})
            print_table(["network", "layer", *names, "the network runs"], table[-1:])
    print()
    print_table(["network", "layer", *names, "the network runs"], table)
    path = write_results("pointwise", {"target": str(target), "rounds": args.rounds, "calls": args.calls,
                                       "rows": rows})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
