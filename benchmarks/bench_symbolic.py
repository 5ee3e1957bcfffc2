"""Symbolic shapes: the README's hand-written matmul schedule built once with symbolic M, N, K
against the same schedule built for each fixed size, timed side by side (interleaved rounds,
medians). Goal: the symbolic kernel at >= 0.9x the speed of the fixed one.

    python benchmarks/bench_symbolic.py [--rounds 7] [--threads 2] [--sizes 1024x1024x1024 1023x1021x1019]
"""

from __future__ import annotations

import argparse

from common import clean_blas_env

clean_blas_env()

import numpy as np  # noqa: E402
from common import interleaved, kernel_timer, median, print_table, write_results  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.expr import Extent  # noqa: E402


def readme_matmul(M: Extent, N: Extent, K: Extent) -> tuple[asc.Schedule, list[asc.Tensor]]:
    """The README's schedule: a 6x64 register tile computed at the row block, unrolled k by 4."""
    A = asc.placeholder((M, K), name="A")
    B = asc.placeholder((K, N), name="B")
    k = asc.reduce_axis(K, name="k")
    C = asc.compute((M, N), lambda i, j: asc.sum(A[i, k] * B[k, j], axis=k), name="C")
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
    s[C].parallel(io)
    return s, [A, B, C]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sizes", nargs="+", default=["1024x1024x1024", "1023x1021x1019"])
    args = ap.parse_args()
    target = f"c -num-threads={args.threads}"
    sym = asc.build(*readme_matmul(asc.size_var("M"), asc.size_var("N"), asc.size_var("K")), target=target)
    rng = np.random.default_rng(0)
    rows, results = [], []
    for text in args.sizes:
        m, n, k = (int(x) for x in text.split("x"))
        fixed = asc.build(*readme_matmul(m, n, k), target=target)
        a = rng.random((m, k), dtype=np.float32)
        b = rng.random((k, n), dtype=np.float32)
        c = np.empty((m, n), np.float32)
        sym(a, b, c)
        assert np.allclose(c, a @ b, rtol=1e-3, atol=1e-3), "symbolic kernel: wrong result"
        fixed(a, b, c)
        assert np.allclose(c, a @ b, rtol=1e-3, atol=1e-3), "fixed kernel: wrong result"
        times = interleaved(
            {
                "symbolic": kernel_timer(sym, [a, b, c], min_repeat_ms=200),
                "fixed": kernel_timer(fixed, [a, b, c], min_repeat_ms=200),
            },
            args.rounds,
        )
        t_sym, t_fix = median(times["symbolic"]), median(times["fixed"])
        gflop = 2.0 * m * n * k / 1e9
        rows.append([text, f"{t_fix * 1e3:.2f}", f"{t_sym * 1e3:.2f}", f"{gflop / t_fix:.1f}",
                     f"{gflop / t_sym:.1f}", f"{t_fix / t_sym:.3f}"])  # fmt: skip
        results.append({"size": [m, n, k], "fixed_s": times["fixed"], "symbolic_s": times["symbolic"],
                        "speed_ratio": t_fix / t_sym})  # fmt: skip
    headers = ["M x N x K", "fixed ms", "symbolic ms", "fixed GFLOP/s", "symbolic GFLOP/s", "sym/fixed speed"]
    print_table(headers, rows)
    write_results("symbolic", {"threads": args.threads, "rounds": args.rounds, "results": results})


if __name__ == "__main__":
    main()
