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
from common import interleaved, kernel_timer, median, print_table, write_results  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.expr import static_shape  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import graph_models  # noqa: E402  (the ONNX model writer of the tests)


def kernel_timers(net: asc.Network, size: int, tag: str = "") -> tuple[dict, dict, dict]:
    """Per distinct task of ``net``: a timer of its kernel on the arrays it gets when the network
    runs on a random input (keys: the workload, then ``tag``), its count, its FLOPs."""
    values = dict(net.graph.constants)
    values["x"] = np.random.default_rng(0).standard_normal(net.graph.shapes["x"]).astype(np.float32)
    timers, count, flops = {}, {}, {}
    for g in net.groups:  # the network's own order: every kernel gets the arrays it gets in a call
        values[g.output] = net._run_group(g, values, net._workspace()).copy()
        if g.workload is None:
            continue
        name = str(g.workload)
        count[name] = count.get(name, 0) + 1
        if name + tag not in timers:
            pairs = zip(g.inputs, g.workload.inputs, strict=True)
            arrays = [np.ascontiguousarray(values[v]).reshape(static_shape(t.shape)) for v, t in pairs]
            out = np.empty(static_shape(g.workload.outputs[0].shape), np.float32)
            timers[name + tag] = kernel_timer(net.kernels[g.workload], [*arrays, out], min_repeat_ms=20)
            flops[name] = g.workload.flops()
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
    timers, count, flops = kernel_timers(asc.build_network(graph, args.log, target=target), args.size)
    if args.log:  # the untuned kernels side by side, in the same rounds
        timers |= kernel_timers(asc.build_network(graph, None, target=target), args.size, " untuned")[0]
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
