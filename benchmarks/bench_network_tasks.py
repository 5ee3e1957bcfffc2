"""Where ResNet-18's time goes: each task's kernel timed alone on the inputs it gets in the network.

The network is built as ``build_network`` builds it (from ``--log``, else every task's default
schedule), run once on a random input to get every kernel's real inputs, then each kernel is timed
in C (``Kernel.time``, repeats of at least 20 ms, interleaved rounds, medians). The table gives
per task its time summed over its occurrences, GFLOP/s and share of the kernels' total; results
are appended to benchmarks/results/network_tasks.json.

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=224, help="input height and width (default 224)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--log", type=Path, help="a tuning log of the network (default: untuned)")
    args = ap.parse_args()
    graph = asc.from_onnx(graph_models.resnet18(args.size))
    net = asc.build_network(graph, args.log, target=f"c -num-threads={args.threads}")
    values = dict(net.graph.constants)
    values["x"] = np.random.default_rng(0).standard_normal(graph.shapes["x"]).astype(np.float32)
    timers, count = {}, {}
    for g in net.groups:  # the network's own order: every kernel gets the arrays it gets in a call
        values[g.output] = net._run_group(g, values).copy()
        if g.workload is None:
            continue
        name = str(g.workload)
        count[name] = count.get(name, 0) + 1
        if name not in timers:
            pairs = zip(g.inputs, g.workload.inputs, strict=True)
            arrays = [np.ascontiguousarray(values[v]).reshape(static_shape(t.shape)) for v, t in pairs]
            out = np.empty(static_shape(g.workload.outputs[0].shape), np.float32)
            timers[name] = kernel_timer(net.kernels[g.workload], [*arrays, out], min_repeat_ms=20)
    flops = {str(wl): wl.flops() for wl in net.kernels}
    times = {k: median(v) for k, v in interleaved(timers, args.rounds, settle=0.1).items()}
    total = sum(times[k] * count[k] for k in times)
    order = sorted(times, key=lambda k: -times[k] * count[k])
    rows = [[f"{times[k] * count[k] * 1e3:.3f}", count[k], f"{flops[k] / times[k] / 1e9:.1f}",
             f"{times[k] * count[k] / total:.1%}", k] for k in order]
    built = f"tuned: {args.log}" if args.log else "untuned"
    print(f"ResNet-18 {args.size}², {args.threads} threads, {built}")
    print_table(["ms (all)", "count", "GFLOP/s", "share", "task"], rows)
    print(f"kernels in all: {total * 1e3:.2f} ms")
    payload = {"size": args.size, "threads": args.threads, "log": str(args.log) if args.log else None,
               "seconds": times, "count": count, "kernels_total_s": total}
    print(f"results: {write_results('network_tasks', payload)}")


if __name__ == "__main__":
    main()
