"""Whole networks: ResNet-18 (batch 1, NCHW, fp32) tuned with the task scheduler, end to end.

python benchmarks/bench_network.py [--size 224] [--trials 200] [--threads 2] [--rounds 5]
                                   [--schedulers gradient round-robin] [--logs DIR] [--no-export]
                                   [--checkpoints 200 500] [--cold]

1. The ONNX model is written with onnx.helper (tests/graph_models.py, no download) at ``--size``².
2. Untuned: ``build_network`` with no log (each task's default schedule), and the same network with
   the naive default for the fused convolutions (the default before the hand-written one).
3. For each scheduler in ``--schedulers`` (``NAME`` or ``NAME:TRIALS``, e.g. ``round-robin:500``):
   ``tune_network`` with ``--trials`` (or its own TRIALS) trials in all (its
   log in ``--logs``, default benchmarks/results/network/; a log already there resumes), then
   ``build_network`` from that log. The estimated end-to-end latency after every round is kept:
   the table gives the trials the gradient scheduler needed to reach round-robin's final estimate.
   With ``--checkpoints N ...`` the network is also built from the first N records of each log
   (the tuning as it stood after N trials) and timed with the others. With ``--cold`` every
   timed call of the tuning runs after a cache flush (:data:`COLD`; logs ``..._cold.jsonl``).
4. onnxruntime on the same model with ``--threads`` intra-op threads (autosched kernels run with
   as many OpenMP threads: target ``c -num-threads=N``), and PyTorch (CPU, eager, oneDNN
   convolutions; batch-norm folded) running the same ONNX graph node by node (benchmarks/
   torch_onnx.py) with as many threads, if PyTorch is installed (``pip install torch``).
5. The exported C library (``autosched export``) of the first scheduler's log: ``make run`` checks
   it against build_network's output and times ``model_run`` (best of 10); its workspace peak vs
   the sum of all intermediate tensors and scratch.

All networks are timed interleaved (median of ``--rounds`` rounds of wall time per call). Results
are appended to benchmarks/results/network.json.
"""

from __future__ import annotations

import argparse
import itertools
import math
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import RESULTS, clean_blas_env, interleaved, median, print_table, wall_timer, write_results

clean_blas_env()

import numpy as np  # noqa: E402  (after clean_blas_env)

import autosched as asc  # noqa: E402
from autosched.export.network import export_network, write_network  # noqa: E402
from autosched.graph import epilogue, layout  # noqa: E402
from autosched.ops.schedules import SCHEDULES  # noqa: E402
from autosched.records import is_remeasurement, load_records  # noqa: E402
from autosched.runner.measure import MeasureOption  # noqa: E402
from autosched.search.scheduler import Round  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import graph_models  # noqa: E402  (the ONNX model writer of the tests)
from torch_onnx import torch_runner  # noqa: E402


def naive_conv_network(graph: asc.graph.Graph, target: str) -> asc.graph.Network:
    """The untuned network with the fused convolutions on the naive schedule (epilogue inlined)."""
    names = ("fused_conv2d", "fused_conv2d_packed")
    hand = {name: SCHEDULES[name] for name in names}
    SCHEDULES.update(dict.fromkeys(names, epilogue.inline_default))
    try:
        return asc.build_network(graph, target=target)
    finally:
        SCHEDULES.update(hand)


def unpacked_network(graph: asc.graph.Graph, target: str) -> asc.graph.Network:
    """The untuned network with the convolution kernels as the model has them (K, C, R, S): the
    hand-written NCHW direct convolution vectorized along output rows, as before weights were
    packed by output-channel blocks (``autosched.graph.layout``)."""
    packs = layout.packs_weights
    layout.packs_weights = lambda _target: False
    try:
        return asc.build_network(graph, target=target)
    finally:
        layout.packs_weights = packs


#: ``--cold``: every timed call after the caches are flushed (TVM's ``enable_cpu_cache_flush``), as
#: a layer runs in a network: its weights and inputs are not in cache when it starts
COLD = MeasureOption(number=1, repeat=10, min_repeat_ms=0, flush_cache=True)


def tune(
    graph: asc.graph.Graph, scheduler: str, trials: int, log: Path, target: str, option: MeasureOption | None
) -> dict[str, Any]:
    """Tune with ``scheduler``; the estimated latency after each round and the wall time."""
    curve: list[tuple[int, float]] = []

    def keep(r: Round) -> None:
        curve.append((r.total_trials, r.latency * 1e3))

    start = time.perf_counter()
    resumed = log.exists() and log.stat().st_size > 0
    result = asc.tune_network(graph, trials=trials, log=log, scheduler=scheduler, target=target,
                              progress=True, callback=keep, option=option)
    if resumed:  # rounds from an earlier run are not replayed: the curve comes from the log
        curve = curve_from_log(graph, log, target)
    return {"scheduler": scheduler, "trials": trials, "log": str(log), "curve": curve, "tasks": result.tasks,
            "wall_s": time.perf_counter() - start, "estimated_ms": result.latency_ms}


def scheduler_budget(text: str) -> tuple[str, int | None]:
    """``NAME`` or ``NAME:TRIALS`` of ``--schedulers``."""
    name, _, trials = text.partition(":")
    if name not in ("gradient", "round-robin") or (trials and not trials.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r}: give gradient or round-robin, optionally :TRIALS")
    return name, int(trials) if trials else None


def log_prefix(log: Path, n: int) -> Path:
    """A copy of the first ``n`` records of ``log`` (the log after ``n`` trials), next to it."""
    out = log.with_name(f"{log.stem}.first{n}.jsonl")
    with log.open() as src:
        out.write_text("".join(itertools.islice(src, n)))
    return out


def curve_from_log(graph: asc.graph.Graph, log: Path, target: str, step: int = 10) -> list[tuple[int, float]]:
    """The estimated end-to-end latency (ms) after every ``step`` records of ``log``, as the task
    scheduler computes it (sum of weight x each task's best median so far; inf while a task has
    none): the curve of a run that is resumed here rather than tuned."""
    tasks = asc.graph.network_tasks(graph, target)
    weights = {t.workload: t.weight for t in asc.graph.extract_tasks(graph, target)}
    index = {(t.workload.key, str(t.target)): i for i, t in enumerate(tasks)}
    best = [math.inf] * len(tasks)
    curve = []
    records = [r for r in load_records(log) if not is_remeasurement(r)]
    for n, r in enumerate(records, 1):
        i = index.get((r.workload_key, r.target))
        if i is not None and r.ok:
            best[i] = min(best[i], r.median)
        if n % step == 0 or n == len(records):
            curve.append((n, 1e3 * sum(weights[t.workload] * b for t, b in zip(tasks, best, strict=True))))
    return curve


def trials_to_reach(curve: list[tuple[int, float]], goal: float) -> int | None:
    """The first trial count whose estimated latency is at most ``goal`` (None: never)."""
    return next((n for n, ms in curve if math.isfinite(ms) and ms <= goal), None)


def run_export(
    graph: asc.graph.Graph, log: Path | None, target: str, x: np.ndarray, out: Path
) -> dict[str, Any]:
    """Export the network as a C library, build it, check it and time ``model_run``."""
    export = export_network(graph, log, target=target)
    reference = asc.build_network(graph, log, target=target)(x)
    write_network(export, out, [x], [reference if isinstance(reference, np.ndarray) else reference[0]])
    done = subprocess.run(["make", "-s", "-C", str(out), "run"], capture_output=True, text=True, check=False)
    found = re.search(r"model_run ([0-9.]+) ms", done.stdout)
    return {
        "ok": done.returncode == 0 and found is not None, "model_run_ms": float(found[1]) if found else None,
        "output": (done.stdout + done.stderr).strip()[-400:], "workspace_peak": export.plan.peak,
        "intermediates_total": export.plan.total, "kernels": export.tasks, "tuned": export.tuned,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=224, help="input height and width (default 224)")
    ap.add_argument("--trials", type=int, default=200, help="trials per scheduler, in all (the issue: 1000)")
    ap.add_argument("--threads", type=int, default=2, help="threads of the kernels and of onnxruntime")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    ap.add_argument("--schedulers", nargs="*", type=scheduler_budget,
                    default=[("gradient", None), ("round-robin", None)],
                    help="schedulers to tune with, NAME or NAME:TRIALS (none: no tuning)")
    ap.add_argument("--logs", type=Path, default=RESULTS / "network", help="where the tuning logs go")
    ap.add_argument("--no-export", action="store_true", help="skip the exported C library")
    ap.add_argument("--checkpoints", type=int, nargs="*", default=[],
                    help="also time the networks built from each log's first N records")
    ap.add_argument("--cold", action="store_true",
                    help="tune with every timed call after a cache flush (1 call per repeat, 10 repeats)")
    args = ap.parse_args()
    import onnxruntime as ort

    target = f"c -num-threads={args.threads}"
    model = graph_models.resnet18(args.size)
    graph = asc.from_onnx(model)
    x = np.random.default_rng(0).standard_normal(graph.shapes["x"]).astype(np.float32)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = args.threads, 1
    session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    expected = session.run(None, {"x": x})[0]

    nets: dict[str, asc.graph.Network] = {}
    t0 = time.perf_counter()
    nets["untuned (hand-written conv default)"] = asc.build_network(graph, target=target)
    build_untuned = time.perf_counter() - t0
    nets["untuned (hand-written conv default, kernels not packed)"] = unpacked_network(graph, target)
    nets["untuned (naive conv default)"] = naive_conv_network(graph, target)
    args.logs.mkdir(parents=True, exist_ok=True)
    tuned: list[dict[str, Any]] = []
    for scheduler, budget in args.schedulers:
        trials = budget or args.trials
        log = args.logs / f"resnet18_{args.size}_{scheduler}_{trials}{'_cold' if args.cold else ''}.jsonl"
        tuned.append(tune(graph, scheduler, trials, log, target, COLD if args.cold else None))
        for n in sorted(c for c in args.checkpoints if c < trials):
            prefix = log_prefix(log, n)
            nets[f"tuned, {scheduler}, first {n} trials"] = asc.build_network(graph, prefix, target=target)
        nets[f"tuned, {scheduler}, {trials} trials"] = asc.build_network(graph, log, target=target)
    errors = {name: float(np.abs(np.asarray(net(x)) - expected).max()) for name, net in nets.items()}

    timers = {name: wall_timer(lambda net=net: net(x), 3) for name, net in nets.items()}
    timers["onnxruntime"] = wall_timer(lambda: session.run(None, {"x": x}), 3)
    try:
        pytorch = torch_runner(model, args.threads)
    except ImportError:
        print("PyTorch is not installed: no PyTorch column (pip install torch)")
    else:
        errors["pytorch"] = float(np.abs(pytorch(x) - expected).max())
        timers["pytorch"] = wall_timer(lambda: pytorch(x), 3)
    times = {name: median(ts) * 1e3 for name, ts in interleaved(timers, args.rounds).items()}
    ort_ms = times["onnxruntime"]
    tasks = len(next(iter(nets.values())).built)
    print(f"\nResNet-18, batch 1, {args.size}x{args.size}, fp32, {args.threads} threads; {tasks} tasks")
    torch_ms = times.get("pytorch", math.nan)
    rows = [[name, f"{ms:.2f}", f"{ms / ort_ms:.2f}", f"{ms / torch_ms:.2f}", f"{errors.get(name, 0.0):.1e}"]
            for name, ms in times.items()]
    print_table(["network", "ms / run", "x onnxruntime", "x PyTorch", "max |error|"], rows)

    payload: dict[str, Any] = {"size": args.size, "threads": args.threads, "times_ms": times,
                               "max_error": errors, "build_untuned_s": build_untuned, "tuning": tuned}
    if len(tuned) == 2 and tuned[0]["scheduler"] == "gradient":
        goal = tuned[1]["estimated_ms"]
        reach = trials_to_reach(tuned[0]["curve"], goal)
        payload["gradient_trials_to_round_robin_final"] = reach
        rr = tuned[1]["trials"]
        print(f"\nestimated end-to-end latency: gradient {tuned[0]['estimated_ms']:.2f} ms after "
              f"{tuned[0]['trials']} trials, round-robin {goal:.2f} ms after {rr}; gradient reached "
              f"round-robin's final estimate after {reach} trials"
              + (f" ({reach / rr:.0%} of {rr})" if reach else ""))
        for t in tuned:
            print(f"  {t['scheduler']}: tuning took {t['wall_s']:.0f} s")
    if not args.no_export:
        log = Path(tuned[0]["log"]) if tuned else None
        exp = run_export(graph, log, target, x, args.logs / f"export_{args.size}")
        payload["export"] = exp
        net_name = (f"tuned, {tuned[0]['scheduler']}, {tuned[0]['trials']} trials" if tuned
                    else "untuned (hand-written conv default)")  # the network the library exports
        status = "ok" if exp["ok"] else "FAILED: " + exp["output"]
        print(f"\nexported C library ({exp['kernels']} kernels, {exp['tuned']} tuned): {status}; model_run "
              f"{exp['model_run_ms']} ms (best of 10) vs build_network {times[net_name]:.2f} ms (median); "
              f"workspace peak {exp['workspace_peak'] / 2**20:.1f} MiB vs "
              f"{exp['intermediates_total'] / 2**20:.1f} MiB of intermediates and scratch")
    print(f"\nresults appended to {write_results('network', payload)}")


if __name__ == "__main__":
    main()
