"""float32 matmul: the hand-written schedule (autosched.ops.schedules.matmul_cpu) against numpy
(OpenBLAS) on 1 and 2 threads, measured side by side; plus the untuned default schedule.

Like with like: both write into a preallocated output (``np.matmul(a, b, out=c)``), both get one
untimed warm-up call before each timed round. The run is appended to results/matmul_SIZE.json.

    python benchmarks/bench_matmul.py [--size 1024] [--rounds 7] [--threads 1 2]
"""

from __future__ import annotations

import argparse

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
from autosched.ops.schedules import matmul_cpu  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    n = args.size
    wl = asc.get_workload("matmul", (n, n, n))
    flops = wl.flops()
    a, b = wl.random_inputs(0)
    c = np.zeros((n, n), np.float32)
    c_ref = np.zeros((n, n), np.float32)  # numpy's output, also preallocated
    print(f"matmul {n}x{n}x{n} float32; numpy BLAS: {blas_info()}")
    rows, record = [], {}
    for threads in args.threads:
        target = f"c -num-threads={threads}"
        tensors = wl.tensors()
        kernel = asc.build(matmul_cpu(tensors, target), tensors, target)
        kernel(a, b, c)
        np.testing.assert_allclose(c, wl.reference(a, b)[0], rtol=1e-3, atol=1e-3)
        number = max(1, int(0.2 / (flops / 100e9)))
        with threadpool_limits(threads):
            times = interleaved(
                {
                    "autosched": kernel_timer(kernel, [a, b, c], number),
                    "numpy": wall_timer(lambda: np.matmul(a, b, out=c_ref), number),
                },
                args.rounds,
            )
        ours, ref = median(times["autosched"]), median(times["numpy"])
        rows.append([threads, flops / ours / 1e9, flops / ref / 1e9, f"{ref / ours:.2f}"])
        record[f"{threads}_threads"] = {
            "autosched_s": times["autosched"],
            "numpy_s": times["numpy"],
            "ratio_vs_numpy": ref / ours,
        }
    tensors = wl.tensors()
    naive = asc.build(asc.create_schedule(tensors[-1]), tensors, "c -num-threads=1")
    naive(a, b, c)  # warm-up
    naive_s = median(naive.time(a, b, c, number=1, repeat=3))
    record["untuned_1_thread_s"] = naive_s
    print_table(["threads", "autosched GFLOP/s", "numpy GFLOP/s", "autosched/numpy"], rows)
    print(f"untuned default schedule, 1 thread: {flops / naive_s / 1e9:.2f} GFLOP/s")
    np.testing.assert_allclose(c_ref, c, rtol=1e-3, atol=1e-3)  # the reference computed the same
    payload = {"blas": blas_info(), "flops": flops, "rounds": args.rounds, **record}
    path = write_results(f"matmul_{n}", payload)
    print(f"results: {path}")


if __name__ == "__main__":
    main()
