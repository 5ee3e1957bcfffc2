"""Model-guided search on real hardware: the best program found at 64 and 256 trials.

For each case (matmul 512^3 and ResNet conv2d layers) and each tuner (``evolutionary`` with the
``xgb`` cost model, ``random``, the model-free ``ga``), several seeds tune on all cores of this
machine with real compiles and measurements. Every run is the search alone
(``measure_default=False``); ``--default`` adds runs whose first trial is the operator's
hand-written schedule (``asc.tune``'s default), and ``TUNER@template`` tunes the knob template
space instead of the sketch space. A run stops at each checkpoint (``--checkpoints``),
notes what it has, and resumes from its log for the next one, as a user's second command would.
At a checkpoint the best program is the log's best so far (re-measured programs count by their
re-measurement). Then every best program is timed side by side with the references, interleaved
rounds, medians: numpy/OpenBLAS for matmul; im2col + numpy (and PyTorch/oneDNN if installed) for
conv2d. The ``conv*p`` cases tune the same layers with the kernel packed by blocks of output
channels (``fused_conv2d_packed``, the layout a network's convolutions read on this CPU: 16 channels
with AVX-512, else 8; packed once, outside the timed call); the references get the kernel as the
model has it.

Also reported: the search overhead (wall time outside compile and run: sampling, lowering,
features, model fits and predictions, logging; each run compiles into its own empty kernel cache,
as a user's first run of a workload does, unless ``--kernel-cache shared``) and, with
``--transfer``, conv2d (128,28,28,128) tuned by ``evolutionary`` starting from a model fitted on
the other cases' logs; with ``--dataset DIR``, every case also tuned by ``evolutionary`` with the
logs of DIR (other workloads, made by ``make_dataset.py``) as transfer logs.

    python benchmarks/bench_guided.py [--cases matmul512,conv64] [--tuners evolutionary,random,ga]
        [--seeds 0,1,2] [--checkpoints 64,256] [--long-tuners evolutionary,random] [--transfer]
        [--dataset DIR] [--rounds 5] [--kernel-cache fresh|shared] [--log-dir DIR] [--results-name NAME]

Logs stay in ``--log-dir`` (default benchmarks/results/logs/guided/): a stopped run resumes.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import clean_blas_env

clean_blas_env()

import numpy as np  # noqa: E402
from common import (  # noqa: E402
    blas_info,
    cpu_name,
    fresh_kernel_cache,
    interleaved,
    kernel_timer,
    median,
    print_table,
    wall_timer,
    write_results,
)
from threadpoolctl import threadpool_limits  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.graph.fused import unpack_kernel  # noqa: E402
from autosched.graph.layout import conv_blocks  # noqa: E402
from autosched.records import is_remeasurement, load_records  # noqa: E402

THREADS = os.cpu_count() or 1
TARGET = f"c -num-threads={THREADS}"
#: the kernel block of a network's convolutions here: 16 channels with AVX-512, else 8
BLOCK = conv_blocks(TARGET)[0]
CASES: dict[str, tuple[str, tuple[int, ...]]] = {
    "matmul512": ("matmul", (512, 512, 512)),
    "matmul1024": ("matmul", (1024, 1024, 1024)),
    "conv64": ("conv2d_nchw", (1, 64, 56, 56, 64, 3, 3, 1, 1)),
    "conv128": ("conv2d_nchw", (1, 128, 28, 28, 128, 3, 3, 1, 1)),
    "conv256": ("conv2d_nchw", (1, 256, 14, 14, 512, 3, 3, 2, 1)),
    # the same layers with the kernel packed by blocks of output channels, as a network's
    # convolutions on this CPU read it (packed once, when the network is built: autosched.graph.layout)
    "conv64p": ("fused_conv2d_packed", (1, 64, 56, 56, 64, 3, 3, 1, 1, BLOCK, "")),
    "conv128p": ("fused_conv2d_packed", (1, 128, 28, 28, 128, 3, 3, 1, 1, BLOCK, "")),
    "conv256p": ("fused_conv2d_packed", (1, 256, 14, 14, 512, 3, 3, 2, 1, BLOCK, "")),
}
LOGS = Path(__file__).parent / "results" / "logs" / "guided"


def im2col_conv(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> Callable[[], np.ndarray]:
    """conv2d NCHW (batch 1) as one matrix product over an im2col copy of the input."""
    _, c, h, wd = x.shape
    k, _, r, s = w.shape
    oh, ow = (h + 2 * pad - r) // stride + 1, (wd + 2 * pad - s) // stride + 1
    padded = np.zeros((c, h + 2 * pad, wd + 2 * pad), np.float32)
    cols = np.empty((c, r, s, oh, ow), np.float32)
    w2 = np.ascontiguousarray(w.reshape(k, c * r * s))
    out = np.empty((k, oh * ow), np.float32)

    def run() -> np.ndarray:
        padded[:, pad : pad + h, pad : pad + wd] = x[0]
        for i in range(r):
            for j in range(s):
                cols[:, i, j] = padded[:, i : i + stride * oh : stride, j : j + stride * ow : stride]
        return np.matmul(w2, cols.reshape(c * r * s, oh * ow), out=out)

    return run


def references(name: str, args: tuple[int, ...], inputs: list[np.ndarray]) -> dict[str, Callable[[], float]]:
    """The libraries that do the same operation, as timers (seconds per call)."""
    if name == "matmul":
        a, b = inputs
        out = np.empty((a.shape[0], b.shape[1]), np.float32)
        return {"numpy": wall_timer(lambda: np.matmul(a, b, out=out), 10)}
    stride, pad = args[7], args[8]
    x, w = inputs
    if name == "fused_conv2d_packed":  # the libraries take the kernel as the model has it
        w = unpack_kernel(w)
    timers = {"im2col+numpy": wall_timer(im2col_conv(x, w, stride, pad), 10)}
    try:
        import torch
    except ImportError:
        return timers
    torch.set_num_threads(THREADS)
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)
    timers["pytorch"] = wall_timer(lambda: torch.nn.functional.conv2d(tx, tw, stride=stride, padding=pad), 10)
    return timers


def tune_run(task: asc.Task, log: Path, tuner: str, seed: int, checkpoints: list[int],
             transfer: list[Path], space: str = "sketch", default: bool = False) -> list[dict[str, Any]]:
    """Tune to each checkpoint in turn (resuming the log); what each one found and cost."""
    out = []
    for trials in checkpoints:
        result = asc.tune(task, trials=trials, log=log, tuner=tuner, seed=seed, transfer=transfer,
                          space=space, measure_default=default)
        inside = result.build_time_s + result.run_time_s
        out.append({
            "trials": result.trials,
            "new_trials": result.new_trials,
            "valid": result.valid_trials,
            "lines": len(load_records(log)),
            "wall_s": result.wall_time_s,
            "overhead": 1 - inside / result.wall_time_s if result.new_trials else None,
            "tuned_gflops": result.best_gflops,
        })
        print(f"  {tuner} seed {seed}: {result.trials} trials, best {result.best_gflops or 0:.1f} GFLOP/s "
              f"(as measured while tuning), {result.wall_time_s:.0f} s", flush=True)
    return out


def trial_speeds(log: Path, task: asc.Task) -> list[float]:
    """GFLOP/s of each trial of the log, in order (0 for failed ones; re-measurements left out)."""
    flops = task.flops()
    return [flops / r.median / 1e9 if r.ok else 0.0 for r in load_records(log) if not is_remeasurement(r)]


def trials_to(speeds: list[float], threshold: float) -> int | None:
    """The first trial whose speed reached ``threshold`` (1-based), None if none did."""
    return next((i + 1 for i, s in enumerate(speeds) if s >= threshold), None)


def run_case(label: str, opts: argparse.Namespace) -> dict[str, Any]:
    name, args = CASES[label]
    task = asc.Task(name, args, target=TARGET)
    print(f"\n{task}", flush=True)
    runs: list[dict[str, Any]] = []
    plans = [(t, s, opts.checkpoints if t in opts.long_tuners else opts.checkpoints[:1], [])
             for t in opts.tuners for s in opts.seeds]  # (tuner tag, seed, checkpoints, transfer logs)
    if opts.transfer and label == "conv128":
        others = [log for case in ("conv64", "conv256")
                  for log in sorted(opts.log_dir.glob(f"{case}_evolutionary_s*.jsonl"))
                  if not log.name.endswith(".model.jsonl")]  # not the model-quality sidecars
        plans += [("evolutionary+transfer", s, opts.checkpoints[:1], others) for s in opts.seeds]
    if opts.dataset:
        dataset = sorted(p for p in opts.dataset.glob("*.jsonl") if not p.name.endswith(".model.jsonl"))
        plans += [("evolutionary+dataset", s, opts.checkpoints[:1], dataset) for s in opts.seeds]
    if opts.default:
        plans += [(f"{t}+default", s, c, tr) for t, s, c, tr in plans if "+" not in t]
    for tag, seed, checkpoints, transfer in plans:
        tuner, _, space = tag.split("+")[0].partition("@")
        log = opts.log_dir / f"{label}_{tag.replace('@', '-')}_s{seed}.jsonl"
        default = "+default" in tag
        with fresh_kernel_cache(opts.kernel_cache == "fresh"):
            points = tune_run(task, log, tuner, seed, checkpoints, transfer, space or "sketch", default)
        runs.extend({"tuner": tag, "seed": seed, "log": str(log), **point} for point in points)
    inputs = task.workload.random_inputs(0)
    outputs = [np.zeros(t.shape, t.dtype) for t in task.workload.outputs]
    timers = references(name, args, inputs)
    for run in runs:
        kernel = asc.load_best(load_records(Path(run["log"]))[: run["lines"]], task)
        timers[f"{run['tuner']} s{run['seed']} @{run['trials']}"] = kernel_timer(
            kernel, [*inputs, *outputs], min_repeat_ms=50)
    with threadpool_limits(THREADS):
        times = interleaved(timers, opts.rounds)
    flops = task.flops()
    refs = {k: flops / median(v) / 1e9 for k, v in times.items() if "@" not in k}
    for run in runs:
        run["gflops"] = flops / median(times[f"{run['tuner']} s{run['seed']} @{run['trials']}"]) / 1e9
    best_seen = max(r["gflops"] for r in runs)
    speeds = {r["log"]: trial_speeds(Path(r["log"]), task) for r in runs}
    fastest = max(max(s, default=0.0) for s in speeds.values())
    for run in runs:  # trials to 90% of the fastest trial of any run, as measured while tuning
        run["trials_to_90"] = trials_to(speeds[run["log"]][: run["trials"]], 0.9 * fastest)
    return {"case": label, "workload": str(task.workload), "target": TARGET, "references": refs,
            "best_seen_gflops": best_seen, "runs": runs, "raw_seconds": times}


def summary_rows(case: dict[str, Any]) -> list[list[object]]:
    rows = []
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for run in case["runs"]:
        groups.setdefault((run["tuner"], run["trials"]), []).append(run)
    main_ref = next(iter(case["references"]))
    ref = case["references"][main_ref]
    for (tuner, trials), runs in groups.items():
        g = sorted(r["gflops"] for r in runs)
        over = [r["overhead"] for r in runs if r["overhead"] is not None]
        t90 = [r["trials_to_90"] for r in runs]
        rows.append([case["case"], tuner, trials, len(runs), g[0], median(g), g[-1],
                     f"{g[0] / ref:.2f}x {main_ref}", f"{100 * median(over):.1f}" if over else "-",
                     " ".join(str(t) if t is not None else ">" for t in t90)])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="matmul512,conv64,conv128,conv256")
    parser.add_argument("--tuners", default="evolutionary,random,ga",
                        help="tuner names, TUNER@SPACE for another space than sketch (xgb@template)")
    parser.add_argument("--long-tuners", default="evolutionary,random",
                        help="tuners that go on to the later checkpoints")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--checkpoints", default="64,256")
    parser.add_argument("--transfer", action="store_true", help="conv128 from the other convs' logs too")
    parser.add_argument("--dataset", type=Path, help="every case also with these logs as transfer logs")
    parser.add_argument("--default", action="store_true",
                        help="every tuner also with the hand-written schedule as its first trial")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kernel-cache", choices=("fresh", "shared"), default="fresh",
                        help="fresh: each (case, tuner, seed) run compiles into its own empty kernel "
                             "cache, as a first run would; shared: the user's cache, which earlier runs "
                             "may have filled (compiles then look free)")
    parser.add_argument("--log-dir", type=Path, default=LOGS)
    parser.add_argument("--results-name", default="guided")
    opts = parser.parse_args()
    opts.tuners = opts.tuners.split(",")
    opts.long_tuners = opts.long_tuners.split(",")
    opts.seeds = [int(s) for s in opts.seeds.split(",")]
    opts.checkpoints = [int(c) for c in opts.checkpoints.split(",")]
    opts.log_dir.mkdir(parents=True, exist_ok=True)
    print(f"{cpu_name()}; threads {THREADS}; BLAS: {blas_info()}")
    start = time.monotonic()
    cases = [run_case(label, opts) for label in opts.cases.split(",")]
    print()
    print_table(
        ["case", "tuner", "trials", "seeds", "worst GFLOP/s", "median", "best", "worst vs ref", "overhead %",
         "trials to 90%"],
        [row for case in cases for row in summary_rows(case)],
    )
    for case in cases:
        refs = ", ".join(f"{k} {v:.1f}" for k, v in case["references"].items())
        print(f"{case['case']}: references (GFLOP/s) {refs}")
    payload = {"cpu": cpu_name(), "threads": THREADS, "blas": blas_info(), "wall_s": time.monotonic() - start,
               "options": {k: v if not isinstance(v, Path) else str(v) for k, v in vars(opts).items()},
               "cases": cases}
    print(f"\nresults: {write_results(opts.results_name, payload)}")


if __name__ == "__main__":
    main()
