"""The tuning log at scale: append, load, best-per-workload and distill on 100,000 realistic lines.

Every line is a distinct program sampled from the generated (sketch) space of matmul 1024^3 or the
ResNet layer conv2d (64,56,56,64,3,1,1), with three repeats of made-up costs, an error on one line
in twenty, and the ``program`` field the tuner writes (sketch index and annotation). Timings are
single-process wall times (median of ``--rounds``; load also reports its first, cold-cache run).
The baseline decodes every line with ``json.loads`` + ``Record.from_json`` (no step cache).

    python benchmarks/bench_records.py [--lines 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import cpu_name, print_table, write_results

from autosched.records import Record, append_records, best_records, distill, load_records
from autosched.runner.measure import MeasureErrorNo
from autosched.space.generated import SketchSpace
from autosched.task import Task

WORKLOADS = (("matmul", (1024, 1024, 1024)), ("conv2d_nchw", (1, 64, 56, 56, 64, 3, 3, 1, 1)))
ERRORS = (MeasureErrorNo.COMPILE_ERROR, MeasureErrorNo.RUNTIME_ERROR, MeasureErrorNo.WRONG_ANSWER)


def make_records(n: int, seed: int = 0) -> list[Record]:
    """``n`` records, half per workload, each of a distinct sampled program."""
    rng = random.Random(seed)
    out = []
    for w, (name, args) in enumerate(WORKLOADS):
        task = Task(name, args, "c")
        space = SketchSpace(task.workload, task.target)
        seen: set[tuple[Any, ...]] = set()
        while len(seen) < n // len(WORKLOADS) + (w < n % len(WORKLOADS)):
            program = space.sample(rng)
            steps = space.steps(program)
            if steps in seen:
                continue
            seen.add(steps)
            error = rng.choice(ERRORS) if rng.random() < 0.05 else MeasureErrorNo.NO_ERROR
            base = rng.uniform(5e-3, 5e-2)
            out.append(
                Record(
                    workload=(task.workload.name, task.workload.args),
                    workload_key=task.workload.key,
                    target=str(task.target),
                    compiler="gcc (Debian 12.2.0-14) 12.2.0",
                    steps=steps,
                    costs=() if error else tuple(base * rng.uniform(0.98, 1.05) for _ in range(3)),
                    error_no=error,
                    error_msg=f"{error.name.lower()}: made-up message" if error else "",
                    all_cost=rng.uniform(0.5, 3.0),
                    timestamp=1796000000.0 + len(out),
                    version="0.1.0",
                    program={
                        "space": "sketch",
                        "sketch": program.sketch,
                        "annotation": program.annotation.to_json(),
                    },
                )
            )
    rng.shuffle(out)
    return out


def timed(fn: Callable[[], Any], rounds: int) -> tuple[list[float], list[float], Any]:
    """Wall and CPU seconds of each of ``rounds`` calls, and the last result.

    Before each call, untimed, the previous result is dropped and the garbage collector runs, so
    that no call pays for freeing or scanning what an earlier one made.
    """
    walls, cpus, result = [], [], None
    for _ in range(rounds):
        result = None
        gc.collect()
        w, c = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return walls, cpus, result


def baseline_load(path: Path) -> list[Record]:
    """The plain way: every line through json.loads and Record.from_json (steps_from_json)."""
    with open(path) as f:
        return [Record.from_json(json.loads(line)) for line in f]


def append_each(path: Path, records: list[Record], fsync: bool) -> None:
    """One append_records call per record, as a tuning run writes its log."""
    for r in records:
        append_records(path, [r], fsync=fsync)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=1000, help="records per append_records call")
    parser.add_argument("--single", type=int, default=2000, help="records appended one per call")
    args = parser.parse_args()

    t0 = time.perf_counter()
    records = make_records(args.lines)
    print(f"sampled {len(records)} distinct programs in {time.perf_counter() - t0:.1f} s", flush=True)
    key = records[0].workload_key
    load_before = os.getloadavg()
    rows: list[list[object]] = []
    payload: dict[str, Any] = {"lines": args.lines, "batch": args.batch, "rounds": args.rounds, "ops": {}}

    def measure(name: str, fn: Callable[[], Any], rounds: int, per: int, note: str = "") -> Any:
        walls, cpus, result = timed(fn, rounds)
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        rows.append([name, f"{wall:.2f}", f"{cpu:.2f}", f"{wall / per * 1e6:.1f}", note])
        payload["ops"][name] = {"wall_s": walls, "cpu_s": cpus, "per": per}
        print(f"{name}: {wall:.2f} s", flush=True)
        return result

    with tempfile.TemporaryDirectory(prefix="bench-records-") as tmp:
        log, one, out = Path(tmp) / "log.jsonl", Path(tmp) / "one.jsonl", Path(tmp) / "best.jsonl"

        def append_all() -> None:
            log.unlink(missing_ok=True)
            for i in range(0, len(records), args.batch):
                append_records(log, records[i : i + args.batch])

        measure(f"append_records, {args.batch} per call", append_all, args.rounds, len(records))
        payload["file_mb"] = log.stat().st_size / 1e6
        for fsync in (True, False):
            measure(
                f"append_records, 1 per call, fsync={fsync}",
                lambda fsync=fsync: append_each(one, records[: args.single], fsync),
                1,
                args.single,
                f"{args.single} records",
            )
        walls, _, _ = timed(lambda: load_records(log), 1)  # the first load: empty step caches
        loaded = measure(
            "load_records", lambda: load_records(log), args.rounds, len(records), f"cold {walls[0]:.2f} s"
        )
        assert loaded == records
        after, _, _ = timed(gc.collect, 1)
        del loaded
        before, _, _ = timed(gc.collect, 1)
        loaded = load_records(log)
        extra = after[0] - before[0]
        rows.append(["(a full gc.collect(): more time for the loaded records)", f"{extra:.2f}", "", "", ""])
        payload["ops"]["gc_collect_extra_s"] = extra
        mine = measure(
            "load_records, one workload",
            lambda: load_records(log, workload_key=key),
            args.rounds,
            len(records),
        )
        rows[-1][-1] = f"{len(mine)} of {len(records)} kept"
        measure("baseline: json.loads + Record.from_json", lambda: baseline_load(log), 1, len(records))
        best = measure("best_records", lambda: best_records(loaded), args.rounds, len(records))
        rows[-1][-1] = f"{len(best)} best"
        kept = measure("distill (to a new file)", lambda: distill(log, out), args.rounds, len(records))
        rows[-1][-1] = f"{kept} lines kept"
    payload["load_average"] = [load_before, os.getloadavg()]

    print(f"\n{args.lines} lines, {payload['file_mb']:.0f} MB; {cpu_name()}, {os.cpu_count()} cores")
    print(f"load average before/after: {load_before[0]:.1f} / {os.getloadavg()[0]:.1f}\n")
    print_table(["operation", "wall s", "CPU s", "us/line", ""], rows)
    print(f"\nwrote {write_results('records', payload)}")


if __name__ == "__main__":
    main()
