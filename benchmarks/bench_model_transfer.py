"""Why the cost model ranks unseen workloads poorly: variants and diagnostics, leave one workload out.

python benchmarks/bench_model_transfer.py --log DATASET/*.jsonl [--seeds 3] [--skip-variants]
python benchmarks/bench_model_transfer.py --within tests/data/replay_matmul128.jsonl.gz [--gcc-report znver3]

Each log holds one workload's measured programs (``make_dataset.py``). Every figure ranks a
workload's programs with an ``xgb`` model fitted on the *other* logs only (pairwise accuracy,
recall@5; labels are the minimum of each record's repeats), averaged over ``--seeds`` model seeds
(pair sampling and tree seeds; one seed alone moves the mean by about 0.005).

1. Variants of the training data (the model is unchanged): labels (``min cost / cost`` per task,
   the default; percentile ranks; log throughput), the regression objective, tree settings, feature
   subsets and normalizations (shape-invariant columns only; workload-dependent log columns divided
   by the task's FLOPs; each program's buffer block of the stored buffer moved first; per-task
   context columns; columns relative to the task's median row), and XGBoost's own
   ``rank:pairwise`` / ``rank:ndcg`` with ``qid`` per task on per-program feature sums. The
   default's per-workload figures are printed too.
2. Diagnostics: accuracy by the cost ratio of a pair; learning curves over the number of training
   workloads and over the number of programs kept of each; the same model when half of every
   workload's programs are in training (seen workloads); a tuning run's first 8-32 programs with
   and without the other workloads' records (transfer); how often the median of the repeats
   orders pairs as the minimum does (back-to-back repeats: a lower bound on the labels' noise).
3. ``--within LOG``: data or features? One workload's own programs only (the replay log's 3,000):
   a learning curve from 32 training programs to all but the held-out 500, and at the largest
   size bigger trees, next to how often the median of the repeats orders pairs as their minimum
   does (repeats taken back to back: not a retest, which ``remeasure.py`` makes);
   ``--gcc-report MARCH`` (``gcc_vec_report.py``) adds what gcc's vectorizer did with each program.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from bench_model import _log_data
from common import print_table, write_results
from gcc_vec_report import REPORT_COLUMNS, check_march, vectorizer_reports

from autosched.model import (
    extract_features,
    from_records,
    log_scaled_features,
    make_model,
    pack_features,
    pairwise_accuracy,
    recall_at_k,
    shape_invariant_features,
)
from autosched.model.base import require
from autosched.model.features import feature_names
from autosched.model.xgb_model import XGBModel
from autosched.records.best import is_remeasurement
from autosched.runner.measure import MeasureInput
from autosched.search.replay import read_log

NAMES = feature_names()
LOG, INV = log_scaled_features(), shape_invariant_features()
BUF0, BLOCK, BLOCKS = NAMES.index("buf0_read"), 17, 5


@dataclass
class Workload:
    name: str
    feats: list[np.ndarray]  # per program: (stores x dims)
    costs: np.ndarray  # seconds, minimum of the repeats
    median: np.ndarray  # seconds, median of the repeats
    flops: float


Transform = Callable[[np.ndarray, Workload], np.ndarray]
Labels = Callable[[np.ndarray], np.ndarray]


def throughput(c: np.ndarray) -> np.ndarray:
    return c.min() / c


def percentile(c: np.ndarray) -> np.ndarray:
    return 1.0 - np.argsort(np.argsort(c)) / (len(c) - 1)


def log_throughput(c: np.ndarray) -> np.ndarray:
    """1 + log2(throughput) / 10; a failed program (cost inf) gets 0, as with :func:`throughput`."""
    t = throughput(c)
    with np.errstate(divide="ignore"):
        return np.where(t > 0, 1.0 + np.log2(t) / 10, 0.0)


def invariant_only(f: np.ndarray, w: Workload) -> np.ndarray:
    return np.where(INV, f, 0).astype(np.float32)


def per_flop(f: np.ndarray, w: Workload) -> np.ndarray:
    g = f.copy()
    g[:, LOG & ~INV] -= np.float32(np.log2(w.flops))
    return g


def stored_buffer_first(f: np.ndarray, w: Workload) -> np.ndarray:
    g = f.copy()
    for r in range(len(f)):
        blocks = [f[r, BUF0 + k * BLOCK : BUF0 + (k + 1) * BLOCK] for k in range(BLOCKS)]
        written = [k for k in range(BLOCKS) if blocks[k][1] or blocks[k][2]][:1]
        for slot, k in enumerate(written + [k for k in range(BLOCKS) if k not in written]):
            g[r, BUF0 + slot * BLOCK : BUF0 + (slot + 1) * BLOCK] = blocks[k]
    return g


def task_context(f: np.ndarray, w: Workload) -> np.ndarray:
    ctx = np.array([len(f), np.log2(w.flops)], dtype=np.float32)
    return np.concatenate([f, np.broadcast_to(ctx, (len(f), 2))], axis=1)


def centred(f: np.ndarray, w: Workload) -> np.ndarray:
    """The rows and, beside them, the rows minus the task's median row (over all its programs'
    stores): relative columns, as a model scoring one task's candidates could use."""
    if w.name not in _MEDIAN_ROWS:
        _MEDIAN_ROWS[w.name] = np.median(np.concatenate([g for g in w.feats if len(g)]), axis=0)
    return np.concatenate([f, f - _MEDIAN_ROWS[w.name].astype(np.float32)], axis=1)


_MEDIAN_ROWS: dict[str, np.ndarray] = {}


def fit_score(train: list[Workload], test: Workload, tf: Transform | None, labels: Labels,
              seed: int, params: dict[str, Any]) -> np.ndarray:
    """The scores of ``test``'s programs by an xgb model fitted on ``train``."""
    def rows(w: Workload) -> list[np.ndarray]:
        return [tf(f, w) for f in w.feats] if tf else w.feats

    x, pid = pack_features([f for w in train for f in rows(w)])
    y = np.concatenate([labels(w.costs) for w in train])
    groups = np.repeat(np.arange(len(train)), [len(w.costs) for w in train])
    model = XGBModel(seed=seed, **params).fit_rows(x, pid, y, groups)
    return model.predict_rows(*pack_features(rows(test)), len(test.costs))


def native_score(train: list[Workload], test: Workload, objective: str, seed: int) -> np.ndarray:
    """XGBoost's own ranking objective, ``qid`` per task, on per-program sums of the rows."""
    xgb = require("xgboost")

    def sums(w: Workload) -> np.ndarray:
        return np.stack([f.sum(axis=0) for f in w.feats])

    y = np.concatenate([throughput(w.costs) for w in train])
    if objective == "rank:ndcg":
        y = np.floor(y * 10)  # ndcg wants graded relevance
    qid = np.repeat(np.arange(len(train)), [len(w.costs) for w in train])
    data = xgb.DMatrix(np.concatenate([sums(w) for w in train]), label=y, qid=qid)
    params = {"objective": objective, "eta": 0.1, "max_depth": 6, "nthread": 1, "seed": seed, "verbosity": 0}
    booster = xgb.train(params, data, 100)
    return np.asarray(booster.predict(xgb.DMatrix(sums(test))), dtype=np.float64)


Scorer = Callable[[list[Workload], Workload, int], np.ndarray]


def leave_one_out(data: list[Workload], score: Scorer, seeds: int) -> dict[str, tuple[float, float]]:
    """Per workload: (pairwise accuracy, recall@5), means over the seeds."""
    out = {}
    for w in data:
        train = [o for o in data if o is not w]
        got = [score(train, w, s) for s in range(seeds)]
        out[w.name] = (float(np.mean([pairwise_accuracy(g, w.costs) for g in got])),
                       float(np.mean([recall_at_k(g, w.costs, 5) for g in got])))
    return out


def xgb_scorer(tf: Transform | None = None, labels: Labels = throughput, **params: Any) -> Scorer:
    return lambda train, test, seed: fit_score(train, test, tf, labels, seed, params)


def native_scorer(objective: str) -> Scorer:
    return lambda train, test, seed: native_score(train, test, objective, seed)


VARIANTS: dict[str, Scorer] = {
    "default: min/cost labels, pairs within a task": xgb_scorer(),
    "labels: percentile rank in the task": xgb_scorer(labels=percentile),
    "labels: log2 throughput": xgb_scorer(labels=log_throughput),
    "objective: regression (reg)": xgb_scorer(objective="reg"),
    "trees: depth 4": xgb_scorer(max_depth=4),
    "trees: 150 rounds at eta 0.1, rows and columns subsampled 0.8": xgb_scorer(
        rounds=150, eta=0.1, subsample=0.8, colsample_bytree=0.8),
    "features: shape-invariant columns only": xgb_scorer(invariant_only),
    "features: workload-dependent log columns / task FLOPs": xgb_scorer(per_flop),
    "features: stored buffer's block first": xgb_scorer(stored_buffer_first),
    "features: + store count, log2 task FLOPs": xgb_scorer(task_context),
    "features: + the same columns minus the task's median row": xgb_scorer(centred),
    "xgboost rank:pairwise, qid per task, program sums": native_scorer("rank:pairwise"),
    "xgboost rank:ndcg, qid per task, program sums": native_scorer("rank:ndcg"),
}


def by_gap(data: list[Workload]) -> list[list[object]]:
    """Accuracy of the default model on pairs whose costs differ by more than a ratio."""
    right, total = np.zeros(6), np.zeros(6)
    ratios = (1.0, 1.1, 1.25, 1.5, 2.0, 3.0)
    for w in data:
        s = fit_score([o for o in data if o is not w], w, None, throughput, 0, {})
        c = w.costs
        faster = c[:, None] < c[None, :]
        ok = faster & (s[:, None] > s[None, :])
        with np.errstate(invalid="ignore"):  # two failed programs: inf / inf
            ratio = c[None, :] / c[:, None]
        for i, r in enumerate(ratios):
            m = faster & (ratio > r)
            right[i] += ok[m].sum()
            total[i] += m.sum()
    return [[f"> {r}", int(t), f"{a / t:.3f}"] for r, a, t in zip(ratios, right, total, strict=True)]


def learning_curve(data: list[Workload]) -> list[list[object]]:
    """Mean held-out accuracy with k random training workloads (two draws per held-out one)."""
    rng, rows = np.random.default_rng(0), []
    for k in sorted({k for k in (2, 5, 8, 11, 16) if k < len(data) - 1} | {len(data) - 1}):
        accs = []
        for w in data:
            others = [o for o in data if o is not w]
            for _ in range(2 if k < len(others) else 1):
                train = [others[i] for i in rng.choice(len(others), k, replace=False)]
                accs.append(pairwise_accuracy(fit_score(train, w, None, throughput, 0, {}), w.costs))
        rows.append([k, f"{np.mean(accs):.3f}"])
    return rows


def subset(w: Workload, idx: np.ndarray) -> Workload:
    """The workload with only its programs ``idx``."""
    return Workload(w.name, [w.feats[i] for i in idx], w.costs[idx], w.median[idx], w.flops)


def programs_curve(data: list[Workload], seeds: int) -> list[list[object]]:
    """Mean held-out accuracy when every training workload keeps only k random programs: would
    more programs per workload help?"""
    rows = []
    for k in [*(k for k in (8, 16, 32) if k < min(len(w.costs) for w in data)), 0]:  # 0: all
        accs = []
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            cut = [subset(w, rng.permutation(len(w.costs))[:k]) if k else w for w in data]
            for w in data:
                train = [c for c in cut if c.name != w.name]
                accs.append(pairwise_accuracy(fit_score(train, w, None, throughput, seed, {}), w.costs))
        rows.append([k or "all", f"{np.mean(accs):.3f}"])
    return rows


def first_programs(data: list[Workload], seeds: int) -> list[list[object]]:
    """A tuning run's view: each workload's first k programs (random ones) as its own records, and
    accuracy on its programs after the 32nd, by a model fitted on those k alone and on those k with
    every other workload's programs (transfer logs)."""
    accs: dict[tuple[int, bool], list[float]] = {}
    for seed in range(seeds):
        for i, w in enumerate(data):
            order = np.random.default_rng(100 * seed + i).permutation(len(w.costs))
            test = subset(w, order[32:])
            for k in (8, 16, 32):
                own = subset(w, order[:k])
                if np.ptp(throughput(own.costs)) == 0:
                    continue  # nothing to learn from
                for transfer in (False, True):
                    train = [o for o in data if o is not w] + [own] if transfer else [own]
                    score = fit_score(train, test, None, throughput, seed, {})
                    accs.setdefault((k, transfer), []).append(pairwise_accuracy(score, test.costs))
    return [[k, f"{np.mean(accs[k, False]):.3f}", f"{np.mean(accs[k, True]):.3f}"] for k in (8, 16, 32)]


def seen_halves(data: list[Workload], seeds: int) -> float:
    """Mean accuracy on half of each workload's programs, the other halves of all in training."""
    accs = []
    for seed in range(seeds):
        halves = [np.random.default_rng(seed).permutation(len(w.costs)) for w in data]
        train = [subset(w, h[: len(h) // 2]) for w, h in zip(data, halves, strict=True)]
        x, pid = pack_features([f for w in train for f in w.feats])
        y = np.concatenate([throughput(w.costs) for w in train])
        groups = np.repeat(np.arange(len(train)), [len(w.costs) for w in train])
        model = XGBModel(seed=seed).fit_rows(x, pid, y, groups)
        for w, h in zip(data, halves, strict=True):
            test = h[len(h) // 2 :]
            s = model.predict_rows(*pack_features([w.feats[i] for i in test]), len(test))
            accs.append(pairwise_accuracy(s, w.costs[test]))
    return float(np.mean(accs))


def load(logs: list[str]) -> list[Workload]:
    out = []
    for log in logs:
        progs, costs = _log_data(log, "min")
        _, median = _log_data(log, "median")
        feats = [np.asarray(f) for f in extract_features(progs)]
        out.append(Workload(Path(log).stem, feats, costs, median, float(progs[0].task.flops())))
    return out


def within(log: str, seeds: int, march: str | None = None, held_out: int = 500) -> dict[str, Any]:
    """Accuracy on ``held_out`` programs of one log by models fitted on its other programs; with
    ``march``, also with gcc's vectorizer report for ``-march=MARCH`` appended to every row."""
    records = [r for r in read_log(log) if not is_remeasurement(r)]
    progs, _ = from_records(records)
    costs = np.array([min(r.costs) if r.ok else np.inf for r in records])
    median = np.array([r.median if r.ok else np.inf for r in records])
    feats = [np.asarray(f) for f in extract_features(progs)]
    perm = np.random.default_rng(0).permutation(len(progs))
    test, pool = perm[:held_out], perm[held_out:]

    def accuracy(n: int, seed: int, rows: list[np.ndarray] = feats, **params: Any) -> float:
        train = np.random.default_rng(seed).choice(pool, n, replace=False)
        x, pid = pack_features([rows[i] for i in train])
        labels = throughput(costs[train])
        model = XGBModel(seed=seed, **params).fit_rows(x, pid, labels, np.zeros(n, dtype=int))
        tx, tpid = pack_features([rows[i] for i in test])
        return pairwise_accuracy(model.predict_rows(tx, tpid, len(test)), costs[test])

    sizes = sorted({n for n in (32, 64, 128, 256, 512, 1024, 2048) if n < len(pool)} | {len(pool)})
    curve = [[n, f"{np.mean([accuracy(n, s) for s in range(seeds)]):.3f}"] for n in sizes]
    print_table(["training programs (same workload)", "pairwise on the held-out"], curve)
    bigger = float(np.mean([accuracy(len(pool), s, rounds=300, eta=0.1, max_depth=8) for s in range(seeds)]))
    with np.errstate(invalid="ignore"):
        noise = pairwise_accuracy(-median[test], costs[test])
    print(f"{len(pool)} programs, 300 rounds of depth-8 trees at eta 0.1: {bigger:.3f}")
    print(f"median of the repeats ordering the held-out pairs as the minimum does: {noise:.3f}")
    result = {"log": log, "curve": curve, "bigger_trees": bigger, "median_vs_min": noise}
    if march is not None:
        result["gcc_report"] = with_gcc_report(progs, feats, march, accuracy, (256, len(pool)), seeds)
    return result


def with_gcc_report(
    progs: list[MeasureInput], feats: list[np.ndarray], march: str, accuracy: Callable[..., float],
    sizes: tuple[int, ...], seeds: int,
) -> dict[str, Any]:
    """Accuracy at ``sizes`` without and with gcc's vectorizer report (``-march=MARCH``) appended to
    every store's row: does knowing what the compiler vectorized lift the model?"""
    report = vectorizer_reports(progs, march)
    print(f"programs with an outer loop vectorized: {np.mean(report[:, 3] > 0):.3f}, "
          f"with any loop vectorized: {np.mean(report[:, 0] + report[:, 1] > 0):.3f}")
    width = report.shape[1]
    more = [np.hstack([f, np.broadcast_to(report[i], (len(f), width))]) for i, f in enumerate(feats)]
    rows = [[n, f"{np.mean([accuracy(n, s) for s in range(seeds)]):.3f}",
             f"{np.mean([accuracy(n, s, more) for s in range(seeds)]):.3f}"] for n in sizes]
    print_table(["training programs", "loop features", f"+ gcc's vectorizer report (-march={march})"], rows)
    return {"march": march, "columns": list(REPORT_COLUMNS), "accuracy": rows,
            "outer_loop_share": float(np.mean(report[:, 3] > 0))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log", nargs="+")
    ap.add_argument("--within", metavar="LOG", help="one workload's log: data or features? (3. above)")
    ap.add_argument("--gcc-report", metavar="MARCH",
                    help="with --within: also with gcc's vectorizer report for -march=MARCH (the log's CPU)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--skip-variants", action="store_true", help="the default model only")
    args = ap.parse_args()
    make_model("xgb")  # says what to install if xgboost is missing
    if args.gcc_report is not None:
        if not args.within:
            ap.error("--gcc-report goes with --within")
        try:
            check_march(args.gcc_report)
        except ValueError as e:
            ap.error(str(e))
    if args.within:
        print(f"results: {write_results('model_within', within(args.within, args.seeds, args.gcc_report))}")
        return
    if not args.log:
        ap.error("--log or --within is required")
    data = load(args.log)
    record: dict[str, Any] = {"logs": args.log, "seeds": args.seeds, "variants": {}}
    rows = []
    for label, scorer in list(VARIANTS.items())[: 1 if args.skip_variants else None]:
        res = leave_one_out(data, scorer, args.seeds)
        acc = np.array([a for a, _ in res.values()])
        rec = np.mean([r for _, r in res.values()])
        rows.append([label, f"{acc.mean():.3f}", f"{acc.min():.3f}", f"{rec:.2f}"])
        record["variants"][label] = res
        print(f"{label}: {acc.mean():.3f}", flush=True)
    print_table(["variant", "pairwise mean", "worst workload", "recall@5 mean"], rows)
    default = record["variants"][next(iter(VARIANTS))]
    print_table(["held-out workload", "pairwise", "recall@5"],
                [[k, f"{a:.3f}", f"{r:.2f}"] for k, (a, r) in default.items()])
    gap = by_gap(data)
    print_table(["cost ratio of the pair", "pairs", "accuracy"], gap)
    curve = learning_curve(data)
    print_table(["training workloads", "pairwise mean"], curve)
    per_workload = programs_curve(data, args.seeds)
    print_table(["programs per training workload", "pairwise mean"], per_workload)
    first = first_programs(data, args.seeds)
    print_table(["the workload's own programs", "own only", "own + the other workloads'"], first)
    seen = seen_halves(data, args.seeds)
    with np.errstate(invalid="ignore"):  # failed programs: -inf scores
        noise = float(np.mean([pairwise_accuracy(-w.median, w.costs) for w in data]))
    print(f"seen workloads (half of each in training): {seen:.3f}")
    print(f"median of the repeats ordering pairs as the minimum does: {noise:.3f}")
    record.update(by_gap=gap, learning_curve=curve, programs_curve=per_workload, first_programs=first,
                  seen_halves=seen, median_vs_min=noise)
    print(f"results: {write_results('model_transfer', record)}")


if __name__ == "__main__":
    main()
