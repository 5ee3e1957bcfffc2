"""Tuning: how many trials a minute, where the time goes, and how good random search gets.

For matmul 512^3 and the ResNet layer conv2d (64,56,56,64,3,1,1), on all cores of this machine:
1. random search over the generated space for ``--trials`` measurements (resumable: the logs stay
   in benchmarks/results/logs/), reporting trials per minute and the share of wall time spent
   outside compile + run (the Python layers: sampling, lowering, emitting, logging; goal < 15%);
2. the best program found, timed side by side with numpy/OpenBLAS (matmul) or PyTorch/oneDNN
   (conv2d) on the same number of threads, interleaved rounds, medians. Both get one untimed
   warm-up call before each timed round; numpy writes into a preallocated output (``out=``),
   PyTorch's conv2d has no ``out=`` and allocates its output.

The run is appended to results/tune.json (tune_CASE.json with ``--only``, or ``--results-name``).

    python benchmarks/bench_tune.py [--trials 1000] [--only matmul|conv2d] [--rounds 7]
                                    [--log-dir DIR] [--results-name NAME]
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

from common import clean_blas_env

clean_blas_env()

import numpy as np  # noqa: E402
from common import (  # noqa: E402
    blas_info,
    interleaved,
    kernel_timer,
    median,
    print_table,
    wall_timer,
    write_results,
)
from threadpoolctl import threadpool_limits  # noqa: E402

import autosched as asc  # noqa: E402

THREADS = os.cpu_count() or 1
TARGET = f"c -num-threads={THREADS}"
CASES = {
    "matmul": ("matmul", (512, 512, 512)),
    "conv2d": ("conv2d_nchw", (1, 64, 56, 56, 64, 3, 3, 1, 1)),
}
LOGS = Path(__file__).parent / "results" / "logs"  # default --log-dir


def reference_timer(label: str, inputs: list[np.ndarray]) -> tuple[str, Callable[[], float]]:
    """The library that does the same operation, as a timer (seconds per call)."""
    if label == "matmul":
        a, b = inputs
        out = np.empty((a.shape[0], b.shape[1]), np.float32)
        return "numpy", wall_timer(lambda: np.matmul(a, b, out=out), 20)
    import torch

    torch.set_num_threads(THREADS)
    tx, tw = (torch.from_numpy(x) for x in inputs)
    return "pytorch", wall_timer(lambda: torch.nn.functional.conv2d(tx, tw, padding=1), 20)


def run_case(label: str, trials: int, rounds: int, logs: Path) -> dict[str, object]:
    name, args = CASES[label]
    task = asc.Task(name, args, target=TARGET)
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"tune_{label}.jsonl"
    print(f"\n{task}: random search, {trials} trials, log {log}", flush=True)
    result = asc.tune(task, trials=trials, log=log, tuner="random", space="sketch", seed=0, progress=True)
    inside = result.build_time_s + result.run_time_s
    outside = 1 - inside / result.wall_time_s if result.wall_time_s else float("nan")
    per_minute = 60 * result.new_trials / result.wall_time_s if result.new_trials else float("nan")
    kernel = asc.load_best(log, task)
    inputs = task.workload.random_inputs(0)
    outputs = [np.zeros(t.shape, t.dtype) for t in task.workload.outputs]
    ref_name, ref_timer = reference_timer(label, inputs)
    with threadpool_limits(THREADS):
        times = interleaved(
            {
                "autosched": kernel_timer(kernel, [*inputs, *outputs], min_repeat_ms=100),
                ref_name: ref_timer,
            },
            rounds,
        )
    ours, ref = median(times["autosched"]), median(times[ref_name])
    flops = task.flops()
    return {
        "case": label,
        "workload": str(task.workload),
        "target": str(task.target),
        "trials": result.trials,
        "new_trials": result.new_trials,
        "valid_trials": result.valid_trials,
        "errors": result.errors,
        "wall_s": result.wall_time_s,
        "trials_per_minute": per_minute,
        "outside_share": outside,
        "reference": ref_name,
        "autosched_gflops": flops / ours / 1e9,
        "reference_gflops": flops / ref / 1e9,
        "ratio": ref / ours,
        "raw_seconds": times,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--only", choices=sorted(CASES))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--log-dir", type=Path, default=LOGS, help="where the (resumable) logs go")
    parser.add_argument("--results-name", help="results/NAME.json to append to (default: tune or tune_CASE)")
    opts = parser.parse_args()
    print(f"threads {THREADS}; BLAS: {blas_info()}")
    labels = [label for label in CASES if opts.only in (None, label)]
    rows = [run_case(label, opts.trials, opts.rounds, opts.log_dir) for label in labels]
    print()
    print_table(
        ["case", "trials", "valid", "trials/min", "outside %", "GFLOP/s", "ref", "ref GFLOP/s", "ratio"],
        [
            [r["case"], r["trials"], r["valid_trials"], r["trials_per_minute"], 100 * r["outside_share"],
             r["autosched_gflops"], r["reference"], r["reference_gflops"], f"{r['ratio']:.2f}x"]
            for r in rows
        ],
    )
    name = opts.results_name or ("tune" if opts.only is None else f"tune_{opts.only}")
    payload = {
        "threads": THREADS,
        "blas": blas_info(),
        "trials_requested": opts.trials,
        "rounds": opts.rounds,
        "kernel_cache": os.environ.get("AUTOSCHED_CACHE", "default"),
        "rows": rows,
    }
    path = write_results(name, payload)
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
