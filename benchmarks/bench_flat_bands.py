"""Rows per band of the windowed flat convolutions (``fused_conv2d`` computed over flat pixels):
the default's band, and bands 2, 4 and 8 times as tall (capped at the output's rows).

    python benchmarks/bench_flat_bands.py [--threads 2] [--rounds 5]

Each layer is built once per band size with the default register tile
(:func:`autosched.graph.conv_flat.flat_tile`) and timed alone (``Kernel.time``, the fastest of
3 repeats of at least 20 ms per round, rounds alternating the band sizes); the table gives the
default's milliseconds and each band's speed-up over it (median of the rounds). Layers:
MobileNet-V2's first convolution (3 input channels) and depthwise layers, DCGAN's discriminator's
first. Results go to benchmarks/results/flat_bands.json.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace

import numpy as np
from common import cpu_name, print_table, write_results

import autosched as asc
from autosched.expr import as_int
from autosched.graph import epilogue as epi
from autosched.graph.conv_flat import flat_tile, tile_conv2d_flat

#: fused_conv2d (N, C, H, W, K, R, S, stride, pad, groups, epilogue)
LAYERS = [
    (1, 3, 224, 224, 32, 3, 3, 2, 1, 1, "bias,clip:0.0:6.0"),
    (1, 32, 112, 112, 32, 3, 3, 1, 1, 32, "bias,clip:0.0:6.0"),
    (1, 96, 112, 112, 96, 3, 3, 2, 1, 96, "bias,clip:0.0:6.0"),
    (1, 144, 56, 56, 144, 3, 3, 1, 1, 144, "bias,clip:0.0:6.0"),
    (1, 144, 56, 56, 144, 3, 3, 2, 1, 144, "bias,clip:0.0:6.0"),
    (1, 576, 14, 14, 576, 3, 3, 1, 1, 576, "bias,clip:0.0:6.0"),
    (1, 3, 64, 64, 64, 4, 4, 2, 1, 1, "bias,leaky_relu:0.2"),
]
TALLER = (1, 2, 4, 8)


def build(wl: asc.Workload, target: asc.Target, taller: int) -> tuple[object, int]:
    """The layer's kernel with bands ``taller`` times the default's rows, and those rows."""
    tensors = wl.tensors()
    s = epi.inline_default(tensors, target)
    out = tensors[-1]
    if out.op.name != "conv":
        s[s.stages["conv"].op.output(0)].compute_inline()
    flat = s.stages["conv_flat"].op.output(0)
    k, groups = int(str(wl.args[4])), int(str(wl.args[9]))
    tile = flat_tile(k, groups, flat, out, target)
    tile = replace(tile, rows=min(as_int(out.shape[2]), tile.rows * taller))
    tile_conv2d_flat(s, out, flat, groups, target, tile)
    return asc.build(s, tensors, target), tile.rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    target = asc.Target.parse(f"c -num-threads={args.threads}")
    print(f"{cpu_name()}, {target}")
    headers = ["layer", "default ms", *(f"x{t} rows" for t in TALLER)]
    table, rows = [], []
    for layer in LAYERS:
        wl = asc.get_workload("fused_conv2d", (*layer, "float32"))
        rng = np.random.default_rng(0)
        arrays = [rng.standard_normal([as_int(d) for d in t.shape]).astype("float32") for t in wl.tensors()]
        kernels = {t: build(wl, target, t) for t in TALLER}
        times: dict[int, list[float]] = {t: [] for t in TALLER}
        for _ in range(args.rounds):
            for t, (kernel, _) in kernels.items():
                times[t].append(min(kernel.time(*arrays, repeat=3, min_repeat_ms=20)))  # type: ignore[attr-defined]
        base = statistics.median(times[1])
        speedups = {t: base / statistics.median(v) for t, v in times.items()}
        table.append([str(layer[:10]), f"{base * 1e3:.3f}",
                      *(f"{speedups[t]:.2f} (r{kernels[t][1]})" for t in TALLER)])
        rows.append({"layer": list(layer), "default_ms": base * 1e3,
                     "band_rows": {t: kernels[t][1] for t in TALLER}, "speedup": speedups})
        print_table(headers, table[-1:])
    print()
    print_table(headers, table)
    path = write_results("flat_bands", {"target": str(target), "rounds": args.rounds, "rows": rows})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
