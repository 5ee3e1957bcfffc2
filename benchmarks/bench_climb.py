"""Trials-to-best curves of the default search (``asc.tune``: sketches, evolutionary search, XGBoost
model) on user-defined operators that have no hand-written schedule (benchmarks/climb_ops.py).

For each operator and seed one run is tuned to ``--trials`` trials; the table gives the best GFLOP/s
found after 16, 32, 64, 128, 256, ... trials (as measured during the run, the log read in order),
and how the search spent its trials: the share of measured programs that the model had planned
(the rest drawn at random), the model's pairwise ranking accuracy on its last batches, and how
many distinct tile-size choices the measured programs held (a search that keeps re-measuring
neighbours of one program has few). Results go to benchmarks/results/climb.json.

    python benchmarks/bench_climb.py [--cases matmul_at,conv_nhwc,...] [--trials 256] [--seeds 1]
        [--threads N] [--log-dir DIR] [--results-name climb]

``--trials 1000 --seeds 3`` is the full run. TVM MetaSchedule is not run by this script (see
bench_metaschedule.py for the side-by-side comparison in fresh processes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

from common import clean_blas_env

clean_blas_env()

from climb_ops import CASES  # noqa: E402
from common import cpu_name, print_table, write_results  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.records import is_remeasurement, load_records  # noqa: E402


def checkpoints(trials: int) -> list[int]:
    """16, 32, 64, ... up to ``trials`` (``trials`` itself last)."""
    out, n = [], 16
    while n < trials:
        out.append(n)
        n *= 2
    return [*out, trials]


def curve(log: Path, flops: int, marks: list[int]) -> list[float | None]:
    """Best GFLOP/s after each of ``marks`` trials, reading the log's trials in order."""
    best, seen, out = float("inf"), 0, []
    todo = list(marks)
    for rec in load_records(log):
        if is_remeasurement(rec):
            continue
        seen += 1
        if rec.error_no == 0 and rec.costs:
            best = min(best, statistics.median(rec.costs))
        while todo and seen >= todo[0]:
            out.append(flops / best / 1e9 if best < float("inf") else None)
            todo.pop(0)
    return out + [None] * len(todo)


def tile_choices(log: Path) -> int:
    """Distinct split factors (the tile sizes) among the log's programs."""
    seen: set[tuple[Any, ...]] = set()
    for rec in load_records(log):
        seen.add(tuple(str(s) for s in rec.steps if type(s).__name__ == "SplitStep"))
    return len(seen)


class Spending:
    """A tuning callback counting planned versus random programs and the model's late accuracy."""

    def __init__(self) -> None:
        self.planned = 0
        self.total = 0
        self.accuracy: list[float] = []

    def __call__(self, tuner: Any, candidates: list[Any], results: list[Any]) -> None:
        proposed = getattr(tuner, "proposed", None)  # a model-guided tuner's counts so far
        if proposed is not None:
            self.planned, self.total = proposed["planned"], proposed["planned"] + proposed["random"]
        quality = tuner.model_quality[-1] if tuner.model_quality else None
        if quality is not None and quality.pairwise_accuracy is not None:
            self.accuracy.append(quality.pairwise_accuracy)


def run(label: str, seed: int, opts: argparse.Namespace) -> dict[str, Any]:
    name, args = CASES[label]
    task = asc.Task(name, args, target=opts.target)
    log = opts.log_dir / f"{label}_s{seed}.jsonl"
    log.unlink(missing_ok=True)
    spend = Spending()
    start = time.perf_counter()
    result = asc.tune(task, trials=opts.trials, log=log, seed=seed, progress=False, callbacks=[spend],
                      remeasure=0)
    wall = time.perf_counter() - start
    marks = checkpoints(opts.trials)
    late = spend.accuracy[len(spend.accuracy) // 2:]
    return {"case": label, "workload": str(task.workload), "seed": seed, "trials": result.trials,
            "marks": marks, "gflops": curve(log, task.flops(), marks), "wall_s": wall,
            "planned_share": spend.planned / spend.total if spend.total else None,
            "late_pairwise_accuracy": statistics.mean(late) if late else None,
            "tile_choices": tile_choices(log), "errors": result.errors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--trials", type=int, default=256)
    parser.add_argument("--seeds", type=int, default=1, help="seeds 0..N-1 per operator")
    parser.add_argument("--log-dir", type=Path, default=Path("benchmarks/results/logs/climb"))
    parser.add_argument("--results-name", default="climb")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="the target's threads")
    opts = parser.parse_args()
    opts.target = f"c -num-threads={opts.threads}"
    opts.log_dir.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    print(f"{cpu_name()}; {opts.target}; load {load[0]:.2f} at start", flush=True)
    runs = []
    for label in opts.cases.split(","):
        for seed in range(opts.seeds):
            runs.append(one := run(label, seed, opts))
            print(f"  {label} s{seed}: " + " ".join(f"{m}:{g:.1f}" if g else f"{m}:-"
                                                   for m, g in zip(one["marks"], one["gflops"], strict=True))
                  + f"  ({one['wall_s']:.0f} s)", flush=True)
    marks = checkpoints(opts.trials)
    rows = []
    for r in runs:
        acc = r["late_pairwise_accuracy"]
        rows.append([r["case"], str(r["seed"]), *[f"{g:.1f}" if g else "-" for g in r["gflops"]],
                     f"{r['planned_share']:.2f}" if r["planned_share"] is not None else "-",
                     f"{acc:.2f}" if acc is not None else "-", str(r["tile_choices"])])
    print(f"\nbest GFLOP/s after N trials ({opts.target}); load {os.getloadavg()[0]:.2f} at the end")
    print_table(["case", "seed", *[str(m) for m in marks], "planned", "late acc", "tilings"], rows)
    path = write_results(opts.results_name, {"cpu": cpu_name(), "target": opts.target,
                                             "load_start": load[0], "load_end": os.getloadavg()[0],
                                             "runs": runs})
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
