"""Why the search on user-defined operators flattens: small experiments on bench_climb.py's operators.

Without logs (no compiler, no timing; seconds), for each operator's generated space on the
benchmark's target, over ``--samples`` random programs:
- ``reach``: the share that is multi-level tiled, vectorized with a whole-vector innermost tile, and
  parallel (the structure a fast CPU program has);
- ``serial``: the share of tiled programs whose parallel loop has fewer iterations than threads
  (the outer tiles fused into it leave one core idle);
- ``outer moved``: the share of mutations that change a spatial axis's outermost tile level (the
  number of tiles); ``no-op``: the share of mutations that leave the program as it was.

With ``--logs DIR`` (bench_climb.py's logs), for each log:
- ``serial measured``: how many measured tiled programs had too few parallel iterations, and the
  parallel iterations of the best;
- ``1-step``: the share of trials after the 64th that is one choice away from a program measured
  before (a search that only refines one neighbourhood);
- ``rank rho``: Spearman's rank correlation between an XGBoost model fitted on the log's first half
  and the measured speed of the second half, over all of it and over its 32 fastest.

    python benchmarks/climb_probe.py [--cases ...] [--samples 400] [--logs DIR]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
from pathlib import Path
from typing import Any

import numpy as np
from climb_ops import CASES
from common import print_table

import autosched as asc
from autosched.expr import as_int
from autosched.records import is_remeasurement, load_records
from autosched.runner import MeasureInput
from autosched.search.learning import resolve_model
from autosched.space.annotate import TILED, Annotation
from autosched.space.generated import SketchSpace

THREADS = os.cpu_count() or 1
TARGET = f"c -num-threads={THREADS}"


def space_of(label: str) -> SketchSpace:
    name, args = CASES[label]
    return SketchSpace(asc.get_workload(name, args), TARGET)


def outer_extents(op: Any, tiles: dict[str, list[int]]) -> list[int]:
    """The outermost tile level's extent per spatial axis (written here, so that the probe also
    runs on a tree from before ``autosched.space.annotate.outer_extents``)."""
    return [-(-as_int(iv.extent) // math.prod(tiles[iv.name])) for iv in op.axis]


def parallel_iterations(space: SketchSpace, sketch: int, ann: Annotation) -> list[int]:
    """Per tiled stage, the iterations of its parallel loop."""
    return [math.prod(outer_extents(space.ops[p.stage], ann.tiles[p.stage])[: ann.parallel[p.stage]])
            for p in space.sketches[sketch].plans if p.rule in TILED]


def probe_space(label: str, samples: int) -> list[str]:
    space = space_of(label)
    rng = random.Random(0)
    lanes = space.target.vector_lanes("float32")
    reach = serial = tiled = moved = noop = 0
    for _ in range(samples):
        program = space.sample(rng)
        ann = program.annotation
        plans = [p for p in space.sketches[program.sketch].plans if p.rule in TILED]
        iterations = parallel_iterations(space, program.sketch, ann)
        tiled += len(plans)
        serial += sum(i < THREADS for i in iterations)
        reach += any(ann.vectorize[p.stage] and it >= THREADS
                     and ann.tiles[p.stage][space.ops[p.stage].axis[-1].name][-1] % lanes == 0
                     for p, it in zip(plans, iterations, strict=True))
        child = space.mutate(program, rng).annotation
        noop += child == ann
        moved += any(math.prod(child.tiles[st][ax]) != math.prod(f)
                     for st, axes in ann.tiles.items() for ax, f in axes.items() if len(f) == 3)
    return [label, f"{reach / samples:.2f}", f"{serial / tiled:.2f}" if tiled else "-",
            f"{moved / samples:.2f}", f"{noop / samples:.2f}"]


def trial_records(log: Path) -> list[Any]:
    return [r for r in load_records(log)
            if not is_remeasurement(r) and r.program and "annotation" in r.program]


def choices(rec: Any) -> set[tuple[str, str]]:
    out = {("sketch", str(rec.program["sketch"]))}
    for table, stages in rec.program["annotation"].items():
        for stage, value in stages.items():
            items = value.items() if isinstance(value, dict) else [("", value)]
            out |= {(f"{table}/{stage}/{axis}", str(v)) for axis, v in items}
    return out


def probe_log(log: Path) -> list[str]:
    from scipy.stats import spearmanr

    label = log.stem.rsplit("_s", 1)[0]
    space = space_of(label)
    recs = trial_records(log)
    ok = [r for r in recs if r.error_no == 0]
    iterations = [parallel_iterations(space, r.program["sketch"],
                                      Annotation.from_json(r.program["annotation"]))
                  for r in ok]
    serial = sum(any(i < THREADS for i in its) for its in iterations if its)
    best = min(range(len(ok)), key=lambda i: statistics.median(ok[i].costs))
    sets = [choices(r) for r in recs]
    late = [min(len(sets[i] - sets[j]) for j in range(i)) for i in range(64, len(sets))]
    task = asc.Task(*CASES[label], target=TARGET)
    half = len(recs) // 2
    train, test = [r for r in ok if recs.index(r) < half], [r for r in ok if recs.index(r) >= half]
    model = resolve_model("xgb")
    model.fit([MeasureInput(task, r.steps, r.program) for r in train],
              [statistics.median(r.costs) for r in train])
    pred = np.asarray(model.predict([MeasureInput(task, r.steps, r.program) for r in test]))
    speed = -np.array([statistics.median(r.costs) for r in test])
    top = np.argsort(speed)[-32:]
    rho, rho_top = spearmanr(pred, speed).correlation, spearmanr(pred[top], speed[top]).correlation
    return [log.stem, f"{serial}/{len(ok)}", str(iterations[best]),
            f"{sum(d == 1 for d in late) / max(1, len(late)):.2f}", f"{rho:.2f}", f"{rho_top:.2f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--logs", type=Path, help="bench_climb.py's log directory")
    opts = parser.parse_args()
    if opts.logs is None:
        rows = [probe_space(label, opts.samples) for label in opts.cases.split(",")]
        print(f"random programs of each space ({TARGET}, {opts.samples} samples)")
        print_table(["case", "reach", "serial", "outer moved", "no-op"], rows)
        return
    logs = sorted(p for p in opts.logs.glob("*_s*.jsonl") if not p.name.endswith(".model.jsonl"))
    rows = [probe_log(log) for log in logs if log.stem.rsplit("_s", 1)[0] in opts.cases.split(",")]
    print(f"measured programs of each log in {opts.logs} ({TARGET})")
    print_table(["log", "serial measured", "best's parallel iterations", "1-step", "rank rho", "rho top 32"],
                rows)


if __name__ == "__main__":
    main()
