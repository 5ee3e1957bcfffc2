"""Cost-model figures: feature extraction rate, fit time, and ranking quality on a tuning log.

python benchmarks/bench_model.py [--programs 300] [--repeats 5] [--fit 500] [--log LOG ...] [--splits 8]
                                 [--unseen] [--only-quality]

1. Programs per second on one core (CPU time of this process, so that other processes on the
   machine count less) for random sketch programs of a ResNet conv2d layer and a matmul: lowering
   alone (up to unrolling), features of already lowered programs, and both (an empty cache);
   the median of ``--repeats`` measurements.
2. Fit time (wall and CPU) of each model on ``--fit`` programs of the conv2d layer (made-up costs:
   the time does not depend on them), features already extracted, and predict time for as many.
3. With ``--log``: pairwise accuracy and recall@8 on held-out halves of each log's programs (the
   mean over ``--splits`` random halves), labels being the *minimum* of each record's repeats
   (``--stat median`` for the median; on a busy machine the minimum is the stable one).
4. With ``--unseen`` and several logs of different workloads: each log's programs ranked by a
   model fitted on the *other* logs only (a workload it never saw): pairwise accuracy, recall@5.
   ``--only-quality`` skips parts 1 and 2.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import random
import time

import numpy as np
from common import print_table, write_results

from autosched.model import extract_features, from_records, make_model, pairwise_accuracy, recall_at_k
from autosched.model.base import require
from autosched.model.features import FEATURE_CACHE
from autosched.records import is_remeasurement, load_records
from autosched.runner.measure import MeasureInput
from autosched.search.tuning_space import make_space
from autosched.task import LOWERING_CACHE, Task

WORKLOADS = {
    "conv2d (64,56,56,64,3,1,1)": ("conv2d_nchw", (1, 64, 56, 56, 64, 3, 3, 1, 1)),
    "matmul 1024": ("matmul", (1024, 1024, 1024)),
}


def programs(task: Task, n: int, seed: int = 0) -> list[MeasureInput]:
    space, rng = make_space(task, "sketch"), random.Random(seed)
    return [MeasureInput(task, space.sample(rng).steps) for _ in range(n)]


def cpu_rate(n: int, fn) -> float:  # type: ignore[no-untyped-def]
    start = time.process_time()
    fn()
    return n / (time.process_time() - start)


def lower_all(progs: list[MeasureInput]) -> None:
    for p in progs:
        with contextlib.suppress(Exception):  # illegal programs count as work done
            p.task.lowered(p.steps)


def feature_rates(n: int, repeats: int) -> tuple[list[list[object]], dict]:
    rows, record = [], {}
    for label, (name, args) in WORKLOADS.items():
        progs = programs(Task(name, args, target="c -num-threads=1"), n)
        lowers, cacheds, boths = [], [], []
        for _ in range(repeats):  # medians: a VM's core speed moves by tens of % from second to second
            LOWERING_CACHE.clear()
            FEATURE_CACHE.clear()
            lowers.append(cpu_rate(n, lambda progs=progs: lower_all(progs)))
            cacheds.append(cpu_rate(n, lambda progs=progs: extract_features(progs)))
            LOWERING_CACHE.clear()
            FEATURE_CACHE.clear()
            boths.append(cpu_rate(n, lambda progs=progs: extract_features(progs)))
        lower, cached, both = (float(np.median(x)) for x in (lowers, cacheds, boths))
        stores = sum(f.shape[0] for f in extract_features(progs)) / n
        rows.append([label, f"{lower:.0f}", f"{cached:.0f}", f"{both:.0f}", f"{stores:.1f}"])
        record[label] = {"lower_per_s": lower, "features_per_s": cached, "lower_and_features_per_s": both,
                         "stores_per_program": stores}
    return rows, record


def fit_times(n: int) -> tuple[list[list[object]], dict]:
    name, args = WORKLOADS["conv2d (64,56,56,64,3,1,1)"]
    progs = programs(Task(name, args, target="c -num-threads=1"), n, seed=1)
    rng = np.random.default_rng(0)
    costs = [math.inf if rng.random() < 0.1 else float(rng.lognormal(-6, 1)) for _ in progs]
    extract_features(progs)  # lowered once; the fits below find the features in the cache
    for module in ("xgboost", "sklearn.neural_network", "threadpoolctl"):  # imports are not fits
        require(module)
    rows, record = [], {}
    for model_name, params in (("xgb", {}), ("xgb", {"objective": "reg"}), ("mlp", {})):
        label = model_name + "".join(f" {k}={v}" for k, v in params.items())
        model = make_model(model_name, **params)
        wall, cpu = time.perf_counter(), time.process_time()
        model.fit(progs, costs)
        fit, fit_cpu = time.perf_counter() - wall, time.process_time() - cpu
        wall = time.perf_counter()
        model.predict(progs)
        predict = time.perf_counter() - wall
        rows.append([label, n, f"{fit:.2f}", f"{fit_cpu:.2f}", f"{predict:.2f}"])
        record[label] = {"programs": n, "fit_s": fit, "fit_cpu_s": fit_cpu, "predict_s": predict}
    return rows, record


def quality(log: str, splits: int, stat: str) -> tuple[list[list[object]], dict]:
    progs, costs = _log_data(log, stat)
    extract_features(progs)
    rows, record = [], {}
    for model_name, params in (("xgb", {}), ("xgb", {"objective": "reg"}), ("mlp", {}), ("random", {})):
        label = model_name + "".join(f" {k}={v}" for k, v in params.items())
        acc, rec = [], []
        for seed in range(splits):
            order = np.random.default_rng(seed).permutation(len(progs))
            train, test = order[: len(order) // 2], order[len(order) // 2 :]
            model = make_model(model_name, **params).fit([progs[i] for i in train], costs[train])
            scores = model.predict([progs[i] for i in test])
            acc.append(pairwise_accuracy(scores, costs[test]))
            rec.append(recall_at_k(scores, costs[test], 8))
        mean, worst = f"{np.mean(acc):.3f}", f"{np.min(acc):.3f}"
        rows.append([log, len(progs), label, mean, worst, f"{np.mean(rec):.2f}"])
        record[f"{log} {label}"] = {"programs": len(progs), "pairwise_mean": float(np.mean(acc)),
                                    "pairwise_min": float(np.min(acc)), "recall_at_8": float(np.mean(rec))}
    return rows, record


def _log_data(log: str, stat: str) -> tuple[list[MeasureInput], np.ndarray]:
    records = [r for r in load_records(log) if not is_remeasurement(r)]
    progs, _ = from_records(records)
    costs = np.array([(min(r.costs) if stat == "min" else r.median) if r.ok else math.inf for r in records])
    return progs, costs


def unseen(logs: list[str], stat: str) -> tuple[list[list[object]], dict]:
    """Each log ranked by models fitted on the other logs (other workloads) only."""
    data = {log: _log_data(log, stat) for log in logs}
    for progs, _ in data.values():
        extract_features(progs)
    rows, record = [], {}
    for log, (progs, costs) in data.items():
        train = [p for other, (ps, _) in data.items() if other != log for p in ps]
        train_costs = np.concatenate([c for other, (_, c) in data.items() if other != log])
        for model_name in ("xgb", "mlp", "random"):
            scores = make_model(model_name).fit(train, train_costs).predict(progs)
            acc, rec = pairwise_accuracy(scores, costs), recall_at_k(scores, costs, 5)
            rows.append([log, len(progs), len(train), model_name, f"{acc:.3f}", f"{rec:.2f}"])
            record[f"{log} {model_name}"] = {"programs": len(progs), "trained_on": len(train),
                                             "pairwise": acc, "recall_at_5": rec}
    return rows, record


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=300)
    ap.add_argument("--fit", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=5, help="rate measurements per workload (median)")
    ap.add_argument("--log", nargs="*", default=[])
    ap.add_argument("--splits", type=int, default=8)
    ap.add_argument("--stat", choices=("min", "median"), default="min")
    ap.add_argument("--unseen", action="store_true", help="rank each log with models fitted on the others")
    ap.add_argument("--only-quality", action="store_true", help="skip the rate and fit-time parts")
    args = ap.parse_args()
    record: dict = {}
    if not args.only_quality:
        rows, record["features"] = feature_rates(args.programs, args.repeats)
        print_table(["workload", "lower /s", "features /s", "lower+features /s", "stores/program"], rows)
        rows, record["fit"] = fit_times(args.fit)
        print_table(["model", "programs", "fit s", "fit cpu s", "predict s"], rows)
    if args.unseen:
        rows, record["unseen"] = unseen(args.log, args.stat)
        print_table(["log (held out)", "programs", "trained on", "model", "pairwise", "recall@5"], rows)
    elif args.log:
        all_rows: list[list[object]] = []
        record["quality"] = {}
        for log in args.log:
            rows, rec = quality(log, args.splits, args.stat)
            all_rows += rows
            record["quality"].update(rec)
        print_table(["log", "programs", "model", "pairwise", "worst split", "recall@8"], all_rows)
    print(f"results: {write_results('model', record)}")


if __name__ == "__main__":
    main()
