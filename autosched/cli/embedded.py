"""``autosched export LOG --embedded --target TARGET``: a log's best program for a microcontroller.

Nothing is tuned on a microcontroller here (there is no board to time on), so the program comes
from a log tuned elsewhere: the fastest valid program of the workload on any target, re-targeted
(printed for the core: its vector width, parallel loops serial); where the log has no program of
the workload named with ``--workload``, its default schedule for the core.
"""

from __future__ import annotations

import argparse
import shlex

from ..backends.c.microcontroller import check_float_support
from ..diagnostics import format_ms, printable
from ..export.board import BOARDS
from ..export.embedded import check_target
from ..export.mcu import EmbeddedExport, export_embedded
from ..export.network_mcu import export_network_embedded
from ..graph import build_network
from ..graph.inputs import sample_inputs
from ..graph.ir import Graph
from ..ops import Workload, get_workload
from ..ops.schedules import default_schedule
from ..records import Record, pick_best
from ..records.check import replay_error
from ..records.report import summarize
from ..target import Target
from ..task import Task
from .basic import parse_value


def _workload(records: list[Record], named: list[str] | None) -> tuple[Workload, list[Record]]:
    """The workload to export and the log's records of it (on any target)."""
    summaries = summarize(records)
    if named:
        name, wanted = named[0], [parse_value(a) for a in named[1:]]
        chosen = [s for s in summaries if s.records[0].workload[0] == name
                  and list(s.records[0].workload[1][: len(wanted)]) == wanted]
    else:
        chosen = summaries
    keys = {s.records[0].workload_key for s in chosen}
    if len(keys) > 1:
        held = "; ".join(sorted({s.workload for s in chosen}))
        raise ValueError(f"the log holds several workloads, name one with --workload: {held}")
    if keys:
        return Workload.from_json(chosen[0].records[0].workload), [r for s in chosen for r in s.records]
    if not named:
        raise ValueError("the log holds no records")
    return get_workload(named[0], tuple(parse_value(a) for a in named[1:])), []


def cmd_export_embedded(args: argparse.Namespace, records: list[Record]) -> int:
    """Export the best program of ``records`` (the log's) for the bare-metal ``--target``."""
    if args.target is None:
        raise ValueError("--embedded needs --target, a bare-metal target such as "
                         "'c -cc=arm-none-eabi-gcc -mcpu=cortex-m4 -mfloat-abi=hard'")
    if args.portable:
        raise ValueError("--portable is for Linux-class exports: an embedded kernel is GNU C for its core")
    target = check_target(Target.parse(args.target))
    workload, candidates = _workload(records, args.workload)
    check_float_support(target, [t.dtype for t in workload.tensors()])  # before any program is tried
    task = Task(workload, target=target)
    done: list[EmbeddedExport] = []

    def exports(record: Record) -> str | None:
        """Why ``record``'s program cannot be exported for the core (None: it was)."""
        why = replay_error(record)
        if why is None:
            try:
                done.append(export_embedded(task, record.steps, args.out, name=args.name, static=args.static,
                                            about=[f"Re-targeted from a program tuned for {record.target}."]))
            except Exception as err:  # a crafted program may fail anywhere in lowering
                why = f"{type(err).__name__}: {err}"
        return why

    best = pick_best(candidates, check=exports) if candidates else None
    if best is not None:
        origin = f"the program tuned for {printable(best.target)} ({format_ms(best.median * 1e3)} ms there)"
    else:
        if candidates:
            print(f"no program of {printable(str(workload))} in the log exports for {target.mcpu}: "
                  "its default schedule instead")
        done.append(export_embedded(task, default_schedule(workload, target)[0].steps, args.out,
                                    name=args.name, static=args.static, about=["The default schedule."]))
        origin = "the default schedule"
    export = done[-1]
    where = printable(str(export.out))
    print(f"exported {printable(str(workload))} for {target.mcpu}: {origin}, to {where}/")
    print(f"  {export.summary()}")
    if target.mcpu in BOARDS:
        board = BOARDS[str(target.mcpu)].machine
        where = printable(shlex.quote(str(export.out)))
        print(f"  make -C {where} run      # check against numpy on the emulated {board}")
    return 0


def cmd_export_network_embedded(args: argparse.Namespace, graph: Graph) -> int:
    """``autosched export MODEL.onnx --embedded --target TARGET``: the network for a microcontroller,
    checked on the emulated board against the network built here (default schedules)."""
    if args.target is None:
        raise ValueError("--embedded needs --target, a bare-metal target such as "
                         "'c -cc=arm-none-eabi-gcc -mcpu=cortex-m4 -mfloat-abi=hard -ram=256K'")
    if args.portable or args.weights == "blob":
        raise ValueError("an embedded network is GNU C for its core with its weights as a const array in "
                         "flash: no --portable or --weights blob")
    sample = sample_inputs(graph)
    refs = build_network(graph, None, target="c")(*sample)
    refs = refs if isinstance(refs, list) else [refs]
    export = export_network_embedded(graph, args.target, args.out, sample, refs, log=args.model_log,
                                     static=args.static)
    where = printable(str(export.out))
    print(f"exported {printable(graph.name)} for {Target.parse(args.target).mcpu}: {export.tasks} kernels "
          f"({export.tuned} from the log) to {where}/")
    print(f"  {export.summary()}")
    return 0
