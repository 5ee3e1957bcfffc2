"""Where ResNet-18's time goes: each task's kernel timed alone on the inputs it gets in the network.

The network is built as ``build_network`` builds it (from ``--log``, else every task's default
schedule), run once on a random input to get every kernel's real inputs, then each kernel is timed
in C (``Kernel.time``, repeats of at least 20 ms, interleaved rounds, medians). The table gives
per task its time summed over its occurrences, GFLOP/s and share of the kernels' total; with
``--log``, each task's untuned kernel is timed in the same rounds and the table gives the ratio
untuned / tuned. Results are appended to benchmarks/results/network_tasks.json.

    python benchmarks/bench_network_tasks.py [--size 224] [--threads 2] [--rounds 5] [--log LOG]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common import clean_blas_env

clean_blas_env()

import numpy as np  # noqa: E402
from common import interleaved, median, network_kernel_timers, print_table, write_results  # noqa: E402

import autosched as asc  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import graph_models  # noqa: E402  (the ONNX model writer of the tests)


def kernel_timers(net: asc.Network, tag: str = "") -> tuple[dict, dict, dict]:
    """Per distinct task of ``net``: a timer of its kernel on the arrays it gets when the network
    runs on a random input (keys: the workload, then ``tag``), its count, its FLOPs."""
    x = np.random.default_rng(0).standard_normal(net.graph.shapes["x"]).astype(np.float32)
    timers, count = network_kernel_timers(net, x, tag)
    flops = {str(wl): wl.flops() for wl in net.kernels}
    return timers, count, flops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=224, help="input height and width (default 224)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--log", type=Path, help="a tuning log of the network (default: untuned)")
    args = ap.parse_args()
    graph = asc.from_onnx(graph_models.resnet18(args.size))
    target = f"c -num-threads={args.threads}"
    timers, count, flops = kernel_timers(asc.build_network(graph, args.log, target=target))
    if args.log:  # the untuned kernels side by side, in the same rounds
        timers |= kernel_timers(asc.build_network(graph, None, target=target), " untuned")[0]
    times = {k: median(v) for k, v in interleaved(timers, args.rounds, settle=0.1).items()}
    total = sum(times[k] * count[k] for k in count)
    order = sorted(count, key=lambda k: -times[k] * count[k])
    rows = [[f"{times[k] * count[k] * 1e3:.3f}", count[k], f"{flops[k] / times[k] / 1e9:.1f}",
             f"{times[k] * count[k] / total:.1%}"]
            + ([f"{times[k + ' untuned'] / times[k]:.2f}"] if args.log else []) + [k] for k in order]
    built = f"tuned: {args.log}" if args.log else "untuned"
    print(f"ResNet-18 {args.size}², {args.threads} threads, {built}")
    ratio = ["untuned / tuned"] if args.log else []
    print_table(["ms (all)", "count", "GFLOP/s", "share", *ratio, "task"], rows)
    print(f"kernels in all: {total * 1e3:.2f} ms")
    if args.log:
        untuned = sum(times[k + " untuned"] * count[k] for k in count)
        print(f"untuned kernels, timed in the same rounds: {untuned * 1e3:.2f} ms")
    payload = {"size": args.size, "threads": args.threads, "log": str(args.log) if args.log else None,
               "seconds": times, "count": count, "kernels_total_s": total}
    print(f"results: {write_results('network_tasks', payload)}")


if __name__ == "__main__":
    main()
