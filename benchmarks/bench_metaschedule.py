"""autosched's tuned programs side by side with TVM MetaSchedule's at the same trial budget.

For each case (matmul 512^3, ResNet conv2d layers) MetaSchedule (its XGBoost cost model and
evolutionary search, ``tune_tir`` with defaults but ``--per-iter`` trials per round) tunes the same
computation for ``llvm`` on this CPU with all cores. Then its best module, the best program of every
autosched log in ``--logs`` for that case (``<case>_<tuner>_s<seed>.jsonl``, as bench_guided.py
writes them, cut to ``--trials`` trials) and the library reference (numpy / im2col + numpy) are
timed in interleaved rounds in this one process; medians.

TVM is a separate install (it is not a dependency of autosched); run from a virtual environment
that has it and autosched's requirements:

    python -m venv tvm-venv && tvm-venv/bin/pip install apache-tvm "apache-tvm-ffi==0.1.14.post0" \\
        xgboost cloudpickle psutil numpy cffi scikit-learn threadpoolctl
    PYTHONPATH=. tvm-venv/bin/python benchmarks/bench_metaschedule.py --logs DIR [--cases ...]
        [--trials 64] [--per-iter 16] [--seeds 0,1] [--rounds 5] [--work-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import clean_blas_env

clean_blas_env()

import numpy as np  # noqa: E402
import tvm  # noqa: E402
from bench_guided import CASES, references  # noqa: E402
from common import (  # noqa: E402
    blas_info,
    cpu_name,
    interleaved,
    kernel_timer,
    median,
    print_table,
    write_results,
)
from threadpoolctl import threadpool_limits  # noqa: E402
from tvm import te, topi  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.records import is_remeasurement, load_records  # noqa: E402

THREADS = os.cpu_count() or 1
TARGET = f"c -num-threads={THREADS}"


def tvm_compute(name: str, args: tuple[int, ...]) -> list[te.Tensor]:
    """The case as a TVM tensor expression (inputs, then the output)."""
    if name == "matmul":
        m, n, k = args
        a = te.placeholder((m, k), name="A")
        b = te.placeholder((k, n), name="B")
        r = te.reduce_axis((0, k), name="k")
        return [a, b, te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")]
    if name == "fused_conv2d_packed":
        return packed_conv(*args[:10])
    n, c, h, w, f, kh, kw, stride, pad = args
    x = te.placeholder((n, c, h, w), name="data")
    wt = te.placeholder((f, c, kh, kw), name="kernel")
    return [x, wt, topi.nn.conv2d_nchw(x, wt, stride, pad, 1)]


def packed_conv(
    n: int, c: int, h: int, w: int, f: int, kh: int, kw: int, stride: int, pad: int, block: int
) -> list[te.Tensor]:
    """autosched's ``fused_conv2d_packed`` (no epilogue) in TVM's te: the same inputs (the kernel
    packed as (f / block, c, kh, kw, block)), the same blocked reduction and NCHW output, so that
    MetaSchedule tunes the computation autosched tunes."""
    x = te.placeholder((n, c, h, w), name="data")
    wt = te.placeholder((f // block, c, kh, kw, block), name="kernel")
    xp = topi.nn.pad(x, (0, 0, pad, pad), (0, 0, pad, pad)) if pad else x
    p, q = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
    rc, ry, rx = te.reduce_axis((0, c), "rc"), te.reduce_axis((0, kh), "ry"), te.reduce_axis((0, kw), "rx")
    blk = te.compute(
        (n, f // block, p, q, block),
        lambda b, fo, y, xx, fi: te.sum(xp[b, rc, y * stride + ry, xx * stride + rx] * wt[fo, rc, ry, rx, fi],
                                        axis=[rc, ry, rx]),
        name="conv_blk",
    )
    out = te.compute((n, f, p, q), lambda b, k, y, xx: blk[b, k // block, y, xx, k % block], name="conv")
    return [x, wt, out]


def llvm_target() -> tvm.target.Target:
    """LLVM for this host's CPU, all cores."""
    cpu = tvm.target.codegen.llvm_get_system_cpu()
    return tvm.target.Target({"kind": "llvm", "mcpu": cpu, "num-cores": THREADS})


def tune_metaschedule(label: str, seed: int, opts: argparse.Namespace) -> tuple[Any, float]:
    """MetaSchedule's best module for the case after ``opts.trials`` trials, and the tuning time
    (a work directory that already holds a tuning database is reused, not tuned again)."""
    name, args = CASES[label]
    func = te.create_prim_func(tvm_compute(name, args))
    target = llvm_target()
    work = opts.work_dir / f"{label}_s{seed}"
    start = time.perf_counter()
    if (work / "database_tuning_record.json").exists():  # tuned by an earlier run: reuse it
        database = ms.database.JSONDatabase(work_dir=str(work), allow_missing=False)
    else:
        database = ms.tune_tir(
            mod=func, target=target, work_dir=str(work), max_trials_global=opts.trials,
            num_trials_per_iter=opts.per_iter, seed=seed,
            builder=ms.builder.LocalBuilder(timeout_sec=180),
        )
    wall = time.perf_counter() - start
    sch = ms.tir_integration.compile_tir(database, func, target)
    if sch is None:
        raise RuntimeError(f"MetaSchedule found no valid program for {label}")
    return tvm.compile(sch.mod, target=target).jit(), wall


def tvm_timer(lib: Any, inputs: list[np.ndarray], out_shape: tuple[int, ...]) -> Callable[[], float]:
    """Seconds per call of the module, from TVM's own time evaluator (one repeat per round)."""
    dev = tvm.cpu()
    arrays = [tvm.runtime.tensor(x, dev) for x in inputs]
    arrays.append(tvm.runtime.tensor(np.zeros(out_shape, np.float32), dev))
    evaluator = lib.time_evaluator("main", dev, number=1, repeat=1, min_repeat_ms=50)
    return lambda: float(evaluator(*arrays).mean)


def check_tvm(lib: Any, inputs: list[np.ndarray], expected: np.ndarray) -> None:
    """MetaSchedule's program computes what autosched's reference does."""
    dev = tvm.cpu()
    arrays = [tvm.runtime.tensor(x, dev) for x in inputs]
    out = tvm.runtime.tensor(np.zeros(expected.shape, np.float32), dev)
    lib["main"](*arrays, out)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-3, atol=1e-3)


def autosched_logs(label: str, log_dir: Path) -> list[Path]:
    """The tuning logs of the case (model-quality sidecars left out)."""
    return sorted(p for p in log_dir.glob(f"{label}_*_s*.jsonl") if not p.name.endswith(".model.jsonl"))


def cut_to_trials(log: Path, trials: int) -> list[Any]:
    """The log's records up to its ``trials``-th trial, with the re-measurements made by then."""
    records, seen = [], 0
    for rec in load_records(log):
        if not is_remeasurement(rec):
            if seen == trials:
                break
            seen += 1
        records.append(rec)
    return records


def run_case(label: str, opts: argparse.Namespace) -> dict[str, Any]:
    name, args = CASES[label]
    task = asc.Task(name, args, target=TARGET)
    print(f"\n{task}", flush=True)
    inputs = task.workload.random_inputs(0)
    expected = task.workload.reference(*inputs)
    expected = expected[0] if isinstance(expected, (list, tuple)) else expected
    timers = references(name, args, inputs)
    tuning: dict[str, float] = {}
    for seed in opts.seeds:
        lib, wall = tune_metaschedule(label, seed, opts)
        check_tvm(lib, inputs, expected)
        key = f"metaschedule s{seed}"
        tuning[key] = wall
        timers[key] = tvm_timer(lib, inputs, expected.shape)
        print(f"  MetaSchedule seed {seed}: {opts.trials} trials in {wall:.0f} s", flush=True)
    outputs = [np.zeros(t.shape, t.dtype) for t in task.workload.outputs]
    for log in autosched_logs(label, opts.logs):
        kernel = asc.load_best(cut_to_trials(log, opts.trials), task)
        tag = re.sub(rf"^{label}_", "", log.stem)
        timers[f"autosched {tag}"] = kernel_timer(kernel, [*inputs, *outputs], min_repeat_ms=50)
    with threadpool_limits(THREADS):
        times = interleaved(timers, opts.rounds)
    flops = task.flops()
    gflops = {k: flops / median(v) / 1e9 for k, v in times.items()}
    return {"case": label, "workload": str(task.workload), "trials": opts.trials,
            "per_iter": opts.per_iter, "gflops": gflops, "tuning_s": tuning, "raw_seconds": times}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="matmul512,conv64,conv128")
    parser.add_argument("--logs", type=Path, required=True, help="autosched logs (bench_guided.py --log-dir)")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--per-iter", type=int, default=16, help="MetaSchedule trials per search round")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--work-dir", type=Path, default=Path("benchmarks/results/logs/metaschedule"))
    parser.add_argument("--results-name", default="metaschedule")
    opts = parser.parse_args()
    opts.seeds = [int(s) for s in opts.seeds.split(",")]
    print(f"{cpu_name()}; threads {THREADS}; BLAS: {blas_info()}; TVM {tvm.__version__}, "
          f"target {llvm_target()}")
    cases = [run_case(label, opts) for label in opts.cases.split(",")]
    rows = []
    for case in cases:
        ref_name = next(k for k in case["gflops"] if not k.startswith(("metaschedule", "autosched")))
        ref = case["gflops"][ref_name]
        ms_best = max(v for k, v in case["gflops"].items() if k.startswith("metaschedule"))
        for key, value in case["gflops"].items():
            rows.append([case["case"], key, f"{value:.1f}", f"{value / ref:.2f}x {ref_name}",
                         f"{value / ms_best:.2f}x"])
    print()
    print_table(["case", "program", "GFLOP/s", "vs reference", "vs best MetaSchedule"], rows)
    path = write_results(opts.results_name, {"cpu": cpu_name(), "threads": THREADS, "blas": blas_info(),
                                              "tvm": tvm.__version__, "cases": cases})
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
