"""Settings of the evolutionary search compared on the committed replay log (no compiler, no device).

``tests/data/replay_matmul128.jsonl.gz`` holds thousands of real measurements of matmul 128³; the
replay runner answers each program with its recorded result, so a search is exactly reproducible.
For each setting (JSON keyword options of :class:`~autosched.search.evolutionary.EvolutionaryTuner`)
and each seed, the evolutionary search runs until it measures a program of the log's top 1% (at
most 400 trials, as ``tests/search/test_tuners.py``); the table gives the mean and median trials over the
seeds, with random search for scale. ``--model knn`` is the tests' k-nearest-neighbour double,
``xgb`` the real model. Appended to results/replay_search.json.

    python benchmarks/bench_replay_search.py [--model xgb] [--seeds 30]
        [--options '{"generations": 4, "carry_ratio": 0.0}' '{}']
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from common import print_table, write_results

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from model_doubles import StepKNNModel  # noqa: E402  (the tests' model double)
from test_tuners import DATA, trials_to_top  # noqa: E402  (the tests' replay protocol)

from autosched.search import EvolutionaryTuner, LogSpace, ReplayLog, resolve_model  # noqa: E402
from autosched.search.tuner import TUNERS  # noqa: E402


def configured(options: dict[str, object]) -> type[EvolutionaryTuner]:
    """The evolutionary tuner with ``options`` as its keyword options."""

    class Configured(EvolutionaryTuner):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **{**kwargs, **options})  # type: ignore[arg-type]

    return Configured


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=("knn", "xgb"), default="xgb")
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--options", nargs="+", default=['{"generations": 4, "carry_ratio": 0.0}', "{}"],
                    metavar="JSON", help="tuner options, one JSON object per setting ({}: the defaults)")
    opts = ap.parse_args()
    log = ReplayLog(DATA)
    space = LogSpace(log)
    seeds = range(opts.seeds)
    results: dict[str, list[int]] = {"random": [trials_to_top("random", log, space, s) for s in seeds]}
    for text in opts.options:
        options = json.loads(text)
        if not isinstance(options, dict):
            ap.error(f"--options: not a JSON object: {text}")

        TUNERS["evolutionary-bench"] = configured(options)
        try:
            results[f"evolutionary {text}"] = [
                trials_to_top("evolutionary-bench", log, space, s,
                              StepKNNModel() if opts.model == "knn" else resolve_model("xgb"))
                for s in seeds]
        finally:
            del TUNERS["evolutionary-bench"]
        print(f"  {text}: done", flush=True)
    print(f"trials to the replay log's top 1% (at most 400), {opts.seeds} seeds, model {opts.model}")
    rows = [[name, f"{statistics.mean(r):.1f}", f"{statistics.median(r):g}"] for name, r in results.items()]
    print_table(["search", "mean", "median"], rows)
    payload = {"model": opts.model, "seeds": opts.seeds, "trials": results}
    print(f"\nresults: {write_results('replay_search', payload)}")


if __name__ == "__main__":
    main()
