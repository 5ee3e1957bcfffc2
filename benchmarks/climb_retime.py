"""Re-time the bests of bench_climb.py runs from two (or more) log directories side by side: each
best in a fresh process per round, the sides alternating, with the calibration kernel timed beside
them (``autosched.runner.fresh.alternate``), so runs tuned minutes apart on a shared, drifting
machine compare by what their programs do now, not by the load they were tuned under.

    python benchmarks/climb_retime.py --logs DIR_BEFORE DIR_AFTER [--cases ...] [--rounds 3] [--threads N]

Prints per case each side's median GFLOP/s over the rounds and, per round, the last side's
speed-up over the first (as timed, and calibrated); writes results/climb_retime.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path
from typing import Any

from common import clean_blas_env

clean_blas_env()

from climb_ops import CASES  # noqa: E402
from common import cpu_name, print_table, write_results  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.records import best_record, is_remeasurement, load_records  # noqa: E402
from autosched.runner import LocalBuilder, MeasureInput, MeasureOption  # noqa: E402
from autosched.runner.calibration import calibration_library  # noqa: E402
from autosched.runner.fresh import Side, alternate, speedups  # noqa: E402


def side(name: str, task: asc.Task, log: Path, builder: LocalBuilder) -> Side:
    """The best trial of ``log`` (re-measurements left out), built, as a side."""
    best = best_record([r for r in load_records(log) if not is_remeasurement(r)], task)
    (build,) = builder.build([MeasureInput(task, tuple(best.steps))])
    if build.lib_path is None:
        raise RuntimeError(f"{log}: the best program does not build: {build.error_msg}")
    return Side(name, build.lib_path, build.func_name, build.arg_specs)


def run_case(label: str, opts: argparse.Namespace) -> dict[str, Any]:
    name, args = CASES[label]
    task = asc.Task(name, args, target=opts.target)
    names = [d.name for d in opts.logs]
    with LocalBuilder() as builder:
        sides = [side(n, task, d / f"{label}_s{opts.seed}.jsonl", builder)
                 for n, d in zip(names, opts.logs, strict=True)]
    inputs = task.workload.random_inputs(0)
    rounds = alternate(sides, inputs, calibration_library(task.target), rounds=opts.rounds, inner=opts.inner,
                       option=MeasureOption(min_repeat_ms=50))
    flops = task.flops()
    gflops = {n: flops / statistics.median(r[n].median for r in rounds) / 1e9 for n in names}
    per_round = speedups(rounds, names[-1], names[0])
    return {"case": label, "gflops": gflops,
            "speedup_rounds": [{"timed": t, "calibrated": c} for t, c in per_round]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logs", type=Path, nargs="+", required=True, help="bench_climb.py log directories")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--inner", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="the target's threads")
    opts = parser.parse_args()
    opts.target = f"c -num-threads={opts.threads}"
    print(f"{cpu_name()}; {opts.target}; load {os.getloadavg()[0]:.2f} at start", flush=True)
    cases = [run_case(label, opts) for label in opts.cases.split(",")]
    names = [d.name for d in opts.logs]
    rows = [[c["case"], *[f"{c['gflops'][n]:.1f}" for n in names],
             " ".join(f"{r['timed']:.2f}" for r in c["speedup_rounds"]),
             " ".join(f"{r['calibrated']:.2f}" for r in c["speedup_rounds"])] for c in cases]
    print(f"\nmedian GFLOP/s of {opts.rounds} rounds, one fresh process per side and round; "
          f"load {os.getloadavg()[0]:.2f} at the end")
    print_table(["case", *names, f"{names[-1]}/{names[0]} timed", "calibrated"], rows)
    path = write_results("climb_retime", {"cpu": cpu_name(), "target": opts.target, "rounds": opts.rounds,
                                          "logs": [str(d) for d in opts.logs], "cases": cases})
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
