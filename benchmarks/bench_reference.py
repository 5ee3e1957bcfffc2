"""The generic numpy evaluator (autosched.reference): seconds and peak memory to evaluate a DAG.

Every candidate of a tuning run is checked against a reference; for workloads without a
hand-written numpy reference that is this evaluator, so it must stay fast on real layers. The
goal: a ResNet conv2d layer (64,56,56,64,3,1,1) in under 10 s on one core. (The test suite checks
only that the evaluator works in large chunks and bounded memory: it does not time anything.)

    python benchmarks/bench_reference.py [--rounds 3] [--only NAME]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

from common import clean_blas_env

clean_blas_env()

import numpy as np  # noqa: E402
from common import median, print_table, write_results  # noqa: E402

from autosched.ops import get_workload  # noqa: E402

CASES = {
    "conv2d(64,56,56,64,3,1,1)": ("conv2d_nchw", (1, 64, 56, 56, 64, 3, 3, 1, 1)),
    "matmul(512,512,512)": ("matmul", (512, 512, 512)),
    "softmax(64,4096)": ("softmax", (64, 4096)),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", choices=sorted(CASES))
    args = ap.parse_args()
    rows, record = [], {}
    for label, (name, wl_args) in CASES.items():
        if args.only not in (None, label):
            continue
        wl = get_workload(name, wl_args)
        arrays = wl.random_inputs(0)
        expected = wl.reference(*arrays)
        wl.evaluate(*arrays)  # warm-up
        seconds = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            wl.evaluate(*arrays)
            seconds.append(time.perf_counter() - t0)
        tracemalloc.start()
        got = wl.evaluate(*arrays)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)
        rows.append([label, 1e3 * median(seconds), peak / 1e6])
        record[label] = {"seconds": seconds, "peak_bytes": peak}
    print_table(["workload", "evaluate ms (median)", "peak MB"], rows)
    print(f"results: {write_results('reference', {'rounds': args.rounds, **record})}")


if __name__ == "__main__":
    main()
