"""Measure a log's programs again, in independent sessions: how much do its labels repeat?

A cost model is scored by how well it orders programs the way their measured times do, so the
measurements themselves bound any score: two measurements of the same programs that order only
80% of the pairs alike leave no model room above that. This script builds every valid program of
each log once, times it in ``--sessions`` fresh runner processes (the robust settings of the
dataset: 31 one-run repeats, the minimum kept), writes one log per session and a combined log
(every session's repeats, so its labels are the minimum over all of them), and prints per log the
pairwise agreement of the logged labels with session 0 and of the sessions with each other.

    python benchmarks/remeasure.py LOG... --out DIR [--sessions 2]

The combined logs under ``DIR`` are ordinary tuning logs: ``bench_model_transfer.py --log
DIR/*.jsonl`` or ``--within DIR/LOG`` scores the model against the cleaner labels. Resumable: a
log whose outputs exist is only compared again.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from common import print_table, write_results
from make_replay_log import OPTION

from autosched.database.machine import fingerprint_for
from autosched.model import from_records, pairwise_accuracy
from autosched.records import append_records, load_records
from autosched.records.best import is_remeasurement
from autosched.records.log import Record
from autosched.runner.builder import LocalBuilder
from autosched.runner.compile import compiler_version
from autosched.runner.local_runner import LocalRunner
from autosched.search.replay import read_log

CHUNK = 64  # programs per runner call: progress, and a bounded loss if interrupted


def stem(log: Path) -> str:
    """``a.jsonl.gz`` -> ``a``."""
    return log.name.split(".jsonl")[0]


def measure(records: list[Record], sessions: int, out: Path, name: str) -> list[list[Record]]:
    """Every record's program built once and timed in ``sessions`` fresh runners; the records of
    session ``s`` go to ``out/session{s}/name.jsonl``."""
    inputs, _ = from_records(records)
    machine = fingerprint_for(inputs[0].task.target)
    with LocalBuilder() as builder:
        t0 = time.perf_counter()
        builds = builder.build(inputs)
        print(f"  built {len(inputs)} programs in {time.perf_counter() - t0:.0f} s", flush=True)
        done = []
        for s in range(sessions):
            path = out / f"session{s}" / f"{name}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.unlink(missing_ok=True)
            with LocalRunner(OPTION, seed=s) as runner:
                for lo in range(0, len(inputs), CHUNK):
                    part = slice(lo, lo + CHUNK)
                    results = runner.run(inputs[part], builds[part])
                    append_records(path, [
                        Record.from_measure(i, r, compiler_version("gcc"), rec.program, machine)
                        for i, r, rec in zip(inputs[part], results, records[part], strict=True)
                    ], fsync=False)
            done.append(load_records(path))
            print(f"  session {s}: {path}", flush=True)
    return done


def combined(sessions: list[list[Record]]) -> list[Record]:
    """One record per program with the repeats of all sessions (failed if any session failed)."""
    out = []
    for recs in zip(*sessions, strict=True):
        ok = all(r.ok for r in recs)
        costs = tuple(c for r in recs for c in r.costs) if ok else recs[0].costs
        out.append(recs[0] if not ok else replace(recs[0], costs=costs))
    return out


def label(records: list[Record]) -> np.ndarray:
    """Each record's minimum repeat (infinite when it failed)."""
    return np.array([min(r.costs) if r.ok else np.inf for r in records])


def agreement(a: np.ndarray, b: np.ndarray) -> float:
    """Pairwise accuracy of one measurement's order against another's, both finite only."""
    keep = np.isfinite(a) & np.isfinite(b)
    return pairwise_accuracy(-a[keep], b[keep])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--sessions", type=int, default=2)
    ap.add_argument("--results-name", default="remeasure")
    opts = ap.parse_args()
    if opts.sessions < 1:
        ap.error("--sessions must be at least 1")
    rows, result = [], []
    for log in opts.logs:
        name = stem(log)
        logged = [r for r in read_log(log) if r.ok and not is_remeasurement(r)]
        paths = [opts.out / f"session{s}" / f"{name}.jsonl" for s in range(opts.sessions)]
        print(f"{name}: {len(logged)} valid programs", flush=True)
        if all(p.exists() and len(load_records(p)) == len(logged) for p in paths):
            sessions = [load_records(p) for p in paths]
        else:
            sessions = measure(logged, opts.sessions, opts.out, name)
        both = combined(sessions)
        (opts.out / f"{name}.jsonl").unlink(missing_ok=True)
        append_records(opts.out / f"{name}.jsonl", both, fsync=False)
        old, new = label(logged), [label(s) for s in sessions]
        retest = [agreement(new[0], n) for n in new[1:]]
        entry = {"log": name, "programs": len(logged), "logged_vs_session0": agreement(old, new[0]),
                 "session0_vs_others": retest,
                 "median_ratio_logged_to_new": float(np.nanmedian(old / label(both)))}
        result.append(entry)
        rows.append([name, len(logged), f"{entry['logged_vs_session0']:.3f}",
                     " ".join(f"{x:.3f}" for x in retest) or "-",
                     f"{entry['median_ratio_logged_to_new']:.2f}"])
    print_table(["log", "programs", "logged vs session 0", "session 0 vs others", "logged / new time"], rows)
    means = np.mean([[e["logged_vs_session0"], *e["session0_vs_others"][:1]] for e in result], axis=0)
    print("mean agreement:", " / ".join(f"{m:.3f}" for m in means))
    print(f"results: {write_results(opts.results_name, {'logs': result})}")


if __name__ == "__main__":
    main()
