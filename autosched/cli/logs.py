"""``autosched best``, ``export`` and ``report``: what a tuning log holds, and its best programs."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import warnings
from pathlib import Path

from ..backends import backend_for
from ..diagnostics import PREFIX, AutoschedWarning, format_ms, printable
from ..export.gpu import gpu_export_files
from ..export.kernel import EXECUTABLE, export_files, write_files
from ..export.network import BLOB_BYTES, WEIGHT_FORMS
from ..graph import from_onnx
from ..ops import Workload
from ..records import Record, load_records, pick_best
from ..records.check import logged_target, replay_error
from ..records.report import (
    Summary,
    drift_table,
    model_quality,
    model_quality_table,
    report_table,
    summarize,
    write_report,
)
from ..records.report_html import write_html_report
from ..search.learning import sidecar_path
from ..target import Target
from .basic import parse_value
from .embedded import cmd_export_embedded, cmd_export_network_embedded
from .network import cmd_export_network, is_model, report_networks


def _load(path: str) -> list[Record]:
    """The records of the log ``path``; its warnings (lines skipped) as one line each."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"no tuning log {path!r}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = list(load_records(path))
    for w in caught:
        message = str(w.message) if issubclass(w.category, AutoschedWarning) else printable(w.message)
        print(f"{PREFIX}{message}", file=sys.stderr)
    if not records:
        raise ValueError(f"tuning log {path!r} holds no records")
    return records


def summary_matches(s: Summary, workload: list[str] | None, targets: set[str] | None) -> bool:
    """Whether ``s`` is the workload named (a name, then optionally its leading arguments) on a
    target of ``targets`` (None: any)."""
    if workload:
        name, args = s.records[0].workload
        wanted = [parse_value(a) for a in workload[1:]]
        if name != workload[0] or list(args[: len(wanted)]) != wanted:
            return False
    return targets is None or s.target in targets


def _select(args: argparse.Namespace) -> list[Summary]:
    """The (workload, target) summaries of the log that ``--workload`` and ``--target`` select."""
    summaries = summarize(_load(args.log))
    targets = None if args.target is None else {args.target, str(Target.parse(args.target))}
    chosen = [s for s in summaries if summary_matches(s, args.workload, targets)]
    if not chosen:
        what = " ".join(args.workload or []) + (f" on {args.target}" if args.target else "")
        held = "; ".join(sorted({s.workload for s in summaries}))
        raise ValueError(f"no records of {what.strip()} in {args.log}; it holds: {held}")
    return chosen


def _label(s: Summary, summaries: list[Summary]) -> str:
    """The workload, with the target when several summaries share the workload."""
    shared = sum(o.workload == s.workload for o in summaries) > 1
    return f"{s.workload} on {s.target}" if shared else s.workload


def cmd_best(args: argparse.Namespace) -> int:
    summaries = _select(args)
    if all(s.best is None for s in summaries):
        raise ValueError(f"no valid record in {args.log}: every trial failed")
    if args.json:
        objects = [s.to_json() for s in summaries]
        print(json.dumps(objects[0] if len(objects) == 1 else objects))
        return 0
    for s in summaries:
        info = s.to_json()
        print(f"{printable(s.workload)} on {printable(s.target)}")
        if s.best is None:
            print(f"  no valid trial of {info['trials']}; errors: {info['errors']}")
            continue
        gflops = "n/a" if info["best_gflops"] is None else f"{info['best_gflops']:.2f}"
        print(
            f"  best: {format_ms(info['best_time_ms'])} ms  {gflops} GFLOP/s  {info['steps']} steps"
            f"  program {info['program_key']}  ({info['valid_trials']} valid of {info['trials']} trials)"
        )
    return 0


def _user_cc(target: str | None) -> str | None:
    """The compiler the user's ``--target`` names with ``-cc=``; None if it names none."""
    if target is None or not any(t.startswith("-cc=") for t in shlex.split(target)):
        return None
    return Target.parse(target).cc


def cmd_export(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.exists() and not args.force and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{args.out} exists and is not an empty directory (--force to write into it)")
    if args.static and not args.embedded:
        raise ValueError("--static places an embedded kernel's workspace in static storage: add --embedded")
    if is_model(args.log) and args.embedded:
        return cmd_export_network_embedded(args, from_onnx(args.log))
    if is_model(args.log):
        return cmd_export_network(args)
    if args.embedded:
        return cmd_export_embedded(args, _load(args.log))
    summaries = _select(args)
    if len(summaries) > 1:
        held = "; ".join(_label(s, summaries) for s in summaries)
        raise ValueError(
            f"{args.log} holds several workloads, name one with --workload (and --target): {held}"
        )
    (s,) = summaries
    if not any(r.ok for r in s.records):
        raise ValueError(f"no valid record of {s.workload} in {args.log}: all {len(s.records)} trials failed")
    cc = _user_cc(args.target)
    Workload.from_json(s.records[0].workload)  # registered here? (else one error, not one per program)
    target, _ = logged_target(s.target, cc)  # one a log may name? (runs at most this machine's compiler)
    gpu = backend_for(target).gpu
    if not gpu and not target.is_cpu:
        raise ValueError(f"export writes C, CUDA or OpenCL programs, not {target.kind} ones ({s.workload})")
    if gpu and args.portable:
        raise ValueError(f"--portable is for C kernels: {s.workload} was tuned for a {target.kind} target")
    files: dict[str, str] = {}

    def exports(record: Record) -> str | None:
        """Why ``record`` cannot be exported (its program does not replay, lower or emit)."""
        why = replay_error(record)
        if why is None:
            try:
                if gpu:
                    files.update(gpu_export_files(record, name=args.name))
                else:
                    files.update(export_files(record, name=args.name, portable=args.portable, cc=cc))
            except Exception as err:  # a crafted program may fail anywhere in lowering
                why = f"{type(err).__name__}: {err}"
        return why

    best = pick_best(s.records, check=exports)
    if best is None:
        raise ValueError(f"no program of {s.workload} in {args.log} can be exported (see the warnings)")
    write_files(files, out)
    tuned = format_ms(best.median * 1e3)
    print(f"exported {printable(s.workload)} ({tuned} ms when tuned) to {printable(out)}/")
    where = printable(shlex.quote(str(out)))
    print(f"  make -C {where} run      # check against the reference and time ./{EXECUTABLE}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    if args.model and not args.html:
        raise ValueError("--model gives the network's task weights to the HTML report: add --html OUT.html")
    records = _load(args.log)
    print(report_table(records))
    drift = drift_table(records)
    if drift is not None:
        print("\nmachine drift while measuring (the calibration kernel timed beside the measurements):")
        print(drift)
    quality = model_quality_table(sidecar_path(args.log))
    if quality is not None:
        print(f"\ncost model quality per batch, before each refit ({sidecar_path(args.log)}):")
        print(quality)
    if args.html:
        sidecar = sidecar_path(args.log)
        networks = report_networks(args.model, records, args.log) if args.model else []
        page = write_html_report(records, args.html, quality=model_quality(sidecar), networks=networks,
                                 title=Path(args.log).name, sidecar=sidecar.name)
        print(f"report: {printable(page)}")
    if args.out or not args.html:
        out = write_report(records, args.out or Path(args.log).with_suffix(".png"))
        print(f"tuning curves: {printable(out)}")
    return 0


def _log_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("log", help="tuning log (JSON lines)")
    parser.add_argument(
        "--workload",
        nargs="+",
        metavar="W",
        help="only this workload: a name, optionally followed by its leading arguments (matmul 64 64)",
    )
    parser.add_argument("--target", help="only records of this target string")


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``best``, ``export`` and ``report`` subcommands."""
    best = sub.add_parser("best", help="print the best program per workload and target of a log")
    _log_args(best)
    best.add_argument("--json", action="store_true", help="one JSON object (a list for several workloads)")
    best.set_defaults(func=cmd_best)
    export = sub.add_parser(
        "export", help="write a log's best program as a standalone C kernel, or a network as one C library",
        description="autosched export LOG --out DIR writes the best program of a tuning log as a standalone "
        "C kernel directory (kernel.c/.h, reference.c, main.c, a Makefile). autosched export MODEL.onnx "
        "--log LOG --out DIR exports a whole network (an ONNX model) as one C library: model.c/.h, one "
        "file per kernel (the log's best, else the default schedule), the weights, main.c and a Makefile. "
        "With --embedded --target 'c -cc=arm-none-eabi-gcc -mcpu=cortex-m4' either is written for a "
        "microcontroller: no heap, OS or OpenMP, the sizes measured, and a check program for QEMU's board.",
    )
    _log_args(export)
    export.add_argument(
        "--out", required=True, help="directory to write kernel.c/.h, main.c, Makefile to (new or empty)"
    )
    export.add_argument("--name", help="the kernel's C name (default: WORKLOAD_kernel)")
    export.add_argument("--portable", action="store_true", help="strict C99: no vector extensions or OpenMP")
    export.add_argument("--force", action="store_true", help="write into DIR even if it is not empty")
    export.add_argument("--embedded", action="store_true",
                        help="for a microcontroller: no heap, no OS, no OpenMP; --target is then the "
                        "bare-metal target to print the log's best program for "
                        "(c -cc=arm-none-eabi-gcc -mcpu=cortex-m4)")
    export.add_argument("--static", action="store_true",
                        help="with --embedded: the workspace in static storage, not a parameter")
    export.add_argument("--log", dest="model_log", metavar="LOG",
                        help="with MODEL.onnx in place of LOG: the tuning log of the model's tasks")
    export.add_argument("--weights", choices=WEIGHT_FORMS, default="auto",
                        help="a model's weights as a C array (weights.c), a binary file (weights.bin), "
                        f"or auto: the file above {BLOB_BYTES >> 20} MiB of constants (default: auto)")
    export.set_defaults(func=cmd_export)
    report = sub.add_parser("report", help="print a table of a log and plot its tuning curves")
    report.add_argument("log", help="tuning log (JSON lines)")
    report.add_argument("--out", help="PNG to write (default: the log's name with .png; none with --html)")
    report.add_argument("--html", metavar="OUT.html",
                        help="write one self-contained HTML page: curves, tasks, model quality, errors")
    report.add_argument("--model", metavar="MODEL.onnx",
                        help="with --html: the network the log tuned (task weights, end-to-end latency)")
    report.set_defaults(func=cmd_report)
