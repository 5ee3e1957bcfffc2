"""``autosched tasks``, ``tune`` and ``export`` of a MODEL.onnx: a network's tasks, tuned, exported.

``tasks`` lists the fused workloads of a model (its tasks) with their FLOPs, weight (how often
each occurs) and share of the model's FLOPs. ``tune`` with a ``.onnx`` file in place of a workload
tunes all of them into one log, the trials shared by the task scheduler; ``export`` writes the
network as one C library (:mod:`autosched.graph.export`).
"""

from __future__ import annotations

import argparse
import json

from ..diagnostics import format_ms, printable
from ..graph import build_network, extract_tasks, from_onnx, tune_network
from ..graph.export import export_network, write_network
from ..graph.network import sample_inputs
from ..graph.tuning import log_name
from ..records import Record
from ..records.report_network import ModelTask, Network
from ..runner.measure import MeasureOption
from ..search.scheduler import STRATEGIES
from ..search.space import AUTO
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


def cmd_export_network(args: argparse.Namespace) -> int:
    """``autosched export MODEL.onnx --log LOG --out DIR``: the network as one C library."""
    graph = from_onnx(args.log)
    export = export_network(graph, args.model_log, target=args.target or "c", portable=args.portable,
                            weights=args.weights)
    sample = sample_inputs(graph)
    outs = build_network(graph, args.model_log, target=args.target or "c")(*sample)
    out = write_network(export, args.out, sample, outs if isinstance(outs, list) else [outs])
    plan = export.plan
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
