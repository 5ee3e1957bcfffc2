"""Where a model's time goes: autosched's kernels inside the network next to onnxruntime's nodes.

    python benchmarks/bench_profile_model.py MODEL.onnx [--threads 2] [--seconds 2] [--top 25]

Ours: the untuned network (``asc.build_network``) stepped kernel by kernel
(``autosched.graph.profile.profile_network``): milliseconds per call of each workload, all its
occurrences together, with its GFLOP/s. onnxruntime's: its profiler over the same time, per node
(median over the calls) with the node's input shapes, spinning off, the same threads. The two
graphs differ (onnxruntime fuses and reorders on its own), so the tables are side by side, not
matched row by row. Results go to benchmarks/results/profile_model.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path

from common import clean_blas_env

clean_blas_env()

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from common import cpu_name, print_table, write_results  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.graph.profile import profile_network  # noqa: E402


def ours(model: Path, x: np.ndarray, threads: int, seconds: float) -> tuple[float, list[list[object]]]:
    """(ms per call, rows of workload, ms, GFLOP/s, most time first)."""
    net = asc.build_network(asc.from_onnx(model), target=f"c -num-threads={threads}")
    prof = profile_network(net, [x], calls=10, min_seconds=seconds)
    rows: list[list[object]] = []
    for wl, s in sorted(prof.kernels.items(), key=lambda kv: -kv[1]):
        count = sum(1 for g in net.groups if g.workload == wl)
        rows.append([str(wl), f"{s * 1e3:.3f}", f"{count * wl.flops() / s / 1e9:.1f}"])
    return prof.total * 1e3, rows


def onnxruntime(model: Path, x: np.ndarray, threads: int, seconds: float) -> tuple[float, list[list[object]]]:
    """(ms per call, rows of node, operator, input shapes, median ms, most time first)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.enable_profiling = True
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: x}
    sess.run(None, feed)
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds or calls < 10:
        sess.run(None, feed)
        calls += 1
    total = (time.perf_counter() - start) / calls * 1e3
    trace = Path(sess.end_profiling())
    events = json.loads(trace.read_text())
    trace.unlink(missing_ok=True)
    durations: dict[str, list[float]] = defaultdict(list)
    what: dict[str, tuple[str, str]] = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            durations[e["name"]].append(e["dur"] / 1e3)
            shapes = [next(iter(t.values())) for t in e["args"].get("input_type_shape", [])]
            what[e["name"]] = (e["args"].get("op_name", "?"), " ".join(map(str, shapes)))
    rows = [[name.removesuffix("_kernel_time"), *what[name], f"{statistics.median(d):.3f}"]
            for name, d in durations.items()]
    return total, sorted(rows, key=lambda r: -float(str(r[-1])))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=2.0, help="time each side this long")
    ap.add_argument("--top", type=int, default=25, help="rows per table")
    args = ap.parse_args()
    dims = onnx.load(str(args.model), load_external_data=False).graph.input[0].type.tensor_type.shape.dim
    x = np.random.default_rng(0).standard_normal([d.dim_value for d in dims]).astype(np.float32)
    print(f"{cpu_name()}, {args.threads} threads, {args.model.name}")
    mine, our_rows = ours(args.model, x, args.threads, args.seconds)
    theirs, ort_rows = onnxruntime(args.model, x, args.threads, args.seconds)
    print(f"\nautosched: {mine:.2f} ms per call")
    print_table(["workload (all occurrences)", "ms", "GFLOP/s"], our_rows[: args.top])
    print(f"\nonnxruntime: {theirs:.2f} ms per call")
    print_table(["node", "operator", "inputs", "ms"], ort_rows[: args.top])
    path = write_results("profile_model", {"model": args.model.name, "threads": args.threads,
                                           "autosched_ms": mine, "onnxruntime_ms": theirs,
                                           "autosched": our_rows, "onnxruntime": ort_rows})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
