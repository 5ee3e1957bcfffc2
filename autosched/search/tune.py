"""``asc.tune``: tune one task with a tuner, a space, a builder and a runner, logging every trial.

    task = asc.Task("matmul", (512, 512, 512), target="c -num-threads=2")
    result = asc.tune(task, trials=200, log="matmul.jsonl", tuner="random", space="sketch")
    print(result.best_gflops)

Each measurement is appended to the log as soon as it is made (one flushed line, under a file
lock), so a run killed at any moment loses nothing it had measured; running again with the same
log resumes: programs already in the log are not measured again and count towards ``trials``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from .. import records
from ..runner.compile import compiler_version
from ..runner.measure import Builder, MeasureInput, MeasureOption, MeasureResult, Runner
from ..task import Task
from .progress import ProgressBar, TuneStats
from .space import Candidate, make_space
from .tuner import Callback, Tuner, make_tuner


@dataclass
class TuneResult:
    """What a tuning run found; :meth:`to_json` is the CLI's ``--json`` summary."""

    workload: str
    target: str
    trials: int  # measurements of this task in all, earlier runs in the log included
    valid_trials: int
    errors: dict[str, int]  # failed measurements by error kind
    best_time_ms: float | None
    best_gflops: float | None
    log: str | None
    new_trials: int = 0  # measured by this run
    resumed_trials: int = 0  # loaded from the log
    wall_time_s: float = 0.0
    build_time_s: float = 0.0  # this run's compile time (wall, parallel builds; lowering excluded)
    run_time_s: float = 0.0  # this run's time in the runner (checks and timing)
    stop_reason: str = ""
    best_steps: tuple[Any, ...] = field(default=(), repr=False)

    @property
    def overhead_share(self) -> float:
        """The share of this run's wall time spent outside compiling and running (Python work)."""
        if self.wall_time_s <= 0:
            return 0.0
        return max(0.0, 1 - (self.build_time_s + self.run_time_s) / self.wall_time_s)

    def to_json(self) -> dict[str, Any]:
        """The summary as one JSON-compatible object (without the steps)."""
        out = asdict(self)
        del out["best_steps"]
        out["overhead_share"] = self.overhead_share
        return out


class _Measurer:
    """Builds a batch, then runs its candidates one by one, logging each result at once."""

    def __init__(
        self, task: Task, builder: Builder, runner: Runner, log: Path | None, stats: TuneStats
    ) -> None:
        self.task, self.builder, self.runner, self.log, self.stats = task, builder, runner, log, stats
        cc = task.target.cc
        self.compiler = compiler_version(cc).strip().splitlines()[0] if cc else ""

    def __call__(self, candidates: list[Candidate]) -> list[MeasureResult]:
        inputs = [MeasureInput(self.task, c.steps, c.program) for c in candidates]
        t0 = time.monotonic()
        emitted = getattr(self.builder, "emit_time", 0.0)
        builds = self.builder.build(inputs)
        t1 = time.monotonic()
        # lowering and emitting are Python work, not compiling: count them apart where the builder says
        self.stats.build_time += t1 - t0 - (getattr(self.builder, "emit_time", 0.0) - emitted)
        results = []
        for inp, build in zip(inputs, builds, strict=True):
            (res,) = self.runner.run([inp], [build])
            results.append(res)
            self.stats.add(res.error_no)
            if self.log is not None:
                records.append_records(
                    self.log, [records.Record.from_measure(inp, res, self.compiler, inp.program)]
                )
        self.stats.run_time += time.monotonic() - t1
        return results


def tune(
    task: Task,
    trials: int = 100,
    log: str | Path | Literal[False] | None = None,
    tuner: str | Tuner = "random",
    space: str = "sketch",
    *,
    seed: int | None = None,
    early_stopping: int | None = None,
    timeout: float | None = None,
    option: MeasureOption | None = None,
    builder: Builder | None = None,
    runner: Runner | None = None,
    batch_size: int | None = None,
    callbacks: Sequence[Callback] = (),
    progress: bool = False,
) -> TuneResult:
    """Tune ``task`` for up to ``trials`` measurements in all (see the module docstring).

    ``tuner`` is a registered name (``random``, ``grid``) or a :class:`Tuner`; ``space`` is
    ``sketch`` (generated) or ``template`` (knobs). ``option`` sets timing and timeouts for the
    default :class:`~autosched.runner.LocalBuilder` / :class:`~autosched.runner.LocalRunner`.
    ``progress`` draws a progress bar on stderr. ``log`` None (the default) records into the
    tuning database (:class:`~autosched.database.Database`, this machine's log for the task's
    target); ``log=False`` records nothing.
    """
    from ..runner.builder import LocalBuilder
    from ..runner.local_runner import LocalRunner

    if trials < 0:
        raise ValueError(f"trials must be >= 0, got {trials}")
    start = time.monotonic()
    the_tuner = tuner if isinstance(tuner, Tuner) else make_tuner(tuner, task, make_space(task, space), seed)
    if log is None:
        from ..database import Database

        log = Database().log_for(task, create=True)
    log_path = Path(log) if log is not False else None
    history = []
    if log_path is not None and log_path.exists() and log_path.stat().st_size > 0:
        history = records.load_records(log_path, workload_key=task.workload.key, target=str(task.target))
    stats = TuneStats(task.flops())
    for r in history:
        stats.add(r.error_no)
    resumed = the_tuner.load_history(history)

    opt = option or MeasureOption()
    own_builder = builder is None
    own_runner = runner is None
    the_builder = builder or LocalBuilder(n_parallel=opt.n_parallel, timeout=opt.build_timeout)
    the_runner = runner or LocalRunner(opt)
    hooks = list(callbacks)
    if progress:
        hooks.append(ProgressBar(trials, stats))
    try:
        the_tuner.tune(
            trials,
            _Measurer(task, the_builder, the_runner, log_path, stats),
            batch_size=batch_size or 2 * (task.target.cores or 1) + 2,
            early_stopping=early_stopping,
            timeout=timeout,
            callbacks=hooks,
        )
    finally:
        for part, own in ((the_builder, own_builder), (the_runner, own_runner)):
            close = getattr(part, "close", None)
            if own and close is not None:
                close()
        for hook in hooks:
            if isinstance(hook, ProgressBar):
                hook.finish(the_tuner.stop_reason)
    best = the_tuner.best_cost if the_tuner.best_candidate is not None else None
    return TuneResult(
        workload=task.workload.key,
        target=str(task.target),
        trials=the_tuner.trials,
        valid_trials=stats.valid,
        errors=dict(sorted(stats.errors.items())),
        best_time_ms=best * 1e3 if best is not None else None,
        best_gflops=stats.flops / best / 1e9 if best else None,
        log=str(log_path) if log_path is not None else None,
        new_trials=the_tuner.trials - resumed,
        resumed_trials=resumed,
        wall_time_s=time.monotonic() - start,
        build_time_s=stats.build_time,
        run_time_s=stats.run_time,
        stop_reason=the_tuner.stop_reason,
        best_steps=the_tuner.best_candidate.steps if the_tuner.best_candidate else (),
    )
