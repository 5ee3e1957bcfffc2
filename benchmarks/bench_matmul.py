"""float32 matmul: the hand-written schedule (autosched.ops.schedules.matmul_cpu) against numpy
(OpenBLAS) on 1 and 2 threads, measured side by side; plus the untuned default schedule.

Like with like: both write into a preallocated output (``np.matmul(a, b, out=c)``), both get one
untimed warm-up call before each timed round. The run is appended to results/matmul_SIZE.json.

    python benchmarks/bench_matmul.py [--size 1024] [--rounds 7] [--threads 1 2]

``--case dense`` / ``--case batch_matmul`` time a network's layers instead (the fused workloads of
``build_network``: a dense layer with its bias and ReLU, attention's batched products) on 1 thread:
the untuned default before the hand-written one (the naive loop nest, epilogue inlined), the
hand-written default, and numpy writing into a preallocated output (the epilogue in place), as
medians of ``--rounds`` interleaved rounds. Appended to results/gemm_defaults.json.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

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
from autosched.graph import epilogue  # noqa: E402
from autosched.ops.schedules import default_schedule, matmul_cpu  # noqa: E402

#: the layers of ``--case``: (workload, args); prime sizes too, as a network's layers have them
LAYERS: dict[str, list[tuple[str, tuple[Any, ...]]]] = {
    "dense": [
        ("fused_dense", (1, 1000, 512, "bias")),  # ResNet's classifier, batch 1
        ("fused_dense", (16, 512, 512, "bias,relu")),
        ("fused_dense", (128, 768, 768, "bias,relu")),  # a transformer's projection, 128 tokens
        ("fused_dense", (127, 509, 257, "bias,relu")),
    ],
    "batch_matmul": [
        ("fused_batch_matmul", (12, 128, 128, 64, "")),  # attention: Q @ K.T over 12 heads
        ("fused_batch_matmul", (12, 128, 64, 128, "")),  # attention: P @ V
        ("fused_batch_matmul", (8, 97, 61, 53, "")),
    ],
}


def numpy_layer(wl: asc.Workload, inputs: list[np.ndarray], out: np.ndarray) -> Callable[[], object]:
    """The layer in numpy into ``out``: the product, then the epilogue (bias, relu) in place."""
    a, b, *extras = inputs
    rhs = b.T if wl.name == "fused_dense" else b
    steps = epilogue.parse(wl.args[-2])
    if not set(steps) <= {"bias", "relu"}:
        raise SystemExit(f"bench_matmul: no numpy form of the epilogue {wl.args[-2]!r}")

    def run() -> None:
        np.matmul(a, rhs, out=out)
        for step in steps:
            if step == "bias":
                np.add(out, extras[0], out=out)
            else:
                np.maximum(out, 0, out=out)

    return run


def layers_case(case: str, rounds: int) -> None:
    """Naive default vs hand-written default vs numpy on the layers of ``case``, 1 thread."""
    target = "c -num-threads=1"
    print(f"{case} layers, float32, 1 thread; numpy BLAS: {blas_info()}")
    rows, record = [], {}
    for name, wl_args in LAYERS[case]:
        wl = asc.get_workload(name, wl_args)
        flops, inputs = wl.flops(), wl.random_inputs(0)
        outs = {k: np.zeros(wl.outputs[0].shape, np.float32) for k in ("naive", "default", "numpy")}
        kernels = {
            "naive": asc.build(epilogue.inline_default(wl.tensors(), target), wl.tensors(), target),
            "default": asc.build(default_schedule(wl, target)[0], wl.tensors(), target),
        }
        ref = numpy_layer(wl, inputs, outs["numpy"])
        for label, kernel in kernels.items():
            kernel(*inputs, outs[label])
        ref()
        for got in outs.values():  # every contender computes the layer
            np.testing.assert_allclose(got, wl.reference(*inputs)[0], rtol=1e-3, atol=1e-3)
        fast = max(1, int(0.05 / (flops / 50e9)))
        with threadpool_limits(1):
            times = interleaved(
                {
                    "naive": kernel_timer(kernels["naive"], [*inputs, outs["naive"]], 1),
                    "default": kernel_timer(kernels["default"], [*inputs, outs["default"]], fast),
                    "numpy": wall_timer(ref, fast),
                },
                rounds,
            )
        med = {k: median(v) for k, v in times.items()}
        gflops = {k: flops / v / 1e9 for k, v in med.items()}
        rows.append([str(wl), gflops["naive"], gflops["default"], gflops["numpy"],
                     f"{med['naive'] / med['default']:.1f}", f"{med['numpy'] / med['default']:.2f}"])
        record[str(wl)] = {f"{k}_s": v for k, v in times.items()}
    print_table(["layer", "naive GFLOP/s", "default GFLOP/s", "numpy GFLOP/s", "default/naive",
                 "default/numpy"], rows)
    print(f"results: {write_results('gemm_defaults', {'case': case, 'rounds': rounds, 'layers': record})}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--case", choices=["matmul", *LAYERS], default="matmul",
                    help="matmul (default), or a network's dense / batch_matmul layers (1 thread)")
    args = ap.parse_args()
    if args.case != "matmul":
        layers_case(args.case, args.rounds)
        return
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
