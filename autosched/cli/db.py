"""``autosched db list|best|export|gc``: inspect and tidy the tuning database.

    autosched db list   [--db DIR] [--json]          machines, logs, targets, records, workloads
    autosched db best   [--db DIR] [--workload W ARGS...] [--target T] [--machine FP] [--json]
    autosched db export --out DIR [--workload W ARGS...] [--target T] [--machine FP] [--name C]
                        [--portable] [--db DIR]      the best program as a standalone C kernel
    autosched db gc     [--db DIR] [--dry-run]       keep the best record per workload, drop junk

Everything read from the database (names, targets, machine descriptions) is printed through
:func:`~autosched.diagnostics.printable`.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..database import Database, fingerprint, host_description
from ..database.machine import summary as machine_summary
from ..diagnostics import printable
from ..export.kernel import EXECUTABLE, export_kernel
from ..records import RecordError, load_records
from ..records.report import Summary, summarize
from ..target import Target
from .logs import summary_matches


@dataclass
class _Log:
    """One log of the database, read."""

    path: Path
    machine: str  # fingerprint
    summaries: list[Summary]
    error: str | None = None


def _database(args: argparse.Namespace) -> Database:
    """The database ``--db`` names (it must exist), or the default one (perhaps not made yet)."""
    db = Database(args.db)
    if args.db is not None and not db.path.is_dir():
        raise FileNotFoundError(f"no tuning database at {args.db!r} (not a directory)")
    return db


def _read(db: Database, machine: str | None = None) -> list[_Log]:
    """Every log of the database (of one machine), read; a log that is not one keeps its error."""
    logs = []
    for path in db.logs(machine):
        try:
            summaries = summarize(load_records(path))
        except (RecordError, OSError) as err:
            logs.append(_Log(path, path.parent.name, [], str(err)))
            continue
        logs.append(_Log(path, path.parent.name, summaries))
    return logs


def _here() -> str:
    return fingerprint(host_description())


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _p(text: object) -> str:
    return printable(text, limit=400)


def cmd_list(args: argparse.Namespace) -> int:
    db, here = _database(args), _here()
    machines = db.machines()
    logs = _read(db)
    if args.json:
        out: dict[str, Any] = {"path": str(db.path), "this_machine": here, "machines": []}
        for fp, info in machines.items():
            mine = [lg for lg in logs if lg.machine == fp]
            entries = [
                {
                    "file": lg.path.name,
                    "error": lg.error,
                    "records": sum(len(s.records) for s in lg.summaries),
                    "valid": sum(r.ok for s in lg.summaries for r in s.records),
                    "summaries": [s.to_json() for s in lg.summaries],
                }
                for lg in mine
            ]
            machine = {"fingerprint": fp, "this_machine": fp == here, "machine": info, "logs": entries}
            out["machines"].append(machine)
        print(json.dumps(out))
        return 0
    print(f"tuning database {_p(db.path)} (this machine: {here})")
    if not machines:
        print("  empty: autosched tune (or asc.tune) without a log records here")
    for fp, info in machines.items():
        mark = " (this machine)" if fp == here else ""
        print(f"machine {_p(fp)}{mark}: {_p(machine_summary(info)) if info else 'no machine.json'}")
        mine = [lg for lg in logs if lg.machine == fp]
        if not mine:
            print("  no logs")
        for lg in mine:
            if lg.error is not None:
                print(f"  {_p(lg.path.name)}: not a tuning log: {_p(lg.error)}")
                continue
            n = sum(len(s.records) for s in lg.summaries)
            valid = sum(r.ok for s in lg.summaries for r in s.records)  # valid records
            names = {s.workload for s in lg.summaries}
            counts = f"{_count(n, 'record')} ({valid} valid), {_count(len(names), 'workload')}"
            print(f"  {_p(lg.path.name)}: {counts}")
            for target in dict.fromkeys(s.target for s in lg.summaries):
                print(f"    target {_p(target)}")
                for s in (s for s in lg.summaries if s.target == target):
                    best = "no valid trial" if s.best is None else f"best {s.best.median * 1e3:.4g} ms"
                    print(f"      {_p(s.workload)}: {_count(len(s.records), 'record')}, {best}")
    return 0


def _select(args: argparse.Namespace, db: Database) -> list[tuple[_Log, Summary]]:
    """The (log, summary) pairs that ``--workload``, ``--target`` and ``--machine`` select."""
    if args.machine is not None and args.machine not in db.machines():
        known = ", ".join(db.machines()) or "none"
        raise ValueError(f"no machine {args.machine!r} in the tuning database {db.path}; it has: {known}")
    targets = None if args.target is None else {args.target, str(Target.parse(args.target))}
    chosen = [
        (lg, s)
        for lg in _read(db, args.machine)
        for s in lg.summaries
        if summary_matches(s, args.workload, targets)
    ]
    if not chosen:
        what = " ".join(args.workload or []) + (f" on {args.target}" if args.target else "")
        where = f" for machine {args.machine}" if args.machine else ""
        what = what.strip() or "any workload"
        raise ValueError(f"no records of {what}{where} in the tuning database {db.path}")
    return chosen


def cmd_best(args: argparse.Namespace) -> int:
    db, here = _database(args), _here()
    chosen = _select(args, db)
    if all(s.best is None for _, s in chosen):
        raise ValueError(f"no valid record in the tuning database {db.path}: every trial selected failed")
    if args.json:
        objects = [{**s.to_json(), "machine": lg.machine, "log": str(lg.path)} for lg, s in chosen]
        print(json.dumps(objects))
        return 0
    machine = None
    for lg, s in chosen:
        if lg.machine != machine:
            machine = lg.machine
            print(f"machine {_p(machine)}{' (this machine)' if machine == here else ''}")
        info = s.to_json()
        print(f"  {_p(s.workload)} on {_p(s.target)}")
        if s.best is None:
            print(f"    no valid trial of {info['trials']}; errors: {_p(info['errors'])}")
            continue
        gflops = "n/a" if info["best_gflops"] is None else f"{info['best_gflops']:.2f}"
        print(
            f"    best: {info['best_time_ms']:.4g} ms  {gflops} GFLOP/s  {info['steps']} steps"
            f"  program {info['program_key']}  ({info['valid_trials']} valid of {info['trials']} trials)"
        )
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    db, here = _database(args), _here()
    chosen = _select(args, db)
    if len(chosen) > 1 and args.machine is None and any(lg.machine == here for lg, _ in chosen):
        chosen = [(lg, s) for lg, s in chosen if lg.machine == here]  # this machine's records first
    if len(chosen) > 1:
        held = "; ".join(f"{s.workload} on {s.target} (machine {lg.machine})" for lg, s in chosen)
        raise ValueError(
            f"the tuning database holds several matches; choose with --workload, --target, --machine: {held}"
        )
    ((lg, s),) = chosen
    if s.best is None:
        raise ValueError(f"no valid record of {s.workload} in {lg.path}: all {len(s.records)} trials failed")
    out = export_kernel(s.best, args.out, name=args.name, portable=args.portable)
    when = f"{s.best.median * 1e3:.4g} ms when tuned on {_p(lg.machine)}"
    print(f"exported {_p(s.workload)} ({when}) to {out}/")
    print(f"  make -C {out} run      # check against the reference and time ./{EXECUTABLE}")
    return 0


def _size(n: int) -> str:
    if abs(n) < 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} KiB" if abs(n) < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


def cmd_gc(args: argparse.Namespace) -> int:
    db = _database(args)
    report = db.gc(dry_run=args.dry_run)
    verbs = {"distilled": "would distill", "removed": "would remove"} if args.dry_run else {}
    for a in report.actions:
        if a.action == "kept":
            continue
        name = a.path.relative_to(db.path) if a.path.is_relative_to(db.path) else a.path
        detail = f" ({a.records_after} left)" if a.action == "distilled" else ""
        freed = f"{_size(a.freed)} {'to free' if args.dry_run else 'freed'}"
        print(f"{verbs.get(a.action, a.action)} {_p(name)}: {_p(a.why)}{detail}, {freed}")
    distilled = sum(a.action == "distilled" for a in report.actions)
    verb = "would free" if args.dry_run else "freed"
    counts = f"{_count(distilled, 'log')} distilled, {_count(report.removed, 'file')} removed"
    print(f"gc {verb} {_size(report.freed)}: {counts}")
    return 0


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--workload",
        nargs="+",
        metavar="W",
        help="only this workload: a name, optionally followed by its leading arguments (matmul 64 64)",
    )
    p.add_argument("--target", help="only records of this target string")
    p.add_argument("--machine", metavar="FP", help="only this machine's records (a fingerprint from db list)")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``db`` subcommand and its own subcommands."""
    db = sub.add_parser("db", help="the tuning database: list, best, export, gc")
    cmds = db.add_subparsers(dest="db_command", required=True)
    parsers = []
    p = cmds.add_parser("list", help="machines, logs, targets, record counts and workloads")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(func=cmd_list)
    parsers.append(p)
    p = cmds.add_parser("best", help="the best program per workload, target and machine")
    _filters(p)
    p.add_argument("--json", action="store_true", help="a JSON list")
    p.set_defaults(func=cmd_best)
    parsers.append(p)
    p = cmds.add_parser("export", help="write one workload's best program as a standalone C kernel")
    _filters(p)
    p.add_argument("--out", required=True, help="directory to write kernel.c/.h, main.c, Makefile to")
    p.add_argument("--name", help="the kernel's C name (default: WORKLOAD_kernel)")
    p.add_argument("--portable", action="store_true", help="strict C99: no vector extensions or OpenMP")
    p.set_defaults(func=cmd_export)
    parsers.append(p)
    p = cmds.add_parser("gc", help="distill each log to its best records, remove empty and broken files")
    p.add_argument("--dry-run", action="store_true", help="change nothing, say what would be done")
    p.set_defaults(func=cmd_gc)
    parsers.append(p)
    for p in parsers:
        p.add_argument("--db", metavar="DIR", help="database directory (default: $AUTOSCHED_DB or ~/.cache)")
