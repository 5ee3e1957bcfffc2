"""``autosched tune``: tune a workload on a target, with a progress bar, a log and a summary."""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
from typing import Any

from ..boards import BoardPool
from ..cluster import DaskExecutor
from ..database import Database
from ..diagnostics import format_ms
from ..runner.drift import drift_text
from ..runner.measure import MeasureOption
from ..search import AUTO, SPACES, TUNERS, space_kind, tune
from ..search.context import DEFAULT_TUNERS
from ..search.learning import check_model_name, unavailable
from ..search.tune import TuneResult
from ..task import Task
from .basic import parse_value
from .boards import add_board_options, board_names, board_pool, tune_target
from .network import add_tune_options, cmd_tune_network, is_model
from .worker import add_tls_options, security_of


def cmd_tune(args: argparse.Namespace) -> int:
    if is_model(args.workload):
        return cmd_tune_network(args)
    task = Task(args.workload, tuple(parse_value(a) for a in args.args), target=tune_target(args))
    option = MeasureOption(
        number=args.number,
        repeat=args.repeat,
        min_repeat_ms=args.min_repeat_ms,
        flush_cache=args.flush_cache,
        build_timeout=args.build_timeout,
        run_timeout=args.run_timeout,
    )
    args.space = args.space or "sketch"
    tuner = args.tuner or DEFAULT_TUNERS.get(space_kind(task, args.space), "random")
    if tuner not in TUNERS:
        raise ValueError(f"unknown tuner {tuner!r}; tuners: {', '.join(sorted(TUNERS))}")
    if args.model:
        check_model_name(args.model)
    model = args.model or TUNERS[tuner].default_model
    with contextlib.ExitStack() as stack:  # the cluster's client and the board pool end with the run
        cluster = _cluster(args)
        if cluster is not None:
            stack.callback(cluster.close)
        pool = None if cluster is not None else board_pool(args, option)
        if pool is not None:
            stack.enter_context(pool)
        log = args.log or Database(args.db).log_for(task, create=True)
        if not args.json:
            with_model = f", model {model}" if model else ""
            if model and unavailable(model) is not None:  # tune() warns and searches at random
                with_model = f" (random search: the {tuner} tuner's {model} model is unavailable)"
            print(f"tuning {task}\n  space {args.space}, tuner {tuner}{with_model}, log {log}", flush=True)
        result = _tune(args, task, log, tuner, option, pool, cluster)
    if args.json:
        print(json.dumps(result.to_json()))
        return 0
    errors = ", ".join(f"{k} {v}" for k, v in result.errors.items()) or "none"
    print(
        f"  trials : {result.trials} ({result.valid_trials} valid; {result.new_trials} this run, "
        f"{result.resumed_trials} from the log)"
    )
    print(f"  errors : {errors}")
    if result.best_time_ms is None:
        print("  best   : no valid program measured")
        return 1
    again = f", top {args.remeasure} re-measured" if args.remeasure else ""
    print(f"  best   : {format_ms(result.best_time_ms)} ms  {result.best_gflops:.2f} GFLOP/s{again}")
    print(
        f"  time   : {result.wall_time_s:.1f} s (compile {result.build_time_s:.1f} s, "
        f"run {result.run_time_s:.1f} s, everything else {100 * result.overhead_share:.0f}%)"
    )
    print(f"  drift  : {drift_text(result.drift)}")
    if args.log:
        hint = f"autosched best {result.log}; autosched export {result.log} --out DIR"
    else:
        db = f" --db {shlex.quote(args.db)}" if args.db else ""
        hint = f"in the tuning database: autosched db best{db}"
    print(f"  log    : {result.log}  ({hint})")
    return 0


def _cluster(args: argparse.Namespace) -> DaskExecutor | None:
    """The Dask cluster of ``--cluster`` (with ``--board``: measure on those boards' workers), or None."""
    security = security_of(args, "client")
    if not args.cluster:
        if security is not None:
            raise ValueError("the --tls-* options go with --cluster tls://HOST:PORT")
        return None
    return DaskExecutor(args.cluster, boards=board_names(args), security=security)


def _tune(
    args: argparse.Namespace, task: Task, log: Any, tuner: str, option: MeasureOption, pool: BoardPool | None,
    cluster: DaskExecutor | None,
) -> TuneResult:
    return tune(
        task,
        trials=args.trials,
        log=log,
        tuner=tuner,
        model=args.model,
        save_model=args.save_model,
        transfer=args.transfer or (),
        space=args.space,
        seed=args.seed,
        early_stopping=args.early_stopping,
        timeout=args.timeout,
        option=option,
        progress=not args.quiet,
        runner=pool,
        remeasure=args.remeasure,
        cluster=cluster,
        measure_default=False if args.search_only else None,
    )


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``tune`` subcommand."""
    p = sub.add_parser("tune", help="tune a workload: search programs, measure them, log every trial")
    p.add_argument("workload", help="a workload name, or an ONNX model file (MODEL.onnx: all its tasks)")
    p.add_argument("args", nargs="*", help="workload arguments, e.g. 512 512 512")
    p.add_argument("--target", help="target string (default: the boards file's, else c: the host CPU)")
    add_board_options(p)
    p.add_argument(
        "--trials", type=int, default=64, help="measurements in all, earlier ones in the log count"
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--log", help="JSON-lines tuning log (default: the task's log in the tuning database)")
    where.add_argument("--db", metavar="DIR", help="tuning database (default: $AUTOSCHED_DB or ~/.cache)")
    p.add_argument(
        "--tuner",
        help=f"{', '.join(sorted(TUNERS))} (default: "
        + ", ".join(f"{t} for {s} spaces" for s, t in DEFAULT_TUNERS.items()) + ")",
    )
    p.add_argument(
        "--model", metavar="NAME|FILE",
        help="cost model of a model-guided tuner: xgb (default), mlp, random, or a --save-model file",
    )
    p.add_argument("--save-model", metavar="FILE", help="save the fitted cost model here at the end")
    p.add_argument(
        "--transfer", action="append", metavar="LOG",
        help="fit the model on the records of this log of other workloads first (repeatable)",
    )
    p.add_argument(
        "--remeasure", type=int, default=3, metavar="N",
        help="measure the N best programs again with more repeats before declaring the best (0: no)",
    )
    p.add_argument(
        "--space", choices=sorted([*SPACES, AUTO]),
        help="sketch (generated; the default for an operator), template (knobs), or auto: a task's "
        "template where it has one, else its sketches (the default for a model)",
    )
    p.add_argument(
        "--search-only", action="store_true",
        help="do not measure the operator's hand-written schedule as the first trial",
    )
    p.add_argument("--seed", type=int, default=None,
                   help="random seed of the search (default: a new search each run)")
    p.add_argument("--early-stopping", type=int, default=None, help="stop after N trials without gain")
    p.add_argument("--timeout", type=float, default=None, help="time budget of this run, seconds")
    p.add_argument("--number", type=int, default=1, help="kernel runs per repeat (raised by --min-repeat-ms)")
    p.add_argument("--repeat", type=int, default=3, help="timed repeats per program")
    p.add_argument("--min-repeat-ms", type=float, default=20.0, help="shortest repeat, ms")
    p.add_argument("--flush-cache", action="store_true", help="flush the caches before each repeat")
    p.add_argument("--build-timeout", type=float, default=60.0, help="seconds per compile")
    p.add_argument("--run-timeout", type=float, default=20.0, help="seconds per measurement")
    p.add_argument(
        "--cluster", metavar="ADDRESS",
        help="build and measure on the Dask cluster of this scheduler (tcp://HOST:PORT, tls://...); it "
        "runs the code this machine sends, so name only a cluster you trust; with --board: measure on "
        "those boards' workers (autosched worker --board ALIAS)",
    )
    add_tls_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON summary object on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_tune_options(p)
    p.set_defaults(func=cmd_tune)
