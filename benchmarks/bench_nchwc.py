"""Convolutions on NCHW activations against the same on blocked (NCHWc) activations, per layer.

    python benchmarks/bench_nchwc.py [--net resnet50 mobilenet_v2] [--threads 2] [--rounds 5] [--calls 9]

Layers: ResNet-50's convolutions (1x1 of stride 1 and 2, 3x3 of stride 1 and 2) and MobileNet-V2's
1x1 and depthwise ones (224x224, batch 1). Per layer the kernel a network ran before activations
were blocked (ResNet-50: ``fused_conv2d_packed``; MobileNet-V2: ``fused_conv2d`` over flat pixels)
and the blocked one (:mod:`autosched.graph.activation_layout`: ``fused_conv2d_nchwc`` or
``fused_depthwise_nchwc``), both with their default schedules, and the blocked one with its other
choice (the other reduction order; for a depthwise layer a padded copy of the input first instead
of bounds checks). Each timed call comes as in a network: caches evicted by writing a 64 MiB
buffer, then the input read. GFLOP/s from the median call of each round, the median of the rounds;
rounds alternate the candidates. Results go to benchmarks/results/nchwc.json.
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
from autosched.graph.depthwise_nchwc import DepthwiseTile, tile_depthwise_nchwc  # noqa: E402
from autosched.ops.schedules import default_schedule, packed_conv_cols  # noqa: E402

#: (C, H = W, K, window, stride; K 0: depthwise) per network
LAYERS = {
    "resnet50": [
        (256, 56, 64, 1, 1), (64, 56, 256, 1, 1), (512, 28, 128, 1, 1), (128, 28, 512, 1, 1),
        (1024, 14, 256, 1, 1), (256, 14, 1024, 1, 1), (256, 56, 512, 1, 2), (512, 28, 1024, 1, 2),
        (64, 56, 64, 3, 1), (128, 28, 128, 3, 1), (256, 14, 256, 3, 1), (128, 56, 128, 3, 2),
    ],
    "mobilenet_v2": [
        (16, 112, 96, 1, 1), (144, 56, 24, 1, 1), (192, 28, 32, 1, 1), (96, 14, 576, 1, 1),
        (576, 14, 96, 1, 1), (960, 7, 160, 1, 1), (32, 112, 0, 3, 1), (96, 112, 0, 3, 2),
        (144, 56, 0, 3, 1), (144, 56, 0, 3, 2), (576, 14, 0, 3, 1), (960, 7, 0, 3, 1),
    ],
}
NAMES = ["NCHW", "NCHWc default", "NCHWc other"]


def workloads(net: str, c: int, hw: int, k: int, r: int, stride: int) -> tuple[asc.Workload, asc.Workload]:
    """The layer's NCHW workload (as the network ran it before) and its blocked one."""
    pad, tail = r // 2, ("bias,relu", "float32")
    if k == 0:
        return (asc.Workload("fused_conv2d", (1, c, hw, hw, c, r, r, stride, pad, c, *tail)),
                asc.Workload("fused_depthwise_nchwc", (1, c, hw, hw, r, r, stride, pad, 8, *tail)))
    args = (1, c, hw, hw, k, r, r, stride, pad)
    blocked = asc.Workload("fused_conv2d_nchwc", (*args, 8, *tail))
    if net == "resnet50":
        return asc.Workload("fused_conv2d_packed", (*args, 8, *tail)), blocked
    return asc.Workload("fused_conv2d", (*args, 1, *tail)), blocked


def kernels(nchw: asc.Workload, blocked: asc.Workload, target: asc.Target) -> list[object]:
    """The three candidates' kernels of one layer."""
    s, out, acc = output_and_accumulator(blocked.tensors(), target)
    if blocked.name == "fused_depthwise_nchwc":
        copied = DepthwiseTile(packed_conv_cols(as_int(out.shape[3])), inline_pad=False)
        tile_depthwise_nchwc(s, out, acc, target, copied)
    else:
        default = nchwc_default(out, acc, target)
        tile_conv2d_nchwc(s, out, acc, target, replace(default, channels_inner=not default.channels_inner))
    return [asc.build(default_schedule(nchw, target)[0], nchw.tensors(), target),
            asc.build(default_schedule(blocked, target)[0], blocked.tensors(), target),
            asc.build(s, blocked.tensors(), target)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--net", nargs="+", default=list(LAYERS), choices=list(LAYERS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=9, help="cold calls per candidate and round")
    args = ap.parse_args()
    target = asc.Target.parse(f"c -num-threads={args.threads}")
    rng = np.random.default_rng(0)
    print(f"{cpu_name()}, {target}: GFLOP/s, weights and output out of cache")
    rows, table = [], []
    for net in args.net:
        for c, hw, k, r, stride in LAYERS[net]:
            nchw, blocked = workloads(net, c, hw, k, r, stride)
            arrays = [rng.standard_normal([as_int(d) for d in t.shape]).astype("float32")
                      for t in nchw.tensors()]
            shapes = [[as_int(d) for d in t.shape] for t in blocked.tensors()]  # the same sizes, blocked
            twice = [[a.reshape(b).copy() for a, b in zip(arrays, shapes, strict=True)] for _ in "ab"]
            timers = [cold_timer(kern, arrs, args.calls)
                      for kern, arrs in zip(kernels(nchw, blocked, target), [arrays, *twice], strict=True)]
            times: list[list[float]] = [[] for _ in timers]
            for _ in range(args.rounds):
                for i, timer in enumerate(timers):
                    times[i].append(timer())
            gflops = [nchw.flops() / statistics.median(t) / 1e9 for t in times]
            layer = f"{c}->{k or 'dw'} {hw}x{hw} {r}x{r}/{stride}"
            table.append([net, layer, nchw.name, *gflops, gflops[1] / gflops[0]])
            rows.append({"network": net, "layer": [c, hw, k, r, stride], "before": nchw.name,
                         "gflops": dict(zip(NAMES, gflops, strict=True))})
            print_table(["network", "layer", "NCHW kernel", *NAMES, "NCHWc / NCHW"], table[-1:])
    print()
    print_table(["network", "layer", "NCHW kernel", *NAMES, "NCHWc / NCHW"], table)
    path = write_results("nchwc", {"target": str(target), "rounds": args.rounds, "calls": args.calls,
                                   "rows": rows})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
