"""Where a zoo model's time goes, kernel by kernel: in the network (``profile_network``) and alone.

python benchmarks/bench_network_kernels.py MODEL [--threads 2] [--batch 1] [--top 12] [--alone]

1. The network (untuned: every task's default schedule) called on ``--threads`` threads; each
   workload's time inside the call (all its occurrences), the best of 4 profiles, each started
   only once the CPUs were 90% idle for a second (this machine is shared: a busy core stalls every
   parallel kernel at its barrier, and the figures would measure the neighbours).
2. With ``--alone``: each task's kernel timed alone on one thread, in CPU time (the thread's own
   time, which other programs on the machine do not inflate), the best of 15 repeats, times its
   weight (how often the network runs it).

3. With ``--cpu``: the whole network and onnxruntime on one thread, in CPU time of the calling
   thread (both run there), median of 45 calls each: a comparison the neighbours cannot skew.

The model is ``benchmarks/results/zoo/MODEL_bBATCH.onnx`` (``zoo_models.py`` exports it).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

import numpy as np

import autosched as asc
from autosched.graph.fusion import fuse
from autosched.graph.layout import for_target
from autosched.graph.network import sample_inputs
from autosched.graph.profile import NetworkProfile, profile_network
from autosched.ops.schedules import default_schedule
from autosched.runner.compile import compile_shared
from autosched.runner.load import load_kernel
from autosched.task import Task

ZOO = Path(__file__).resolve().parent / "results" / "zoo"


def idle_share(seconds: float = 1.0) -> float:
    """The share of the CPUs' time that was idle over ``seconds`` (from /proc/stat)."""

    def snap() -> tuple[int, int]:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:9]]
        return sum(values), values[3]

    t1, i1 = snap()
    time.sleep(seconds)
    t2, i2 = snap()
    return (i2 - i1) / max(1, t2 - t1)


def network_profile(graph: asc.Graph, target: str) -> NetworkProfile:
    """The best of 4 idle-gated profiles of the untuned network."""
    net = asc.build_network(graph, target=target)
    best = None
    for _ in range(4):
        while idle_share() < 0.9:
            time.sleep(2)
        found = profile_network(net, sample_inputs(graph), calls=5, min_seconds=1.0)
        best = found if best is None or found.total < best.total else best
    assert best is not None
    return best


def alone_cpu_ms(task: Task) -> float:
    """CPU milliseconds per call of ``task``'s default kernel alone (best of 15 repeats)."""
    wl = task.workload
    source = task.source(default_schedule(wl, task.target)[0].steps)
    kernel = load_kernel(compile_shared(source, task.target), task.func_name, task.arg_specs())
    run = kernel.bind(*wl.random_inputs(1), *(np.zeros(t.shape, t.dtype) for t in wl.outputs))
    run()
    start = time.perf_counter()
    run()
    calls = max(1, int(0.01 / max(time.perf_counter() - start, 1e-6)))
    best = float("inf")
    for _ in range(15):
        start = time.thread_time()
        for _ in range(calls):
            run()
        best = min(best, (time.thread_time() - start) / calls)
    return best * 1e3


def cpu_against_onnxruntime(graph: asc.Graph, model: Path) -> tuple[float, float]:
    """Median CPU milliseconds of one call of the untuned network and of onnxruntime, 1 thread."""
    import onnxruntime as ort

    x = sample_inputs(graph)
    net = asc.build_network(graph, target="c -num-threads=1")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = 1, 1
    session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    feeds = {i.name: v for i, v in zip(session.get_inputs(), x, strict=True)}
    calls = {"autosched": lambda: net(*x), "onnxruntime": lambda: session.run(None, feeds)}
    times: dict[str, list[float]] = {k: [] for k in calls}
    for _ in range(3):  # interleaved blocks of 15 calls
        for name, call in calls.items():
            call()
            for _ in range(15):
                start = time.thread_time()
                call()
                times[name].append(time.thread_time() - start)
    mine, theirs = (float(np.median(times[k])) * 1e3 for k in calls)
    return mine, theirs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--alone", action="store_true", help="also time each kernel alone on one thread")
    ap.add_argument("--cpu", action="store_true", help="also compare CPU time with onnxruntime, 1 thread")
    args = ap.parse_args()
    model = ZOO / f"{args.model}_b{args.batch}.onnx"
    graph = asc.from_onnx(str(model))
    target = f"c -num-threads={args.threads}"
    counts = Counter(g.workload for g in fuse(for_target(graph, target)) if g.workload is not None)
    found = network_profile(graph, target)
    print(f"{args.model}: {len(counts)} tasks, {sum(counts.values())} kernel calls, {args.threads} threads: "
          f"{found.total * 1e3:.2f} ms a call ({found.outside * 1e3:.2f} ms outside the kernels)")
    print("| ms in the call | calls | workload |\n|---|---|---|")
    for wl, seconds in sorted(found.kernels.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"| {seconds * 1e3:.3f} | {counts[wl]} | `{wl}` |")
    if args.alone:
        rows = [(alone_cpu_ms(Task(wl, target="c -num-threads=1")), n, wl) for wl, n in counts.items()]
        total = sum(ms * n for ms, n, _ in rows)
        print(f"\nalone, 1 thread, CPU time: weight x best summed {total:.2f} ms")
        print("| weight x ms | weight | ms a call | workload |\n|---|---|---|---|")
        for ms, n, wl in sorted(rows, key=lambda r: -r[0] * r[1])[: args.top]:
            print(f"| {ms * n:.3f} | {n} | {ms:.4f} | `{wl}` |")
    if args.cpu:
        mine, theirs = cpu_against_onnxruntime(graph, model)
        print(f"\n1 thread, CPU ms a call (median of 45): autosched {mine:.2f}, onnxruntime {theirs:.2f} "
              f"({mine / theirs:.2f}x)")


if __name__ == "__main__":
    main()
