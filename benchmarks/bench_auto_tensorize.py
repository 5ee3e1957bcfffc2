"""Auto-tensorization: user-defined int8 operators (no schedule written for them) tuned with the default
search, against the same operators in float32 tuned with as many trials: a matmul and an NHWC
convolution with a padding stage (ResNet's 28x28 128->128 3x3 layer).

    python benchmarks/bench_auto_tensorize.py [--ops matmul conv] [--trials 64] [--threads 2]
                                              [--rounds 7] [--logs DIR]

For each operator and type: ``asc.tune`` (a fresh log in ``--logs``, kept; an existing one is
resumed), then the best program of each log is loaded and the int8 and float32 kernels are timed
in alternating rounds in this process (both autosched kernels: no other runtime's threads),
each checked once (int8 equal to numpy's int32 result). The table gives median seconds per call
over the rounds, GOP/s (2 multiply-adds' operations per product), the ratio int8 / float32, and
whether the int8 best is a tensorized program (which intrinsic). Results are appended to
benchmarks/results/auto_tensorize.json.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import cpu_name, interleaved, kernel_timer, median, print_table, write_results

import autosched as asc
from autosched.expr import Expr, Var
from autosched.records import best_record

#: operator -> its arguments (the workloads below)
SHAPES: dict[str, tuple[int, ...]] = {"matmul": (512, 512, 512), "conv": (1, 28, 28, 128, 128, 3, 1)}


@asc.workload("bench_mm")
def bench_mm(m: int, n: int, k: int, dtype: str) -> list[asc.Tensor]:
    """``C = A @ W`` in ``dtype`` (int8: uint8 x int8 summed in int32)."""
    a_t, w_t, acc = ("uint8", "int8", "int32") if dtype == "int8" else (dtype, dtype, dtype)
    A = asc.placeholder((m, k), a_t, name="A")
    W = asc.placeholder((k, n), w_t, name="W")
    r = asc.reduce_axis(k, name="r")
    C = asc.compute((m, n), lambda i, j: asc.sum(A[i, r].astype(acc) * W[r, j].astype(acc), axis=r), name="C")
    return [A, W, C]


@asc.workload("bench_conv_nhwc")
def bench_conv_nhwc(
    n: int, h: int, w: int, c: int, f: int, kk: int, pad: int, dtype: str
) -> list[asc.Tensor]:
    """A stride-1 NHWC convolution with an explicit padding stage; weights ``[KH, KW, C, F]``."""
    a_t, w_t, acc = ("uint8", "int8", "int32") if dtype == "int8" else (dtype, dtype, dtype)
    X = asc.placeholder((n, h, w, c), a_t, name="X")
    Wt = asc.placeholder((kk, kk, c, f), w_t, name="Wt")
    inside = lambda y, x: asc.all(y >= pad, y < h + pad, x >= pad, x < w + pad)  # noqa: E731
    P = asc.compute(
        (n, h + 2 * pad, w + 2 * pad, c),
        lambda b, y, x, ch: asc.if_then_else(inside(y, x), X[b, y - pad, x - pad, ch], asc.const(0, a_t)),
        name="P",
    )
    ry, rx, rc = (asc.reduce_axis(e, name=nm) for e, nm in ((kk, "ry"), (kk, "rx"), (c, "rc")))
    oh, ow = h + 2 * pad - kk + 1, w + 2 * pad - kk + 1

    def out(b: Var, y: Var, x: Var, o: Var) -> Expr:
        product = P[b, y + ry, x + rx, rc].astype(acc) * Wt[ry, rx, rc, o].astype(acc)
        return asc.sum(product, axis=[ry, rx, rc])

    return [X, Wt, asc.compute((n, oh, ow, f), out, name="Out")]


def _task(op: str, dtype: str, threads: int) -> asc.Task:
    name = "bench_mm" if op == "matmul" else "bench_conv_nhwc"
    return asc.Task(name, (*SHAPES[op], dtype), target=f"c -num-threads={threads}")


def _operations(op: str) -> float:
    if op == "matmul":
        m, n, k = SHAPES[op]
        return 2.0 * m * n * k
    b, h, w, c, f, kk, pad = SHAPES[op]
    return 2.0 * b * (h + 2 * pad - kk + 1) * (w + 2 * pad - kk + 1) * f * c * kk * kk


def _arrays(task: asc.Task, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for t in task.workload.tensors():
        shape = tuple(int(d) for d in t.shape)
        if t.dtype == "uint8":
            out.append(rng.integers(0, 256, shape).astype(np.uint8))
        elif t.dtype == "int8":
            out.append(rng.integers(-128, 128, shape).astype(np.int8))
        else:
            out.append(rng.standard_normal(shape).astype(t.dtype) if t is not task.workload.outputs[0]
                       else np.zeros(shape, t.dtype))  # fmt: skip
    if task.workload.outputs[0].dtype == "int32":
        out[-1] = np.zeros(out[-1].shape, np.int32)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--logs", default="auto-tensorize-logs")
    args = ap.parse_args()
    logs = Path(args.logs)
    logs.mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    timers, checks, tuned_s, intrin = {}, {}, {}, {}
    for op in args.ops:
        for dtype in ("int8", "float32"):
            task = _task(op, dtype, args.threads)
            log = logs / f"{op}-{dtype}.jsonl"
            start = time.time()
            asc.tune(task, trials=args.trials, log=log, seed=args.seed)
            tuned_s[f"{op} {dtype}"] = round(time.time() - start, 1)
            best = best_record(log, task)
            names = [s.intrin for s in best.steps if s.kind == "tensorize"] if best else []
            intrin[f"{op} {dtype}"] = names[0] if names else "-"
            kernel = asc.load_best(log, task)
            arrays = _arrays(task, rng)
            kernel(*arrays)
            checks[f"{op} {dtype}"] = arrays
            timers[f"{op} {dtype}"] = kernel_timer(kernel, arrays, min_repeat_ms=200)
    for op in args.ops:
        a, w, c = checks[f"{op} int8"]
        want = _reference(op, a, w)
        if not np.array_equal(c, want):
            raise AssertionError(f"{op} int8: the tuned kernel's result differs from numpy's")
    times = interleaved(timers, args.rounds)
    med = {name: median(ts) for name, ts in times.items()}
    rows: list[list[Any]] = []
    for op in args.ops:
        for dtype in ("int8", "float32"):
            name = f"{op} {dtype}"
            ratio = med[f"{op} float32"] / med[name]
            rows.append([name, f"{med[name] * 1e3:.3f}", f"{_operations(op) / med[name] / 1e9:.1f}",
                         f"{ratio:.2f}x", intrin[name], tuned_s[name]])  # fmt: skip
    print_table(["operator", "ms", "GOP/s", "vs float32", "int8 best's intrinsic", "tuning s"], rows)
    print(f"{cpu_name()}, {args.threads} threads, {args.trials} trials each, {args.rounds} rounds")
    write_results("auto_tensorize", {
        "trials": args.trials, "threads": args.threads, "rounds": args.rounds, "shapes": SHAPES,
        "seconds": times, "median_s": med, "intrin": intrin, "tuning_s": tuned_s,
    })  # fmt: skip


def _reference(op: str, a: np.ndarray, w: np.ndarray) -> np.ndarray:
    a64, w64 = a.astype(np.int64), w.astype(np.int64)
    if op == "matmul":
        return (a64 @ w64).astype(np.int32)
    b, h, wd, c, f, kk, pad = SHAPES[op]
    xp = np.pad(a64, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    oh, ow = h + 2 * pad - kk + 1, wd + 2 * pad - kk + 1
    out = np.zeros((b, oh, ow, f), np.int64)
    for ry in range(kk):
        for rx in range(kk):
            out += np.einsum("nyxc,cf->nyxf", xp[:, ry : ry + oh, rx : rx + ow, :], w64[ry, rx])
    return out.astype(np.int32)


if __name__ == "__main__":
    main()
