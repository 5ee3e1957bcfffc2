"""Calling kernels from an application: threads, and sharing the cores with numpy's BLAS.

Two measurements, each configuration in a fresh process (thread-pool settings are read when the
libraries load):

1. GIL: two threads calling a 1-thread kernel at once vs the same two calls in a row (matmul 512^3,
   the README's schedule, target "c -num-threads=1"). About 0.5 means the calls ran in parallel.
2. Interleaving: the README's 2-thread matmul kernel and ``np.matmul(a, b, out=c)`` called in turn,
   call by call, vs each alone (medians of --calls calls, wall time seen by the application), under
   the thread-pool settings of ``CONFIGS``: what spins after a call (OpenMP's and OpenBLAS's idle
   workers) takes the cores the other library needs.

    python benchmarks/bench_threads.py [--calls 50] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BLAS_ENV, blas_info, cpu_name, median, print_table, write_results  # noqa: E402

#: environment settings tried, by name (each on top of the caller's environment)
CONFIGS: dict[str, dict[str, str]] = {
    "default": {},
    "OMP_WAIT_POLICY=passive": {"OMP_WAIT_POLICY": "passive"},
    "OPENBLAS_THREAD_TIMEOUT=4": {"OPENBLAS_THREAD_TIMEOUT": "4"},
    "both": {"OMP_WAIT_POLICY": "passive", "OPENBLAS_THREAD_TIMEOUT": "4"},
    "autosched.share_cores()": {"AUTOSCHED_SHARE_CORES": "1"},
}

N = 512


def _kernel(num_threads: int):  # type: ignore[no-untyped-def]
    import autosched as asc

    A = asc.placeholder((N, N), name="A")
    B = asc.placeholder((N, N), name="B")
    k = asc.reduce_axis(N, name="k")
    C = asc.compute((N, N), lambda i, j: asc.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = asc.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 6, 64)
    s[CC].compute_at(s[C], io)
    ci, cj = s[CC].op.axis
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], 4)
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].unroll(ki)
    s[CC].unroll(ci)
    s[CC].vectorize(cj)
    s[C].vectorize(ji)
    if num_threads > 1:
        s[C].parallel(io)
    return asc.build(s, [A, B, C], target=f"c -num-threads={num_threads}")


def _in_threads(fn, arg_lists):  # type: ignore[no-untyped-def]
    """Call ``fn`` once per argument list, each call in its own thread, and wait for all."""
    import threading

    threads = [threading.Thread(target=fn, args=args) for args in arg_lists]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _child(calls: int) -> dict[str, float]:
    """One configuration's figures (runs in a fresh process)."""
    import autosched  # noqa: F401, I001  (before numpy: AUTOSCHED_SHARE_CORES=1 configures the pools)
    import numpy as np

    rng = np.random.default_rng(0)
    a, b = (rng.random((N, N), dtype=np.float32) for _ in range(2))
    c, c2 = np.empty((N, N), np.float32), np.empty((N, N), np.float32)
    f1, f2 = _kernel(1), _kernel(2)

    def seconds(fn) -> float:  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    def blas() -> None:
        np.matmul(a, b, out=c2)

    out: dict[str, float] = {}
    # 1. two threads at once vs two calls in a row, 1-thread kernel (separate outputs)
    c3 = np.empty_like(c)
    f1(a, b, c)
    row, pair = [], []
    for _ in range(max(5, calls // 5)):
        row.append(seconds(lambda: (f1(a, b, c), f1(a, b, c3))))
        pair.append(seconds(lambda: _in_threads(f1, [(a, b, c), (a, b, c3)])))
    out["two_in_a_row_ms"], out["two_threads_ms"] = 1e3 * median(row), 1e3 * median(pair)
    # 2. alone, then interleaved call by call
    for fn in (f1, f2):
        fn(a, b, c)
    blas()
    time.sleep(0.5)
    out["kernel_alone_ms"] = 1e3 * median([seconds(lambda: f2(a, b, c)) for _ in range(calls)])
    time.sleep(0.5)
    out["numpy_alone_ms"] = 1e3 * median([seconds(blas) for _ in range(calls)])
    time.sleep(0.5)
    mixed_k, mixed_n = [], []
    for _ in range(calls):
        mixed_k.append(seconds(lambda: f2(a, b, c)))
        mixed_n.append(seconds(blas))
    out["kernel_mixed_ms"], out["numpy_mixed_ms"] = 1e3 * median(mixed_k), 1e3 * median(mixed_n)
    assert np.allclose(c, c2, rtol=1e-3, atol=1e-3)
    out["blas"] = blas_info()  # type: ignore[assignment]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes per configuration")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.calls)))
        return
    base = {k: v for k, v in os.environ.items() if k not in BLAS_ENV}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in CONFIGS}
    for _ in range(args.rounds):  # configurations interleaved round by round
        for name, extra in CONFIGS.items():
            proc = subprocess.run(
                [sys.executable, __file__, "--child", "--calls", str(args.calls)],
                env={**base, **extra}, capture_output=True, text=True, check=True,
            )
            runs[name].append(json.loads(proc.stdout.strip().splitlines()[-1]))
    blas = str(runs["default"][0].pop("blas"))
    for rs in runs.values():
        for r in rs:
            r.pop("blas", None)
    keys = list(runs["default"][0])
    table = {name: {k: median([r[k] for r in rs]) for k in keys} for name, rs in runs.items()}
    print(f"{cpu_name()}, {os.cpu_count()} cores, BLAS: {blas}; matmul {N}^3, medians of "
          f"{args.calls} calls, {args.rounds} processes per configuration (ms)")
    print_table(
        ["configuration", "2 calls in a row", "2 threads", "kernel alone", "kernel mixed", "numpy alone",
         "numpy mixed"],
        [[name, *(t[k] for k in ("two_in_a_row_ms", "two_threads_ms", "kernel_alone_ms", "kernel_mixed_ms",
                                 "numpy_alone_ms", "numpy_mixed_ms"))] for name, t in table.items()],
    )
    path = write_results("threads", {"command": " ".join(sys.argv), "calls": args.calls, "configs": table,
                                     "raw": runs})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
