"""Tensorize: a matmul tensorized with the library's GEMM micro-kernel (``asc.intrin.matmul_ukernel``:
packed B panel, AVX-512/AVX2/NEON chosen at run time) against the best hand-written schedule
(``autosched.ops.schedules.matmul_cpu``) and numpy (OpenBLAS), timed in interleaved rounds (medians).

    python benchmarks/bench_tensorize.py [--rounds 7] [--threads 2] [--sizes 512 1024]
                                         [--mr 6] [--nr 16] [--kc 256]
"""

from __future__ import annotations

import argparse

from common import clean_blas_env

clean_blas_env()

import numpy as np  # noqa: E402
from common import blas_info, interleaved, kernel_timer, median, print_table, wall_timer, write_results  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.ops.schedules import matmul_cpu  # noqa: E402


def tensors(n: int) -> list[asc.Tensor]:
    A = asc.placeholder((n, n), name="A")
    B = asc.placeholder((n, n), name="B")
    k = asc.reduce_axis(n, name="k")
    C = asc.compute((n, n), lambda i, j: asc.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sizes", type=int, nargs="+", default=[512, 1024])
    ap.add_argument("--mr", type=int, default=6)
    ap.add_argument("--nr", type=int, default=16)
    ap.add_argument("--kc", type=int, default=256)
    args = ap.parse_args()
    target = f"c -num-threads={args.threads}"
    rng = np.random.default_rng(0)
    rows, results = [], []
    for n in args.sizes:
        args_t = tensors(n)
        tens = asc.build(
            asc.intrin.matmul_ukernel(args_t, args.mr, args.nr, args.kc, target=target), args_t, target
        )
        hand = asc.build(matmul_cpu(args_t, target), args_t, target)
        a = rng.random((n, n), dtype=np.float32)
        b = rng.random((n, n), dtype=np.float32)
        c = np.empty((n, n), np.float32)
        for name, kernel in (("tensorized", tens), ("hand-written", hand)):
            c[:] = np.nan
            kernel(a, b, c)
            assert np.allclose(c, a @ b, rtol=1e-3, atol=1e-3), f"{name} kernel: wrong result"
        calls = max(1, 2**31 // n**3)  # numpy: about 4 GFLOP per timing, like min_repeat_ms for the kernels
        with threadpool_limits(args.threads):  # numpy on as many threads as the kernels
            times = interleaved(
                {
                    "tensorized": kernel_timer(tens, [a, b, c], min_repeat_ms=200),
                    "hand-written": kernel_timer(hand, [a, b, c], min_repeat_ms=200),
                    "numpy": wall_timer(lambda a=a, b=b, c=c: np.matmul(a, b, out=c), number=calls),
                },
                args.rounds,
            )
        gflop = 2.0 * n**3 / 1e9
        med = {name: median(ts) for name, ts in times.items()}
        speed = [f"{med[k] / med['tensorized']:.2f}" for k in ("hand-written", "numpy")]
        rows.append([f"{n}^3", *(f"{gflop / med[k]:.1f}" for k in times), *speed])
        results.append({"n": n, "seconds": times, "gflops": {k: gflop / v for k, v in med.items()}})
    headers = [
        "matmul",
        "tensorized GFLOP/s",
        "hand-written GFLOP/s",
        "numpy GFLOP/s",
        "tens/hand",
        "tens/numpy",
    ]
    print_table(headers, rows)
    print(f"numpy BLAS: {blas_info()}; micro-kernel {args.mr}x{args.nr}x{args.kc}, {args.threads} threads")
    payload = {"threads": args.threads, "rounds": args.rounds, "ukernel": [args.mr, args.nr, args.kc]}
    write_results("tensorize", {**payload, "blas": blas_info(), "results": results})


if __name__ == "__main__":
    main()
