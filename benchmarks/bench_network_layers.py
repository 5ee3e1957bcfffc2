"""Where ResNet-18's gap to onnxruntime is: each layer's time inside whole forward passes, ours
next to onnxruntime's.

Ours: ``build_network``'s fused groups, each timed with a wall clock from the end of the one before
it while the network runs (``Network.steps``: every kernel meets the caches the layers before it
left; the first layer's time includes copying the input in), medians over the calls.
onnxruntime's: its profiler's per-node kernel times over the same number of runs. The two graphs
differ (onnxruntime reorders convolutions into its blocked layout and fuses on its own), so
layers are matched by kind and order: the k-th convolution with the k-th Conv node, and so on for
max pooling, global average pooling and the dense layer; a table row shows both names.

    python benchmarks/bench_network_layers.py [--size 224] [--threads 2] [--runs 25] [--log LOG]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from common import clean_blas_env

clean_blas_env()

import numpy as np  # noqa: E402
from common import median, print_table, write_results  # noqa: E402

import autosched as asc  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import graph_models  # noqa: E402  (the ONNX model writer of the tests)

#: our operator -> onnxruntime's operator names for the same layer
KINDS = {"conv2d": ("Conv", "FusedConv"), "max_pool2d": ("MaxPool",),
         "global_avg_pool2d": ("GlobalAveragePool",), "dense": ("Gemm", "FusedGemm")}  # fmt: skip
WARMUP = 5


def ours(net: asc.Network, x: np.ndarray, runs: int) -> list[tuple[str, str, float]]:
    """(first node's name, operator, median ms) per fused group of ``net``, in execution order."""
    times: dict[int, list[float]] = defaultdict(list)
    for r in range(WARMUP + runs):
        t0 = time.perf_counter()
        for i, _ in enumerate(net.steps(x)):  # each step has run when it is yielded
            t1 = time.perf_counter()
            if r >= WARMUP:
                times[i].append(t1 - t0)
            t0 = t1
    return [(g.nodes[0].name, g.nodes[0].op, 1e3 * median(times[i])) for i, g in enumerate(net.groups)]


def onnxruntime_nodes(model: Any, x: np.ndarray, threads: int, runs: int) -> list[tuple[str, str, float]]:
    """(node name, operator, median ms) per node of onnxruntime's optimized graph, in order."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    opts.enable_profiling = True
    with tempfile.TemporaryDirectory() as tmp:
        opts.profile_file_prefix = os.path.join(tmp, "ort")
        session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        for _ in range(WARMUP + runs):
            session.run(None, {"x": x})
        events = json.loads(Path(session.end_profiling()).read_text())
    durations: dict[str, list[float]] = defaultdict(list)
    kind: dict[str, str] = {}
    for e in events:  # one "<node>_kernel_time" event per node and run, in execution order
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            name = e["name"].removesuffix("_kernel_time")
            durations[name].append(e["dur"] / 1e3)
            kind[name] = e.get("args", {}).get("op_name", "?")
    return [(n, kind[n], median(d[WARMUP:])) for n, d in durations.items()]


def match(mine: list[tuple[str, str, float]], theirs: list[tuple[str, str, float]]) -> list[list[Any]]:
    """Table rows: our layers next to onnxruntime's of the same kind and rank; the rest alone."""
    queues = {k: [t for t in theirs if t[1] in names] for k, names in KINDS.items()}
    rows: list[list[Any]] = []
    for name, op, ms in mine:
        other = queues[op].pop(0) if queues.get(op) else None
        if other is None:
            rows.append([name, f"{ms:.3f}", "", "", ""])
        else:
            rows.append([name, f"{ms:.3f}", other[0], f"{other[2]:.3f}", f"{ms / other[2]:.2f}"])
    matched = {r[2] for r in rows}
    rows += [["", "", n, f"{ms:.3f}", ""] for n, _, ms in theirs if n not in matched]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=224, help="input height and width (default 224)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=25, help="forward passes timed (after 5 warm-up passes)")
    ap.add_argument("--log", type=Path, help="a tuning log of the network (default: untuned)")
    args = ap.parse_args()
    model = graph_models.resnet18(args.size)
    graph = asc.from_onnx(model)
    x = np.random.default_rng(0).standard_normal(graph.shapes["x"]).astype(np.float32)
    net = asc.build_network(graph, args.log, target=f"c -num-threads={args.threads}")
    mine = ours(net, x, args.runs)
    theirs = onnxruntime_nodes(model, x, args.threads, args.runs)
    built = f"tuned: {args.log}" if args.log else "untuned"
    print(f"ResNet-18 {args.size}², {args.threads} threads, {built}; medians of {args.runs} forward passes")
    print_table(["layer (ours)", "ms", "onnxruntime node", "ms", "ratio"], match(mine, theirs))
    a, b = sum(m[2] for m in mine), sum(t[2] for t in theirs)
    print(f"in all: ours {a:.2f} ms, onnxruntime {b:.2f} ms ({a / b:.2f}x)")
    payload = {"size": args.size, "threads": args.threads, "log": str(args.log) if args.log else None,
               "ours_ms": mine, "onnxruntime_ms": theirs}  # fmt: skip
    print(f"results: {write_results('network_layers', payload)}")


if __name__ == "__main__":
    main()
