"""Measurement noise: how repeatable is one measurement on this machine?

The same program (matmul with the hand-written ``matmul_cpu`` schedule) is measured ``--runs``
times through LocalBuilder + LocalRunner, exactly as tuning measures a candidate, under a few
MeasureOption settings. For each setting the table shows the median of the runs' medians, the
fastest and slowest run, the coefficient of variation of the run medians (run-to-run noise), and
the within-run spread: (slowest - fastest repeat) / median repeat, the median over runs.

    python benchmarks/bench_noise.py [--size 512] [--threads 1] [--runs 10]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
from dataclasses import dataclass

from common import cpu_name, print_table, write_results

from autosched.ops.schedules import matmul_cpu
from autosched.runner import LocalBuilder, LocalRunner, MeasureInput, MeasureOption, measure_batch
from autosched.task import Task

SETTINGS = {
    "default (3 x 20 ms)": MeasureOption(),
    "5 x 100 ms": MeasureOption(repeat=5, min_repeat_ms=100),
    "3 x 20 ms, flush, 10 ms cool-down": MeasureOption(flush_cache=True, cooldown_ms=10),
}


@dataclass
class Noise:
    """The spread of ``runs`` measurements of one program (seconds per call)."""

    costs: list[list[float]]  # every run's repeats

    @property
    def medians(self) -> list[float]:
        return [statistics.median(c) for c in self.costs]

    @property
    def cv(self) -> float:
        """Coefficient of variation of the run medians."""
        return statistics.stdev(self.medians) / statistics.mean(self.medians)

    @property
    def within_run_spread(self) -> float:
        """Median over runs of (slowest - fastest repeat) / median repeat."""
        return statistics.median((max(c) - min(c)) / statistics.median(c) for c in self.costs)

    def summary(self) -> dict[str, float]:
        meds = self.medians
        return {
            "median_s": statistics.median(meds),
            "min_s": min(meds),
            "max_s": max(meds),
            "cv": self.cv,
            "within_run_spread": self.within_run_spread,
        }


def measure_noise(builder: LocalBuilder, inp: MeasureInput, option: MeasureOption, runs: int) -> Noise:
    """Measure ``inp`` ``runs`` times with ``option``, in one runner (as tuning does)."""
    with LocalRunner(option) as runner:
        results = [measure_batch(builder, runner, [inp])[0] for _ in range(runs)]
    bad = [r.error_msg for r in results if not r.ok]
    if bad:
        raise SystemExit(f"measurement failed: {bad[0]}")
    return Noise([list(r.costs) for r in results])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=512, help="matmul M = N = K")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    target = f"c -num-threads={args.threads}"
    task = Task("matmul", (args.size,) * 3, target)
    inp = MeasureInput(task, tuple(matmul_cpu(task.workload.tensors(), target).steps))
    rows, record = [], {}
    load_before = os.getloadavg()[0]
    with LocalBuilder() as builder:
        for label, option in SETTINGS.items():
            noise = measure_noise(builder, inp, option, args.runs)
            s = noise.summary()
            ms = [f"{1e3 * s[k]:.3f}" for k in ("median_s", "min_s", "max_s")]
            pct = [f"{100 * s[k]:.2f}" for k in ("cv", "within_run_spread")]
            rows.append([label, ms[0], task.flops() / s["median_s"] / 1e9, ms[1], ms[2], *pct])
            record[label] = {"option": dataclasses.asdict(option), **s, "costs": noise.costs}
    print(f"matmul {args.size}^3, hand-written schedule, {args.threads} thread(s), {args.runs} runs")
    load = (load_before, os.getloadavg()[0])  # other work on the machine is noise too
    print(f"{cpu_name()}, {target}; 1-minute load average {load[0]:.2f} before, {load[1]:.2f} after")
    headers = [
        "setting",
        "median ms",
        "GFLOP/s",
        "min ms",
        "max ms",
        "CV of medians %",
        "within-run spread %",
    ]
    print_table(headers, rows)
    payload = {
        "workload": task.workload_key,
        "target": str(task.target),
        "runs": args.runs,
        "load_average": load,
        "settings": record,
    }
    print(f"results: {write_results('noise', payload)}")


if __name__ == "__main__":
    main()
