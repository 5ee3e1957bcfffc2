"""Python-side cost per candidate: lower + emit of the tiled conv2d schedule (and matmul).

python benchmarks/bench_lower_emit.py [--repeat 50]
"""

from __future__ import annotations

import argparse
import time

from common import median, print_table, write_results

import autosched as asc
from autosched.emit_c import emit_c
from autosched.lower import lower
from autosched.ops.schedules import conv2d_nchw_cpu, matmul_cpu
from autosched.target import Target


def measure(make, args: tuple, repeat: int) -> tuple[float, float, float]:
    """Median seconds for (schedule construction, lowering, emission)."""
    target = Target.parse("c")
    wl = asc.get_workload(*args)
    tensors = wl.tensors()
    sched_s, lower_s, emit_s = [], [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        s = make(tensors, target)
        t1 = time.perf_counter()
        func = lower(s, tensors)
        t2 = time.perf_counter()
        emit_c(func, target.num_threads or 1, target.vector_bytes or 16)
        t3 = time.perf_counter()
        sched_s.append(t1 - t0)
        lower_s.append(t2 - t1)
        emit_s.append(t3 - t2)
    return median(sched_s), median(lower_s), median(emit_s)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    cases = {
        "conv2d_nchw(1,64,56,56,64,3,3,1,1)": (
            conv2d_nchw_cpu,
            ("conv2d_nchw", (1, 64, 56, 56, 64, 3, 3, 1, 1)),
        ),
        "matmul(1024,1024,1024)": (matmul_cpu, ("matmul", (1024, 1024, 1024))),
    }
    rows, record = [], {}
    for name, (make, wl_args) in cases.items():
        sch, low, emi = measure(make, wl_args, args.repeat)
        rows.append([name, sch * 1e3, low * 1e3, emi * 1e3, (low + emi) * 1e3])
        record[name] = {"schedule_ms": sch * 1e3, "lower_ms": low * 1e3, "emit_ms": emi * 1e3}
    print_table(["workload", "schedule ms", "lower ms", "emit ms", "lower+emit ms"], rows)
    print(f"results: {write_results('lower_emit', record)}")


if __name__ == "__main__":
    main()
