"""The model-guided search's own time per trial, without a compiler or a device in the way.

The evolutionary search with the ``xgb`` model runs on a workload's sketch space as ``asc.tune``
runs it (batches of ``2 x cores + 2``, a refit after each batch), but each program's "measured"
cost is a stand-in computed from its key (a hash), so every setting searches exactly the same
programs and the wall time is the search alone: drawing children, lowering and describing them
(:mod:`autosched.model.feature_workers`' helper processes, or this process), fitting and
predicting. Each setting runs in its own process (``AUTOSCHED_FEATURE_WORKERS``), alternating,
``--rounds`` times; the table gives milliseconds per trial (median and range), the share of it
spent in Python's garbage collector (timed with ``gc.callbacks``) and checks that every run drew
the same programs. ``--options`` compares settings of the tuner itself (JSON keyword options of
:class:`~autosched.search.evolutionary.EvolutionaryTuner`, one setting each).

    python benchmarks/bench_search_overhead.py [--trials 256] [--rounds 2] [--workers 0 2]
        [--cases conv64p matmul512] [--baseline TREE] [--options '{}' '{"generations": 2}']
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from common import cpu_name, median, print_table, write_results

CASES = {
    "conv64p": ("fused_conv2d_packed", (1, 64, 56, 56, 64, 3, 3, 1, 1, 8, "")),
    "matmul512": ("matmul", (512, 512, 512)),
}

#: one search in a fresh process: argv = workload name, JSON args, trials, target; prints JSON
_RUN = """
import gc, hashlib, json, sys, time
import xgboost  # imported before the clock starts, as a tuning process has it
import autosched as asc
from autosched.model import feature_workers
from autosched.runner.measure import MeasureResult
from autosched.search import make_space, make_tuner, resolve_model

name, args, trials, target = sys.argv[1], tuple(json.loads(sys.argv[2])), int(sys.argv[3]), sys.argv[4]
options = json.loads(sys.argv[5])
task = asc.Task(name, args, target=target)
cores = task.target.cores or 1

def stand_in(cands):  # a cost from the program's key: the same programs in every setting
    return [MeasureResult((1e-3 * (1 + 4 * int(hashlib.sha256(c.key.encode()).hexdigest()[:8], 16) / 2**32),))
            for c in cands]

keys = []
collecting = [0.0, 0.0]  # seconds in the garbage collector, start of the current collection
def clock(phase, info):
    if phase == "start":
        collecting[1] = time.perf_counter()
    else:
        collecting[0] += time.perf_counter() - collecting[1]
gc.callbacks.append(clock)
tuner = make_tuner("evolutionary", task, make_space(task, "sketch"), seed=0, model=resolve_model("xgb"),
                   **options)
start = time.perf_counter()
def note(tuner, cands, results):
    keys.extend(c.key for c in cands)

with feature_workers.session():
    tuner.tune(trials, stand_in, batch_size=2 * cores + 2, callbacks=[note])
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "gc_seconds": collecting[0], "trials": tuner.trials,
                  "programs": hashlib.sha256("".join(keys).encode()).hexdigest()[:12]}))
"""


def run(case: str, workers: int, trials: int, tree: str | None = None,
        options: str = "{}") -> dict[str, object]:
    """One search of ``case`` with ``workers`` helper processes and tuner ``options`` (JSON), in a
    fresh process (importing autosched from the source tree ``tree`` if given)."""
    name, args = CASES[case]
    env = {**os.environ, "AUTOSCHED_FEATURE_WORKERS": str(workers), "PYTHONHASHSEED": "0"}
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([tree, env.get("PYTHONPATH", "")])
    target = f"c -num-threads={len(os.sched_getaffinity(0))}"
    # run from the tree: ``python -c`` puts the working directory first on the import path
    done = subprocess.run([sys.executable, "-c", _RUN, name, json.dumps(args), str(trials), target, options],
                          env=env,
                          cwd=tree, capture_output=True, text=True, timeout=3600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--baseline", metavar="TREE",
                        help="also run every setting with autosched from this source tree (a worktree "
                             "of an older commit: git worktree add TREE COMMIT), alternating with this one")
    parser.add_argument("--options", nargs="+", default=["{}"], metavar="JSON",
                        help="tuner options to compare, one JSON object per setting (default: {})")
    opts = parser.parse_args()
    for text in opts.options:
        if not isinstance(json.loads(text), dict):
            parser.error(f"--options: not a JSON object: {text}")
    print(f"{cpu_name()}; {len(os.sched_getaffinity(0))} cores; {opts.trials} trials; the search alone")
    start = time.monotonic()
    # (label, helpers, source tree, tuner options)
    settings = [(f"{w} {o}" if len(opts.options) > 1 else f"{w}", w, None, o)
                for w in opts.workers for o in opts.options]
    if opts.baseline:
        pairs = (((f"{label} (baseline)", w, opts.baseline, o), (label, w, None, o))
                 for label, w, _, o in settings)
        settings = [s for pair in pairs for s in pair]
    runs: dict[str, dict[str, list[dict[str, object]]]] = {
        c: {label: [] for label, _, _, _ in settings} for c in opts.cases
    }
    for case in opts.cases:
        for r in range(opts.rounds):
            for label, w, tree, options in settings:
                got = run(case, w, opts.trials, tree, options)
                runs[case][label].append(got)
                print(f"  {case} round {r + 1}, {label} helpers: {got['seconds']:.1f} s", flush=True)
    options_of = {label: o for label, _, _, o in settings}
    rows = []
    for case, by_workers in runs.items():
        for w, results in by_workers.items():
            # the same programs in every run with these options (other options draw others)
            programs = {str(g["programs"]) for label, rs in by_workers.items() for g in rs
                        if options_of[label] == options_of[w]}
            ms = [1e3 * float(g["seconds"]) / opts.trials for g in results]  # type: ignore[arg-type]
            gc_share = [float(g["gc_seconds"]) / float(g["seconds"]) for g in results]  # type: ignore[arg-type]
            rows.append([case, w, f"{median(ms):.0f}", f"{min(ms):.0f}-{max(ms):.0f}",
                         f"{100 * median(gc_share):.0f}%",
                         "yes" if len(programs) == 1 else f"no ({len(programs)} sequences)"])
    print()
    print_table(["case", "helpers, options", "ms per trial (median)", "range", "in the garbage collector",
                 "same programs in every run"], rows)
    payload = {"cpu": cpu_name(), "trials": opts.trials, "rounds": opts.rounds,
               "wall_s": time.monotonic() - start,
               "baseline": opts.baseline, "options": opts.options,
               "runs": {c: dict(by) for c, by in runs.items()}}
    print(f"\nresults: {write_results('search_overhead', payload)}")


if __name__ == "__main__":
    main()
