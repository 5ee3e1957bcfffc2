"""autosched's tuned programs side by side with TVM MetaSchedule's at the same trial budget, each
re-timed in fresh processes, the sides alternating.

For each case (matmul 512^3, ResNet conv2d layers; with ``--suite climb`` the user-defined operators
of climb_ops.py, given to TVM through an adapter from the same lines) MetaSchedule (its XGBoost cost model and
evolutionary search, ``tune_tir`` with defaults but ``--per-iter`` trials per round) tunes the same
computation for ``llvm`` on this CPU with all cores; its best module is exported to a shared
library. autosched's side is the best program of every log in ``--logs`` for the case
(``<case>_<tuner>_s<seed>.jsonl``, as bench_guided.py writes them, cut to ``--trials`` trials), or,
without ``--logs``, of a run tuned here per seed (``asc.tune``, resumed from ``--work-dir``).

Then every side (each autosched best, each MetaSchedule best, the library reference) is re-timed in
``--rounds`` rounds, each side in a fresh process of its own per round, the order rotating from
round to round (``autosched.runner.fresh.alternate``): no runtime's thread pool beside another's,
and no side always first. Each process times its program ``--inner`` times between timings of
autosched's calibration kernel, so a round's ratio can also be read with the machine's speed of
that minute taken out. The tables give each side's median GFLOP/s, and per round the speed-up of
each autosched best over the best MetaSchedule program (over the reference when TVM is absent),
as timed and calibrated.

TVM is a separate install (it is not a dependency of autosched); without it the script says so and
times the autosched side and the reference only. To compare, run from a virtual environment that
has it and autosched's requirements:

    python -m venv tvm-venv && tvm-venv/bin/pip install apache-tvm "apache-tvm-ffi==0.1.14.post0" \\
        xgboost cloudpickle psutil numpy cffi scikit-learn threadpoolctl
    PYTHONPATH=. tvm-venv/bin/python benchmarks/bench_metaschedule.py [--logs DIR] [--cases ...]
        [--trials 64] [--per-iter 16] [--seeds 0,1] [--rounds 5] [--inner 3] [--work-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time
from pathlib import Path
from typing import Any

from common import clean_blas_env

clean_blas_env()

import numpy as np  # noqa: E402
from bench_guided import CASES, references  # noqa: E402
from climb_ops import CASES as CLIMB_CASES  # noqa: E402
from climb_ops import FUNCTIONS as CLIMB_FUNCTIONS  # noqa: E402
from common import blas_info, cpu_name, print_table, write_results  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.records import best_record, is_remeasurement, load_records  # noqa: E402
from autosched.runner import LocalBuilder, MeasureInput, MeasureOption  # noqa: E402
from autosched.runner.calibration import calibration_library  # noqa: E402
from autosched.runner.fresh import Side, Timing, alternate, speedups  # noqa: E402

try:
    import tvm
    from tvm import te, topi
    from tvm.s_tir import meta_schedule as ms
except ImportError as missing:
    tvm = None
    TVM_MISSING = f"TVM is not installed ({missing}): pip install apache-tvm; timing the autosched side only"
else:
    TVM_MISSING = ""

HERE = str(Path(__file__).resolve().parent)
#: label -> (workload name, arguments) of the suite chosen (``--suite``)
SUITE: dict[str, tuple[str, tuple[int, ...]]] = {}
THREADS = os.cpu_count() or 1
TARGET = f"c -num-threads={THREADS}"


class TvmExpr:
    """autosched's expression calls as TVM's te spells them: climb_ops's operators built for TVM."""

    @staticmethod
    def placeholder(shape: tuple[int, ...], name: str) -> Any:
        return te.placeholder(shape, name=name)

    @staticmethod
    def compute(shape: tuple[int, ...], fn: Any, name: str) -> Any:
        return te.compute(shape, fn, name=name)

    @staticmethod
    def reduce_axis(extent: int, name: str) -> Any:
        return te.reduce_axis((0, extent), name=name)

    @staticmethod
    def sum(value: Any, axis: Any) -> Any:
        return te.sum(value, axis=axis)

    @staticmethod
    def if_then_else(cond: Any, then: Any, otherwise: float) -> Any:
        return te.if_then_else(cond, then, te.const(otherwise, "float32"))

    @staticmethod
    def all(*conds: Any) -> Any:
        return te.all(*conds)

    @staticmethod
    def max(a: Any, b: float) -> Any:
        return te.max(a, te.const(b, "float32"))

    @staticmethod
    def sqrt(x: Any) -> Any:
        return te.sqrt(x)


def tvm_compute(name: str, args: tuple[int, ...]) -> list[te.Tensor]:
    """The case as a TVM tensor expression (inputs, then the output)."""
    if name in CLIMB_FUNCTIONS:
        return CLIMB_FUNCTIONS[name](*args, te=TvmExpr)
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
    """MetaSchedule's best program for the case after ``opts.trials`` trials, compiled (export it
    with ``export_library``), and the tuning time (a work directory that already holds a tuning
    database is reused, not tuned again)."""
    name, args = SUITE[label]
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
    return tvm.compile(sch.mod, target=target), wall


def check_tvm(compiled: Any, inputs: list[np.ndarray], expected: np.ndarray) -> None:
    """MetaSchedule's program computes what autosched's reference does."""
    dev = tvm.cpu()
    lib = compiled.jit()
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


def autosched_sides(label: str, task: asc.Task, opts: argparse.Namespace) -> list[tuple[str, Any]]:
    """(name, program steps) of each autosched best for the case: from the case's logs in
    ``opts.logs`` (cut to the trials), else tuned here, one run per seed (resumed from its log)."""
    if opts.logs is not None:
        return [(f"autosched {re.sub(rf'^{label}_', '', log.stem)}",
                 best_record(cut_to_trials(log, opts.trials), task).steps)
                for log in autosched_logs(label, opts.logs)]
    out = []
    for seed in opts.seeds:
        log = opts.work_dir / "autosched" / f"{label}_s{seed}.jsonl"
        log.parent.mkdir(parents=True, exist_ok=True)
        result = asc.tune(task, trials=opts.trials, log=log, seed=seed, progress=False)
        drift = result.drift["spread_pct"] if result.drift else float("nan")
        print(f"  autosched seed {seed}: {result.trials} trials in {result.wall_time_s:.0f} s "
              f"(machine drift {drift:.1f}%)", flush=True)
        out.append((f"autosched s{seed}", result.best_steps))
    return out


def kernel_side(name: str, task: asc.Task, steps: Any, builder: LocalBuilder) -> Side:
    """An autosched program as a side: its library, built (or found in the kernel cache)."""
    (build,) = builder.build([MeasureInput(task, tuple(steps))])
    if build.lib_path is None:
        raise RuntimeError(f"{name}: the best program does not build: {build.error_msg}")
    return Side(name, build.lib_path, build.func_name, build.arg_specs)


def tvm_sides(label: str, inputs: list[np.ndarray], expected: np.ndarray, opts: argparse.Namespace,
              tuning: dict[str, float]) -> list[Side]:
    """MetaSchedule's best of each seed, exported to a library in its work directory, as a side."""
    sides = []
    for seed in opts.seeds:
        compiled, wall = tune_metaschedule(label, seed, opts)
        check_tvm(compiled, inputs, expected)
        path = opts.work_dir / f"{label}_s{seed}" / "best.so"
        compiled.export_library(str(path))
        name = f"metaschedule s{seed}"
        tuning[name] = wall
        sides.append(Side(name, factory="fresh_sides:tvm_timer", path=(HERE,),
                          kwargs={"path": str(path), "out_shape": list(expected.shape)}))
        print(f"  MetaSchedule seed {seed}: {opts.trials} trials in {wall:.0f} s", flush=True)
    return sides


def run_case(label: str, opts: argparse.Namespace) -> dict[str, Any]:
    name, args = SUITE[label]
    task = asc.Task(name, args, target=TARGET)
    print(f"\n{task}", flush=True)
    inputs = task.workload.random_inputs(0)
    expected = task.workload.reference(*inputs)
    expected = expected[0] if isinstance(expected, (list, tuple)) else expected
    tuning: dict[str, float] = {}
    sides = [] if tvm is None else tvm_sides(label, inputs, expected, opts, tuning)
    with LocalBuilder() as builder:
        sides += [kernel_side(n, task, steps, builder) for n, steps in autosched_sides(label, task, opts)]
    if name not in CLIMB_FUNCTIONS:  # a user-defined operator has no library to compare with
        sides += [Side(ref, factory="fresh_sides:reference_timer", path=(HERE,),
                       kwargs={"name": name, "args": list(args), "which": ref})
                  for ref in references(name, args, inputs)]
    rounds = alternate(sides, inputs, calibration_library(task.target), rounds=opts.rounds, inner=opts.inner,
                       option=MeasureOption(min_repeat_ms=50))
    return summarize_case(label, task, rounds, tuning, opts)


def summarize_case(label: str, task: asc.Task, rounds: list[dict[str, Timing]], tuning: dict[str, float],
                   opts: argparse.Namespace) -> dict[str, Any]:
    """The case's figures: GFLOP/s per side (median over rounds), and per round each autosched
    side's speed-up over the best MetaSchedule side of the round (the reference without TVM)."""
    flops = task.flops()
    names = list(rounds[0])
    gflops = {n: flops / statistics.median(r[n].median for r in rounds) / 1e9 for n in names}
    theirs = [n for n in names if n.startswith("metaschedule")]
    against = max(theirs or [n for n in names if not n.startswith("autosched")], key=gflops.__getitem__)
    per_round = {n: speedups(rounds, n, against) for n in names if n.startswith("autosched")}
    return {"case": label, "workload": str(task.workload), "trials": opts.trials, "per_iter": opts.per_iter,
            "gflops": gflops, "tuning_s": tuning, "against": against,
            "speedup_rounds": {n: [{"timed": t, "calibrated": c} for t, c in v]
                               for n, v in per_round.items()},
            "rounds": [{n: {"pid": t.pid, "seconds": t.seconds, "calibration": t.calibration}
                        for n, t in r.items()} for r in rounds]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=("guided", "climb"), default="guided",
                        help="bench_guided.py's cases (default) or climb_ops.py's user-defined operators")
    parser.add_argument("--cases", help="case labels (default: matmul512,conv64,conv128; climb: "
                        "matmul_at,conv_nhwc,attention)")
    parser.add_argument("--logs", type=Path,
                        help="autosched logs (bench_guided.py --log-dir); default: tune here")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--per-iter", type=int, default=16, help="MetaSchedule trials per search round")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--rounds", type=int, default=5,
                        help="rounds of fresh processes, the sides alternating")
    parser.add_argument("--inner", type=int, default=3, help="timings of a program in each fresh process")
    parser.add_argument("--work-dir", type=Path, default=Path("benchmarks/results/logs/metaschedule"))
    parser.add_argument("--results-name", default="metaschedule")
    opts = parser.parse_args()
    opts.seeds = [int(s) for s in opts.seeds.split(",")]
    SUITE.update(CLIMB_CASES if opts.suite == "climb" else CASES)
    default = "matmul_at,conv_nhwc,attention" if opts.suite == "climb" else "matmul512,conv64,conv128"
    opts.cases = opts.cases or default
    opts.work_dir.mkdir(parents=True, exist_ok=True)
    print(f"{cpu_name()}; threads {THREADS}; BLAS: {blas_info()}; "
          + (TVM_MISSING or f"TVM {tvm.__version__}, target {llvm_target()}"))
    cases = [run_case(label, opts) for label in opts.cases.split(",")]
    rows, speed = [], []
    for case in cases:
        best = case["gflops"][case["against"]]
        for key, value in case["gflops"].items():
            rows.append([case["case"], key, f"{value:.1f}", f"{value / best:.2f}x"])
        for key, per_round in case["speedup_rounds"].items():
            timed = " ".join(f"{r['timed']:.2f}" for r in per_round)
            calibrated = " ".join(f"{r['calibrated']:.2f}" for r in per_round)
            speed.append([case["case"], key, case["against"], timed, calibrated])
    print(f"\nmedians of {opts.rounds} rounds, each side in a fresh process per round")
    print_table(["case", "program", "GFLOP/s", "vs the best other"], rows)
    print("\nspeed-up of autosched per round (>1: autosched faster), as timed and calibrated")
    print_table(["case", "autosched", "against", "timed per round", "calibrated per round"], speed)
    path = write_results(opts.results_name, {"cpu": cpu_name(), "threads": THREADS, "blas": blas_info(),
                                              "tvm": None if tvm is None else tvm.__version__,
                                              "rounds": opts.rounds, "inner": opts.inner, "cases": cases})
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
