"""Search efficiency on the replay log: trials until each tuner first measures a top-1% program.

The committed log of real measurements (``tests/data/replay_matmul128.jsonl.gz``, made by
``make_replay_log.py``) is served by the replay runner, and the tuners search the log's programs
only (``LogSpace``): deterministic, no compiler. Model-guided tuners use the k-NN test-double model
of ``tests/model_doubles.py`` and, where the model package provides it, the real ``xgb`` model.

    python benchmarks/bench_search.py [--seeds 10] [--cap 400] [--fraction 0.01 | --within 0.9]
        [--tuners random,ga,sa,evolutionary] [--models double,xgb] [--replan-after N]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from common import print_table, write_results  # noqa: E402
from model_doubles import StepKNNModel  # noqa: E402

from autosched.records import steps_key  # noqa: E402
from autosched.search import LogSpace, ModelUnavailable, ReplayLog, ReplayRunner, make_tuner  # noqa: E402
from autosched.search.learning import resolve_model  # noqa: E402
from autosched.search.replay import first_hit  # noqa: E402

LOG = ROOT / "tests" / "data" / "replay_matmul128.jsonl.gz"


class _Found(Exception):
    pass


def trials_to_top(log: ReplayLog, space: LogSpace, name: str, seed: int, model: Any, top: set[str],
                  cap: int, **options: Any) -> int | None:
    """The trial at which the tuner first measures a program of ``top``; None within ``cap``."""
    tuner = make_tuner(name, log.task, space, seed=seed, model=model, **options)
    device = ReplayRunner(log)
    keys: list[str] = []

    def watch(t: object, cands: list[Any], results: object) -> None:
        keys.extend(steps_key(c.steps) for c in cands)
        if first_hit(keys, top) is not None:
            raise _Found

    with contextlib.suppress(_Found):
        tuner.tune(cap, device.measure, batch_size=8, callbacks=[watch])
    assert not device.misses
    return first_hit(keys, top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--cap", type=int, default=400, help="trials per run at most")
    parser.add_argument("--fraction", type=float, default=0.01, help="the top share of programs to reach")
    parser.add_argument("--within", type=float, default=None,
                        help="reach a program this share as fast as the log's best instead (0.9)")
    parser.add_argument("--tuners", default="random,ga,sa,evolutionary")
    parser.add_argument("--replan-after", type=int, default=None, help="evolutionary's search round size")
    parser.add_argument("--models", default="double,xgb")
    parser.add_argument("--log", type=Path, default=LOG)
    opts = parser.parse_args()
    log = ReplayLog(opts.log)
    space = LogSpace(log)
    if opts.within is None:
        top, goal = log.top(opts.fraction), f"top {opts.fraction:.0%}"
    else:
        top, goal = log.within(opts.within), f"within {opts.within:.0%} of the best"
    print(f"{opts.log.name}: {len(log)} programs, {goal}: {len(top)} programs")
    tuners = opts.tuners.split(",")
    runs: list[tuple[str, str, Any]] = [(t, "-", None) for t in ("random", "ga") if t in tuners]
    guided = [t for t in ("sa", "evolutionary") if t in tuners]
    for model in opts.models.split(","):
        if model == "double":
            runs += [(name, "knn-double", StepKNNModel) for name in guided]
            continue
        try:
            resolve_model(model)
        except (ModelUnavailable, ValueError) as err:
            print(f"model {model}: skipped ({err})")
            continue
        runs += [(name, model, lambda m=model: resolve_model(m)) for name in guided]
    rows, out = [], []
    for name, model_label, factory in runs:
        start = time.perf_counter()
        extra = {"replan_after": opts.replan_after} if name == "evolutionary" and opts.replan_after else {}
        hits = [trials_to_top(log, space, name, seed, factory() if factory else None, top, opts.cap, **extra)
                for seed in range(opts.seeds)]
        seconds = time.perf_counter() - start
        capped = [h if h is not None else opts.cap + 1 for h in hits]
        out.append({"tuner": name, "model": model_label, "trials": hits, "seconds": seconds})
        rows.append([name, model_label, " ".join(str(h) if h else f">{opts.cap}" for h in hits),
                     statistics.median(capped), sum(capped) / len(capped), seconds / opts.seeds])
    print_table(["tuner", "model", "trials to top (per seed)", "median", "mean", "s/run"], rows)
    path = write_results("search", {"log": opts.log.name, "programs": len(log), "top": len(top),
                                    "goal": goal, "cap": opts.cap, "replan_after": opts.replan_after,
                                    "rows": out})
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
