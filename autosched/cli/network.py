"""``autosched tasks``, ``tune``, ``run`` and ``export`` of a MODEL.onnx: a network's tasks, tuned,
run against onnxruntime, exported.

``tasks`` lists the fused workloads of a model (its tasks) with their FLOPs, weight (how often
each occurs) and share of the model's FLOPs. ``tune`` with a ``.onnx`` file in place of a workload
tunes all of them into one log, the trials shared by the task scheduler; ``run`` builds the network
(tuned from a log, or untuned), checks it against onnxruntime and times both on the same cores
(:mod:`autosched.graph.side_by_side`); ``export`` writes the network as one C library
(:mod:`autosched.export.network`).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import sys
from typing import Any

from ..backends import backend_for
from ..diagnostics import format_ms, printable
from ..export.network import export_network, write_network
from ..graph import build_network, extract_tasks, from_onnx, tune_network
from ..graph.inputs import sample_inputs
from ..graph.side_by_side import interleaved, max_relative_error, ort_feeds, ort_session
from ..graph.tuning import log_name
from ..records import Record
from ..records.report_network import ModelTask, Network
from ..runner.measure import MeasureOption
from ..search.scheduler import STRATEGIES
from ..search.tuning_space import AUTO
from ..target import Target
from .worker import security_of


def is_model(name: str) -> bool:
    """Whether a command-line workload argument names an ONNX model file."""
    return name.lower().endswith(".onnx")


def report_networks(model: str, records: list[Record], log: str) -> list[Network]:
    """The networks of ``model`` whose tasks ``records`` (those of the tuning log ``log``) measured:
    one per target of the log that has records of its tasks, with the tasks' weights (as
    ``tune_network`` takes them). Raises ValueError when the log has none of the model's tasks."""
    graph = from_onnx(model)
    held = {(r.workload_key, r.target) for r in records}
    networks, count = [], 0
    for target in dict.fromkeys(r.target for r in records):
        tasks = extract_tasks(graph, target)
        count = len(tasks)
        if any((t.workload.key, target) in held for t in tasks):
            model_tasks = tuple(ModelTask(t.workload.key, str(t.workload), t.weight) for t in tasks)
            networks.append(Network(graph.name, target, model_tasks))
    if not networks:
        raise ValueError(f"{log} has no records of the {count} tasks of {model} "
                         f"(tune them with: autosched tune {model} --log {log})")
    return networks


def cmd_tasks(args: argparse.Namespace) -> int:
    """Print the model's tasks: workload, FLOPs, weight, share of total FLOPs."""
    tasks = extract_tasks(from_onnx(args.model), args.target)
    if args.json:
        rows = [{"workload": str(t.workload), "flops": t.flops, "weight": t.weight, "share": t.share}
                for t in tasks]
        print(json.dumps(rows))
        return 0
    total = sum(t.flops * t.weight for t in tasks)
    print(f"{len(tasks)} tasks, {sum(t.weight for t in tasks)} kernels, {total / 1e6:.2f} MFLOP in all")
    print(f"{'#':>3}  {'MFLOP':>10}  {'weight':>6}  {'share':>6}  workload")
    for i, t in enumerate(tasks):
        wl = printable(str(t.workload), limit=200)
        print(f"{i:>3}  {t.flops / 1e6:>10.3f}  {t.weight:>6}  {100 * t.share:>5.1f}%  {wl}")
    return 0


def cmd_tune_network(args: argparse.Namespace) -> int:
    """``autosched tune MODEL.onnx``: tune every task of the model into one log."""
    if args.args:
        raise ValueError(f"tune {args.workload}: a model takes no workload arguments, got {args.args}")
    if getattr(args, "board", None) or getattr(args, "boards", None):
        raise ValueError(f"tune {args.workload}: tuning a whole model on boards is not supported yet; "
                         "tune its tasks (autosched tasks MODEL.onnx) one by one with --board")
    graph = from_onnx(args.workload)
    log = args.log or log_name(graph)
    option = MeasureOption(number=args.number, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms,
                           build_timeout=args.build_timeout, run_timeout=args.run_timeout)
    target = args.target or "c"
    result = tune_network(graph, trials=args.trials, log=log, scheduler=args.scheduler, target=target,
                          tuner=args.tuner, space=args.space or AUTO, seed=args.seed or 0, option=option,
                          progress=not args.quiet, cluster=args.cluster,
                          security=security_of(args, "client"), remeasure=args.remeasure)
    if args.json:
        print(json.dumps(result.to_json()))
        return 0
    for t in result.tasks:
        best = f"{format_ms(t['best_ms'])} ms" if t["best_ms"] is not None else "no valid program"
        print(f"  {printable(t['workload'], limit=200)}  x{t['weight']}: {t['trials']} trials, {best}")
    missing = sum(1 for t in result.tasks if t["best_ms"] is None)
    latency = f"{format_ms(result.latency_ms)} ms"
    if missing:
        latency = f"unknown ({missing} task{'s' if missing > 1 else ''} without a program)"
    print(f"  estimated end-to-end latency: {latency}; log {result.log}")
    if missing:
        print("  (build_network and export use the untuned default schedule for those tasks)")
    return 0


def run_target(args: argparse.Namespace) -> Target:
    """The target of ``autosched run``: ``--target``, a CPU target's thread count replaced by
    ``--threads`` (on a GPU target ``--threads`` is onnxruntime's alone)."""
    target = Target.parse(args.target)
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be at least 1, got {args.threads}")
        if target.is_cpu:
            target = dataclasses.replace(target, num_threads=args.threads)
    return target


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def cmd_run_network(args: argparse.Namespace) -> int:
    """``autosched run MODEL.onnx``: build the network, check it against onnxruntime, time both."""
    if args.args:
        raise ValueError(f"run {args.workload}: a model takes no workload arguments, got {args.args}")
    target = run_target(args)
    if not (target.is_native or backend_for(target).gpu):
        raise ValueError(f"run {args.workload} runs the network here: --target must be this machine's C "
                         f"target (e.g. 'c') or a GPU target ('cuda', 'opencl'), got {target}")
    against = args.against or ("onnxruntime" if importlib.util.find_spec("onnxruntime") else "none")
    rtol = 1e-4 if args.rtol is None else args.rtol
    threads = target.num_threads or args.threads or 1  # onnxruntime's, matched to a CPU target's
    graph = from_onnx(args.workload)
    net = build_network(graph, args.log, target=str(target))
    inputs = sample_inputs(graph)
    ours = net(*inputs)
    summary: dict[str, Any] = {
        "model": args.workload, "graph": graph.name, "target": str(target), "threads": threads,
        "tasks": len(net.built), "tuned": sum(b.tuned for b in net.built), "log": args.log,
        "against": against, "rtol": rtol, "rounds": args.rounds, "ok": True, "error": None,
        "device": target.kind if backend_for(target).gpu else None,
    }
    if args.against is None and against == "none":
        summary["note"] = "onnxruntime is not installed: pip install onnxruntime"
    sides = {"autosched": lambda: net(*inputs)}
    if against == "onnxruntime":
        session = ort_session(args.workload, threads)
        feeds = ort_feeds(session, graph, inputs)
        error = max_relative_error(ours if isinstance(ours, list) else [ours], session.run(None, feeds))
        summary["ok"] = error.relative <= rtol
        summary["error"] = {"output": error.output, "max_abs_error": _finite(error.max_error),
                            "max_abs_reference": error.max_reference, "relative": _finite(error.relative)}
        sides["onnxruntime"] = lambda: session.run(None, feeds)
    if summary["ok"]:
        times = interleaved(sides, args.rounds)
        summary.update({f"{name}_ms": t * 1e3 for name, t in times.items()})
        if "onnxruntime" in times:
            summary["ratio"] = times["autosched"] / times["onnxruntime"]
    if args.json:
        print(json.dumps(summary))
    else:
        _print_run(summary)
    if not summary["ok"]:
        print(f"autosched: the outputs differ from onnxruntime's by more than --rtol {rtol:g}",
              file=sys.stderr)
        return 1
    return 0


def _print_run(s: dict[str, Any]) -> None:
    """``autosched run MODEL.onnx``'s summary as text: the check, then a table of the timings."""
    how = f"{s['tasks']} tasks, untuned (default schedules)"
    if s["log"]:
        how = f"{s['tuned']} of {s['tasks']} tasks tuned from {s['log']}"
    print(f"{printable(s['model'])}: {how}")
    e = s["error"]
    if e is None:
        print(f"  check: none ({s.get('note', '--against none')})")
    else:
        verdict = "ok" if s["ok"] else "WRONG"
        rel = "inf or NaN" if e["relative"] is None else f"{e['relative']:.3g}"
        err = "NaN" if e["max_abs_error"] is None else f"{e['max_abs_error']:.3g}"
        print(f"  check against onnxruntime: max |error| {err}, max |reference| "
              f"{e['max_abs_reference']:.4g} (output {e['output']}): relative {rel}, "
              f"tolerance {s['rtol']:g}: {verdict}")
    if not s["ok"]:
        return
    base = s.get("onnxruntime_ms")
    print(f"  {'':12} {'ms/run':>10} {'ratio':>7}")
    for name in ("autosched", "onnxruntime"):
        if f"{name}_ms" in s:
            ratio = f"{s[f'{name}_ms'] / base:.2f}x" if base else "-"
            print(f"  {name:12} {s[f'{name}_ms']:>10.3f} {ratio:>7}")
    spin = "; onnxruntime: inter-op 1, spinning off" if base else ""
    threads = f"{s['threads']} thread{'s' if s['threads'] > 1 else ''}"
    if s["device"]:  # the network on a GPU, onnxruntime on this machine's CPU
        where = f"autosched on the {s['device']} device, onnxruntime on {threads} of the CPU" if base else ""
        print(f"  (medians of {s['rounds']} interleaved rounds{'; ' + where if where else ''}{spin})")
        return
    print(f"  (medians of {s['rounds']} interleaved rounds, {threads} each{spin})")


def cmd_export_network(args: argparse.Namespace) -> int:
    """``autosched export MODEL.onnx --log LOG --out DIR``: the network as one C library."""
    graph = from_onnx(args.log)
    export = export_network(graph, args.model_log, target=args.target or "c", portable=args.portable,
                            weights=args.weights)
    sample = sample_inputs(graph)
    outs = build_network(graph, args.model_log, target=args.target or "c")(*sample)
    out = write_network(export, args.out, sample, outs if isinstance(outs, list) else [outs])
    plan = export.plan
    where = "weights.bin (model_set_weights)" if export.weights == "blob" else "a C array in weights.c"
    print(f"weights: {where}: {export.weights_why}")
    print(f"exported {printable(graph.name)}: {export.tasks} kernels ({export.tuned} tuned), workspace "
          f"{plan.peak} bytes (intermediates and scratch: {plan.total} bytes) to {printable(str(out))}/; "
          f"make -C {printable(str(out))} run")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``tasks`` subcommand."""
    p = sub.add_parser("tasks", help="list a model's tasks: fused workloads, FLOPs, weights")
    p.add_argument("model", help="an ONNX model file (opset >= 13)")
    p.add_argument("--json", action="store_true", help="print one JSON list on stdout")
    p.add_argument("--target", default="c",
                   help="target string: a C target's convolutions read packed weights (default: c)")
    p.set_defaults(func=cmd_tasks)


def add_tune_options(p: argparse.ArgumentParser) -> None:
    """The options ``autosched tune`` takes for a model only."""
    p.add_argument("--scheduler", default="gradient", choices=STRATEGIES,
                   help="task scheduler of a model's tasks (default: gradient)")
