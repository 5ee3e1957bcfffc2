"""``asc.tune_network(graph, trials=N, log=...)``: tune all of a network's tasks into one log.

The task scheduler (:mod:`autosched.search.scheduler`) decides which task gets each round; a round
is one :func:`autosched.tune` call that resumes the task from the shared log, so a network run
that stops resumes the same way: run it again with the same log, and the trials already in the log
count toward ``trials``. The builder and runner (and with them their worker processes, or the
cluster connection) are made once per run (one pair per task in flight, see below) and handed to
every round; they are closed when the run ends, fails or is interrupted.

**Several tasks at once.** When the runner offers k >= 2 devices that measure the run's target
at the same time (its ``devices()``: on a Dask cluster, the measuring or board workers for the
target; this machine's pools offer one), up to k tasks are tuned at once (``parallel=N``: at
most N; 1: one at a time). Each round runs in a thread of its own in this process: its search
step (model update, candidate proposal) here, its builds and measurements on the cluster,
alongside the other tasks' rounds. This is safe because a round shares nothing mutable with the
others: each :func:`~autosched.tune` call has its own tuner, cost model, space and shared-log
claims (claims are per task: tasks may share a program key, see
:mod:`autosched.search.shared_log`); each round borrows a builder and runner pair that no other
round uses while it runs (pairs are made as needed, at most one per slot); the log and the model
sidecar take each write as one locked append (``flock`` on a fresh file description, which
excludes threads of one process too), so lines are never interleaved; the task scheduler itself
is only used by the calling thread. With one device, rounds run one after another in the calling
thread, exactly as before.
"""

from __future__ import annotations

import math
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..backends import backend_for
from ..cluster import Executor, executor_for
from ..model.feature_workers import in_session
from ..records import Record, load_records
from ..records.best import is_remeasurement
from ..runner.measure import Builder, MeasureErrorNo, MeasureOption, MeasureResult, Runner
from ..search.progress import show_progress, timing_text
from ..search.scheduler import Round, TaskScheduler, TaskState
from ..search.tune import TuningInterrupted, tune
from ..search.tuner import Tuner
from ..search.tuning_space import AUTO, Candidate
from ..target import Target
from ..task import Task
from .ir import Graph
from .network import extract_tasks, network_tasks
from .profile import Checkpoint, NetworkCheck


@dataclass(frozen=True, slots=True)
class NetworkTuneResult:
    """The end of a network tuning run: per task (workload, weight, trials, best ms), the rounds
    given out, the estimated end-to-end latency in ms (inf while a task has no valid program;
    calibrated by the last measurement of the whole network), and those measurements."""

    tasks: list[dict[str, Any]]
    rounds: list[Round]
    latency_ms: float
    log: str
    checkpoints: list[Checkpoint] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """A JSON-compatible summary."""
        return {
            "tasks": self.tasks,
            "latency_ms": self.latency_ms if math.isfinite(self.latency_ms) else None,
            "rounds": [[r.task, r.trials, r.total_trials, r.latency * 1e3] for r in self.rounds],
            "log": self.log,
            "checkpoints": [c.to_json() for c in self.checkpoints],
        }


def log_name(graph: Graph) -> str:
    """The default log file name of a graph: its name with anything but [A-Za-z0-9_.-] made ``_``."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", graph.name).lstrip(".") + ".jsonl"


def _resumed(records: list[Record], task: Task) -> tuple[int, float]:
    """(trials, best seconds) of ``task`` in a log's records, as :func:`autosched.tune` counts them."""
    mine = [r for r in records if r.workload_key == task.workload.key and r.target == str(task.target)]
    mine = [r for r in mine if r.error_no != MeasureErrorNo.UNKNOWN_ERROR and not is_remeasurement(r)]
    costs = [r.median for r in mine if r.ok]
    return len(mine), min(costs, default=math.inf)


def _print_round(tasks: list[Task], budget: int, resumed: int) -> Callable[[Round], None]:
    """Print each round on stderr: trials in all, the task, its trials, the estimated latency, and
    the run's elapsed time and ETA (by the rate of this run's trials; ``resumed`` came from the log)."""
    start = time.monotonic()

    def show(r: Round) -> None:
        t = tasks[r.task]
        latency = f"{r.latency * 1e3:.3f} ms" if math.isfinite(r.latency) else "unknown"
        timing = timing_text(time.monotonic() - start, r.total_trials, budget, resumed)
        print(f"[{r.total_trials}/{budget}] task {r.task} {t.workload}: {r.trials} trials; "
              f"estimated latency {latency}  {timing}", file=sys.stderr, flush=True)

    return show


class _Measurers:
    """The builder and runner pairs of a run's rounds (as :func:`autosched.tune` makes its own):
    a round borrows a free pair, or a new one when every pair is in use by a round in flight; every
    pair is closed by ``stack``. One round at a time: one pair for the whole run."""

    def __init__(
        self, task: Task, option: MeasureOption | None, executor: Executor, stack: ExitStack
    ) -> None:
        self.task, self.option, self.executor, self.stack = task, option or MeasureOption(), executor, stack
        self.free: list[tuple[Builder, Runner]] = []
        self.lock = threading.Lock()

    def _make(self) -> tuple[Builder, Runner]:
        backend = backend_for(self.task.target)
        runner = self.executor.runner(backend, self.option, self.task.target)
        make_builder = getattr(runner, "make_builder", None)  # a runner that needs its own builds
        if make_builder is not None:
            builder = make_builder(self.option)
        else:
            builder = self.executor.builder(backend, self.option)
        for part in (runner, builder):
            close = getattr(part, "close", None)
            if close is not None:
                self.stack.callback(close)
        return builder, runner

    @contextmanager
    def lend(self) -> Iterator[tuple[Builder, Runner]]:
        """A pair that no other round uses until this one gives it back."""
        with self.lock:
            pair = self.free.pop() if self.free else self._make()
        try:
            yield pair
        finally:
            with self.lock:
                self.free.append(pair)


class _Halted(Exception):
    """A round stopped early because another round failed or the run was interrupted."""


class _HaltCheck:
    """A tuner callback that stops a round after its current batch once ``halt`` is set."""

    def __init__(self, halt: threading.Event) -> None:
        self.halt = halt

    def __call__(self, tuner: Tuner, candidates: list[Candidate], results: list[MeasureResult]) -> None:
        if self.halt.is_set():
            raise _Halted(f"stopped after {tuner.trials} trials of {tuner.task.workload}")


@in_session
def tune_network(
    graph: Graph,
    trials: int = 1000,
    log: str | os.PathLike[str] | None = None,
    scheduler: str = "gradient",
    *,
    target: str = "c",
    round_trials: int | None = None,
    tuner: str | None = None,
    space: str = AUTO,
    seed: int = 0,
    option: MeasureOption | None = None,
    progress: bool | None = None,
    callback: Callable[[Round], None] | None = None,
    cluster: Any = None,
    security: Any = None,
    parallel: int | None = None,
    remeasure: int = 3,
    checkpoints: int = 4,
) -> NetworkTuneResult:
    """Tune every task of ``graph`` for ``trials`` trials in all, shared by the task scheduler
    (``gradient`` or ``round-robin``), all measurements in ``log`` (default: ``GRAPH_NAME.jsonl``
    in the working directory, the name made file-safe). ``round_trials`` (default:
    trials / (4 x tasks), between 4 and 64) is the size of one round. ``space`` (default ``auto``)
    gives each task its knob template where it has one (packed convolutions on CPU: the template
    around their hand-written schedule), else its generated sketches. ``progress`` prints each round
    (task, its trials, the estimated end-to-end latency, elapsed time and ETA) on stderr: None (the
    default) when stderr is a terminal or in a notebook, True always, False never; ``callback`` gets
    each Round.
    ``cluster``: build and measure on a Dask cluster (an address or a ``distributed.Client``, one
    connection for the whole run; ``security``: TLS settings for an address; see
    :func:`autosched.tune`). ``parallel``: at most this many tasks are tuned at once (default: as
    many as the runner has devices that measure the target, never more; see the module
    docstring). Each task's first trial is its untuned
    default schedule (what :func:`build_network` runs without a record), so a tuned network is never
    slower than the untuned one by its measurements. At the end each task's ``remeasure`` fastest
    programs and its default schedule are measured again, side by side, with more repeats (as
    :func:`autosched.tune` does; logged as re-measurements, no trials; 0: none): measurements
    spread over a long run on a machine whose load changes are not comparable, and
    :func:`build_network` then takes the best by these re-measurements.

    The objective is the network's real latency: ``checkpoints`` times in a run (evenly over the
    budget, the last after the re-measurements; 0: never) the network is built from the log and
    timed here, each task's kernels inside it too (:mod:`.profile`), and the scheduler's estimate
    is calibrated by what that shows (kernels slower in the network than alone, time outside the
    kernels), so its choices and the reported latency follow the network's. Each measurement is a
    :class:`~.profile.Checkpoint` of the result (printed with ``progress``); on a cross-compiled
    target or a cluster the network cannot run here and there are none (a GPU target's network runs
    on this machine's device). Every task first gets one
    round, two while they take at most half the budget, so that its search is guided by the model
    before the scheduler weighs it against the others."""
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise ValueError(f"trials must be a positive int, got {trials!r}")
    if parallel is not None and (isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1):
        raise ValueError(f"parallel must be a positive int, got {parallel!r}")
    tasks = network_tasks(graph, target)
    weights = {info.workload: info.weight for info in extract_tasks(graph, target)}
    path = Path(log) if log is not None else Path(log_name(graph))
    history = load_records(path) if path.exists() and path.stat().st_size > 0 else []
    states = []
    for task in tasks:
        done, best = _resumed(history, task)
        state = TaskState(task.flops(), weights[task.workload], task.workload.name, done)
        if math.isfinite(best):
            state.history.append((done, best))
        states.append(state)
    size = round_trials or max(4, min(64, trials // (4 * len(tasks))))
    warmup = max(size, min(2 * size, trials // (2 * len(tasks))))
    sched = TaskScheduler(states, scheduler, size, seed=seed, warmup=warmup)
    tgt = Target.parse(target)
    here = cluster is None and (tgt.is_native or backend_for(tgt).gpu)  # a GPU kind: this machine's device
    check = NetworkCheck(graph, path, target, tasks, sched, trials, checkpoints if here else 0)
    progress = show_progress(progress)
    resumed = sum(st.trials for st in states)
    rounds = _print_round(tasks, trials, resumed) if progress else None
    shows = [f for f in (rounds, callback) if f is not None]

    def measure_network(total: int) -> None:
        point = check.measure(total)
        if progress:
            print(point.text(), file=sys.stderr, flush=True)

    def each_round(r: Round) -> None:
        for show in shows:
            show(r)
        if check.due(r.total_trials) and math.isfinite(sched.kernels_latency()):  # every task has a program
            measure_network(r.total_trials)

    halt = threading.Event()
    with ExitStack() as stack:  # closes the builders, the runners and the executor however the run ends
        executor = executor_for(cluster, security)
        if not isinstance(cluster, Executor):
            stack.callback(executor.close)
        measurers = _Measurers(tasks[0], option, executor, stack)
        with measurers.lend() as (_, runner):  # the first pair, made before any round
            devices = getattr(runner, "devices", None)  # a runner that measures on several devices at once
            slots = min(devices() if devices is not None else 1, parallel or len(tasks), len(tasks))

        def tune_round(i: int, n: int) -> tuple[int, float]:
            with measurers.lend() as (builder, runner):
                result = tune(tasks[i], trials=states[i].trials + n, log=path, tuner=tuner, space=space,
                              seed=seed + states[i].trials, option=option, remeasure=0, cluster=executor,
                              builder=builder, runner=runner, measure_default=True, progress=False,
                              callbacks=[_HaltCheck(halt)])
            best = result.best_time_ms / 1e3 if result.best_time_ms is not None else math.inf
            return result.trials, best

        def final_round(i: int) -> None:
            with measurers.lend() as (builder, runner):  # no new trials: the log already holds them
                result = tune(tasks[i], trials=states[i].trials, log=path, tuner=tuner, space=space,
                              seed=seed + states[i].trials, option=option, remeasure=remeasure,
                              cluster=executor, builder=builder, runner=runner, measure_default=True,
                              progress=False)
            if result.best_time_ms is not None:
                states[i].history.append((states[i].trials, result.best_time_ms / 1e3))

        try:
            sched.run(trials, tune_round, each_round, slots=slots, halt=halt.set)
            if remeasure > 0:
                if progress:
                    print(f"measuring the {remeasure} fastest programs of each task and its default schedule "
                          "again, side by side", file=sys.stderr, flush=True)
                for i in range(len(tasks)):
                    if states[i].trials > 0:
                        final_round(i)
            if here and checkpoints > 0:
                measure_network(sched.total_trials())
        except KeyboardInterrupt as stop:
            if isinstance(stop, TuningInterrupted):
                raise
            raise TuningInterrupted(f"tuning stopped; the measurements made are in {path}: run the same "
                                    "command again to resume") from stop
    summary = [
        {"workload": str(t.workload), "weight": s.weight, "trials": s.trials,
         "best_ms": s.best * 1e3 if math.isfinite(s.best) else None}
        for t, s in zip(tasks, states, strict=True)
    ]
    return NetworkTuneResult(summary, sched.rounds, sched.latency() * 1e3, str(path), check.done)
