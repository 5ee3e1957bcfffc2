"""Packed convolutions on NCHW activations against the same on blocked (NCHWc) activations.

    python benchmarks/bench_nchwc.py [--threads 2] [--rounds 5] [--calls 9]

Layers: ResNet-50's convolutions (224x224, batch 1): 1x1 of stride 1 and 2, 3x3 of stride 1 and
2. Per layer, ``fused_conv2d_packed`` (NCHW data and output) and ``fused_conv2d_nchwc`` (blocked
data and output, what :mod:`autosched.graph.activation_layout` gives a network), both with their
default schedules, plus the blocked one with the other reduction order (a block's input channels
innermost or outermost). Each timed call comes as in a network: caches evicted by writing a 64
MiB buffer, then the input read. GFLOP/s from the median call of each round, the median of the
rounds; rounds alternate the candidates. Results go to benchmarks/results/nchwc.json.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace

from common import clean_blas_env

clean_blas_env()

import numpy as np  # noqa: E402
from bench_pointwise import cold_timer  # noqa: E402
from common import cpu_name, print_table, write_results  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.expr import as_int  # noqa: E402
from autosched.graph.conv_nchwc import nchwc_default, output_and_accumulator, tile_conv2d_nchwc  # noqa: E402
from autosched.ops.schedules import default_schedule  # noqa: E402

#: (C, H = W, K, window, stride) of ResNet-50's convolutions
LAYERS = [
    (256, 56, 64, 1, 1), (64, 56, 256, 1, 1), (512, 28, 128, 1, 1), (128, 28, 512, 1, 1),
    (1024, 14, 256, 1, 1), (256, 14, 1024, 1, 1), (256, 56, 512, 1, 2), (512, 28, 1024, 1, 2),
    (64, 56, 64, 3, 1), (128, 28, 128, 3, 1), (256, 14, 256, 3, 1), (128, 56, 128, 3, 2),
]
NAMES = ["NCHW packed", "NCHWc default", "NCHWc other order"]


def kernels(args: tuple, target: asc.Target) -> list[object]:
    """The three candidates' kernels for one layer's workload arguments."""
    packed = asc.Workload("fused_conv2d_packed", args)
    blocked = asc.Workload("fused_conv2d_nchwc", args)
    s, out, acc = output_and_accumulator(blocked.tensors(), target)
    default = nchwc_default(out, acc, target)
    tile_conv2d_nchwc(s, out, acc, target, replace(default, channels_inner=not default.channels_inner))
    return [asc.build(default_schedule(packed, target)[0], packed.tensors(), target),
            asc.build(default_schedule(blocked, target)[0], blocked.tensors(), target),
            asc.build(s, blocked.tensors(), target)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=9, help="cold calls per candidate and round")
    args = ap.parse_args()
    target = asc.Target.parse(f"c -num-threads={args.threads}")
    rng = np.random.default_rng(0)
    print(f"{cpu_name()}, {target}: GFLOP/s, weights and output out of cache")
    rows, table = [], []
    for c, hw, k, r, stride in LAYERS:
        wl_args = (1, c, hw, hw, k, r, r, stride, r // 2, 8, "bias,relu", "float32")
        wl = asc.Workload("fused_conv2d_packed", wl_args)
        shapes = [[as_int(d) for d in t.shape] for t in wl.tensors()]
        arrays = [rng.standard_normal(s).astype("float32") for s in shapes]
        nchwc = asc.Workload("fused_conv2d_nchwc", wl_args)
        blocked = [[as_int(d) for d in t.shape] for t in nchwc.tensors()]  # the same sizes, blocked
        twice = [[a.reshape(b).copy() for a, b in zip(arrays, blocked, strict=True)] for _ in "ab"]
        layouts = [arrays, *twice]
        timers = [cold_timer(kern, arrs, args.calls)
                  for kern, arrs in zip(kernels(wl_args, target), layouts, strict=True)]
        times: list[list[float]] = [[] for _ in timers]
        for _ in range(args.rounds):
            for i, timer in enumerate(timers):
                times[i].append(timer())
        gflops = [wl.flops() / statistics.median(t) / 1e9 for t in times]
        layer = f"{c}->{k} {hw}x{hw} {r}x{r}/{stride}"
        table.append([layer, *gflops, gflops[1] / gflops[0]])
        rows.append({"layer": [c, hw, k, r, stride], "gflops": dict(zip(NAMES, gflops, strict=True))})
        print_table(["layer", *NAMES, "NCHWc / NCHW"], table[-1:])
    print()
    print_table(["layer", *NAMES, "NCHWc / NCHW"], table)
    path = write_results("nchwc", {"target": str(target), "rounds": args.rounds, "calls": args.calls,
                                   "rows": rows})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
