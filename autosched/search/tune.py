"""``asc.tune``: tune one task with a tuner, a space, a builder and a runner, logging every trial.

    task = asc.Task("matmul", (512, 512, 512), target="c -num-threads=2")
    result = asc.tune(task, trials=200, log="matmul.jsonl")   # evolutionary search + XGBoost model
    print(result.best_gflops)

The default tuner is model-guided: ``evolutionary`` on sketch spaces, ``sa`` (simulated annealing,
AutoTVM's) on template spaces, both with the ``xgb`` cost model; where xgboost is missing, random
search with a warning. ``transfer=[LOG, ...]`` fits the model on other workloads' records first
(:mod:`autosched.search.transfer`). With a model, its quality per batch goes to the progress bar
and to ``LOG.model.jsonl`` (:class:`~autosched.search.progress.QualityLog`). At the end the top
few programs are measured again with more repeats and the best is the lowest re-measured median
(:mod:`autosched.search.final`). The result states how much the machine drifted during the run
(:attr:`TuneResult.drift`: the calibration kernel timed beside the measurements,
:mod:`autosched.runner.drift`). Where the operator has a hand-written schedule (matmul, conv2d
NCHW on a CPU), that schedule is the first trial, so tuning never returns a slower program than
the untuned one; ``measure_default=False`` leaves it out (the search alone).

Each measurement is appended to the log as soon as it is made (one flushed line, under a file
lock), so a run killed at any moment loses nothing it had measured; running again with the same
log resumes: programs already in the log are not measured again and count towards ``trials``.
Records of ``UNKNOWN_ERROR`` (the machinery failed, not the program) are not counted: their
programs are measured again. Runs sharing a log at the same time never measure one program twice,
and share ``trials``: two runs of ``trials=12`` on one log end with 12 trials of the task in it, as
one run would (:mod:`autosched.search.shared_log`).

A failure of the machinery itself (a worker that cannot start, a missing compiler, a cache that
cannot be written) is retried once with fresh workers, then ends the run with an
:class:`~autosched.runner.errors.InfrastructureError` naming the cause and the fix; so does a run
whose first trials all fail with one and the same unexplained error.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from .. import records
from ..backends import backend_for
from ..cluster import ClusterUnavailable
from ..database import Database, TuningStore
from ..diagnostics import warn
from ..model.feature_workers import in_session
from ..ops.schedules import has_hand_written
from ..records import is_remeasurement
from ..records.log import read_records
from ..runner.drift import drift_of
from ..runner.measure import (
    Builder,
    MeasureErrorNo,
    MeasureOption,
    Runner,
)
from ..runner.system_libs import check_system_libraries
from ..task import Task
from .baseline import measure_default as _measure_default
from .baseline import space_default
from .context import TuneContext
from .final import Remeasured, remeasure_top
from .learning import CostModel, model_name, sidecar_path
from .measurer import Measurer, SyncOtherRuns
from .progress import ProgressBar, QualityLog, TuneStats, show_progress
from .transfer import load_transfer
from .tuner import Callback, Tuner
from .tuning_space import Candidate


class TuningInterrupted(KeyboardInterrupt):
    """Tuning was stopped by Ctrl-C or SIGTERM; the message says where the log is and how to resume."""


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
    tuner: str = ""
    model: str | None = None
    remeasured_trials: int = 0  # programs this run measured again at the end (see search.final)
    #: how much the machine drifted during this run: the calibration kernel's figures (see
    #: :class:`~autosched.runner.drift.Drift`: samples, median_s, low_pct, high_pct, spread_pct);
    #: None where nothing was calibrated
    drift: dict[str, float] | None = None
    #: the calibration kernel's time when the best was re-measured (compare best_time_ms / this
    #: with a later timing of both); None where it was not
    best_calibration_ms: float | None = None
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


def _save_model(tuner: Tuner, path: str | os.PathLike[str]) -> None:
    """Write the run's cost model, fitted on all its records, to ``path`` (for ``model=PATH`` in a
    later run)."""
    tuner.refit(tuner.batches - 1)  # a model-guided tuner has not fitted on its last batches yet
    learner = tuner.learner
    save = getattr(learner.model, "save", None) if learner is not None else None
    if learner is None or not learner.ready or save is None:
        warn(f"no fitted cost model to save to {path}: this run's tuner has none (or too few records)")
        return
    save(path)


def _key(candidate: Candidate | None) -> str | None:
    return candidate.key if candidate is not None else None


def _resume_hint(measured: int, log: Path | None) -> str:
    """What a stopped run leaves and how to go on (nothing without a log)."""
    if log is None:
        return ""
    return f"; {measured} new measurements are in {log}: run the same command again to resume"


@in_session
def tune(
    task: Task,
    trials: int = 100,
    log: str | Path | TuningStore | Literal[False] | None = None,
    tuner: str | Tuner | None = None,
    space: str = "sketch",
    *,
    model: str | CostModel | None = None,
    transfer: Sequence[str | os.PathLike[str]] = (),
    seed: int | None = None,
    early_stopping: int | None = None,
    timeout: float | None = None,
    option: MeasureOption | None = None,
    builder: Builder | None = None,
    runner: Runner | None = None,
    batch_size: int | None = None,
    callbacks: Sequence[Callback] = (),
    progress: bool | None = None,
    remeasure: int = 3,
    remeasure_repeat: int | None = None,
    save_model: str | os.PathLike[str] | None = None,
    cluster: Any = None,
    security: Any = None,
    measure_default: bool | None = None,
) -> TuneResult:
    """Tune ``task`` for up to ``trials`` measurements in all (see the module docstring).

    ``tuner`` is a registered name (``evolutionary``, ``sa``/``xgb``, ``ga``, ``random``,
    ``grid``; None: the model-guided default of the space) or a :class:`Tuner`; ``model`` a cost
    model, its name (``xgb``, ``mlp``, ``random``; None: the tuner's default) or the path of a model
    saved by an earlier run's ``save_model=PATH`` (it guides from the first batch; a corrupt file is
    a warning and a new ``xgb`` model); ``transfer`` tuning logs of other workloads to fit the model
    on first. ``space`` is ``sketch`` (generated), ``template`` (knobs) or ``auto`` (the task's
    template where it has one, else sketches). ``option`` sets timing and timeouts for the default
    :class:`~autosched.runner.LocalBuilder` / :class:`~autosched.runner.LocalRunner`; a ``runner``
    with a ``make_builder(option)`` method (:class:`~autosched.boards.BoardPool`: boards over
    SSH) gets its own kind of builder by default. ``progress`` draws a progress bar on stderr (trials,
    best GFLOP/s, errors, the model's ranking quality, elapsed time and ETA): None (the default) when
    stderr is a terminal or in a notebook, True always, False never.
    ``log`` None (the default) records into the tuning database
    (:class:`~autosched.database.Database`, this machine's log for the task's target), a
    :class:`~autosched.database.TuningStore` into that store (the log it names, handed to its
    ``tuned`` at the end); ``log=False`` records nothing. At the end the ``remeasure`` fastest
    programs are measured again with ``remeasure_repeat`` repeats (default: three times
    ``option.repeat``, at least 10) and the best is the lowest re-measured median
    (``remeasure=0``: no re-measurement; nor once the ``timeout`` budget is used up).
    ``save_model=PATH`` writes the fitted cost model at the end.
    ``cluster`` builds and measures on a Dask cluster: its scheduler's address (``tcp://host:8786``;
    ``tls://`` with ``security``, a ``distributed.security.Security``, else Dask's configuration) or
    a ``distributed.Client`` (see :mod:`autosched.cluster`); None: this machine's pools.
    ``measure_default``: a run whose log has no record of the task measures the task's untuned
    default schedule first (one trial; :mod:`autosched.search.baseline`), so the result is never
    slower than what the task runs untuned; None (the default): only where that schedule is
    hand-written (matmul and conv2d NCHW on a CPU target), False: the search alone.

    The arguments make one :class:`~autosched.search.context.TuneContext`, closed at the end;
    :func:`tune_with` tunes through a context that serves several tasks.
    """
    context = TuneContext(
        task, trials=trials, log=log, tuner=tuner, space=space, model=model, builder=builder,
        runner=runner, cluster=cluster, security=security, callbacks=callbacks, transfer=transfer,
        seed=seed, early_stopping=early_stopping, timeout=timeout, option=option, batch_size=batch_size,
        progress=progress, remeasure=remeasure, remeasure_repeat=remeasure_repeat, save_model=save_model,
        measure_default=measure_default,
    )  # fmt: skip
    with context:
        return tune_with(context)


@in_session
def tune_with(context: TuneContext, task: Task | None = None) -> TuneResult:
    """Tune ``task`` (default: the context's) as :func:`tune` does, with the context's parts and
    settings; its builders, runners and executor stay open for the next task (until
    ``context.close()``)."""
    c = context
    task = task or c.task
    trials, log, callbacks, timeout, remeasure = c.trials, c.log, c.callbacks, c.timeout, c.remeasure
    measure_default = c.measure_default
    store = Database() if log is None else log if isinstance(log, TuningStore) else None
    log_path: Path | None = None
    if store is not None:
        log_path = store.log_for(task, create=True)
    elif isinstance(log, (str, Path)):
        log_path = Path(log)
    backend_for(task.target)  # a kind without a backend fails here, before any work
    if task.target.is_cpu:  # a missing OpenBLAS fails every trial: say so once, before the first
        check_system_libraries(task.code, task.target)
    start = time.monotonic()
    the_tuner = c.make_tuner(task)
    transfer = c.transfer
    if transfer and the_tuner.learner is not None:
        the_tuner.add_transfer(*load_transfer(list(transfer), task))
    elif transfer:
        load_transfer(list(transfer), task)  # a bad transfer log is an error all the same
    history: list[records.Record] = []
    read = 0  # bytes of the log read as history
    if log_path is not None and log_path.exists() and log_path.stat().st_size > 0:
        history, read = read_records(log_path, workload_key=task.workload.key, target=str(task.target))
        # the machinery failed on these, not the program: measure them again
        history = [r for r in history if r.error_no != MeasureErrorNo.UNKNOWN_ERROR]
    remeasured = [r for r in history if is_remeasurement(r)]
    history = [r for r in history if not is_remeasurement(r)]
    stats = TuneStats(task.flops())
    for r in history:
        stats.add(r.error_no)
    resumed = the_tuner.load_history(history)
    the_tuner.refit_pending()  # a resumed run refits on its log before proposing anything

    opt = c.measure_option()
    the_builder, the_runner = c.parts(task)
    measurer = Measurer(task, the_builder, the_runner, log_path, stats, budget=trials, counted=resumed,
                        start=read)
    hooks: list[Callback] = [SyncOtherRuns(measurer, stats), *callbacks]
    learner = the_tuner.learner
    if learner is not None and log_path is not None:
        meta = {"workload_key": task.workload.key, "target": str(task.target),
                "tuner": type(the_tuner).__name__, "model": model_name(learner.model)}
        hooks.append(QualityLog(sidecar_path(log_path), meta))
    if show_progress(c.progress):
        hooks.append(ProgressBar(trials, stats))
    final = Remeasured(None, float("inf"), 0, {})
    try:
        if measure_default is None:
            measure_default = task.target.like == "c" and has_hand_written(task.workload)
        in_time = timeout is None or time.monotonic() - start < timeout
        if measure_default and not history and trials > 0 and in_time:
            the_tuner.load_history(
                _measure_default(task, measurer, measurer.compiler, measurer.machine, the_tuner.space))
        the_tuner.tune(
            trials,
            measurer,
            batch_size=c.batch_size or 2 * (task.target.cores or 1) + 2,
            early_stopping=c.early_stopping,
            timeout=timeout,
            callbacks=hooks,
        )
        out_of_time = timeout is not None and time.monotonic() - start >= timeout
        if remeasure > 0 and not out_of_time:
            final = remeasure_top(
                task, the_tuner.measured, top=remeasure, repeat=c.remeasure_repeat or max(10, 3 * opt.repeat),
                builder=the_builder, runner=the_runner, log=log_path, compiler=measurer.compiler,
                machine=measurer.machine, earlier=remeasured,
                default_key=_key(space_default(the_tuner.space)),
            )
    except KeyboardInterrupt as stop:
        raise TuningInterrupted(f"tuning stopped{_resume_hint(measurer.measured, log_path)}") from stop
    except ClusterUnavailable as stop:
        raise ClusterUnavailable(f"{stop}{_resume_hint(measurer.measured, log_path)}") from None
    finally:
        measurer.close()
        for hook in hooks:
            if isinstance(hook, ProgressBar):
                hook.finish(the_tuner.stop_reason)
        if store is not None and log_path is not None and log_path.exists():
            store.tuned(task, log_path)
    if c.save_model is not None:
        _save_model(the_tuner, c.save_model)
    best_cand, best = final.best, final.best_cost
    if best_cand is None and the_tuner.best_candidate is not None:  # not re-measured (or it failed)
        best_cand, best = the_tuner.best_candidate, the_tuner.best_cost
    drift = drift_of([*stats.calibrations, *final.figures])
    calibration = final.best_calibration if best_cand is final.best else 0.0
    return TuneResult(
        workload=task.workload.key,
        target=str(task.target),
        trials=the_tuner.trials,
        valid_trials=stats.valid,
        errors=dict(sorted(stats.errors.items())),
        best_time_ms=best * 1e3 if best_cand is not None else None,
        best_gflops=stats.flops / best / 1e9 if best_cand is not None else None,
        log=str(log_path) if log_path is not None else None,
        new_trials=measurer.measured,
        resumed_trials=resumed,
        wall_time_s=time.monotonic() - start,
        build_time_s=stats.build_time,
        run_time_s=stats.run_time,
        stop_reason=the_tuner.stop_reason,
        tuner=type(the_tuner).__name__,
        model=model_name(learner.model) if learner is not None else None,
        remeasured_trials=final.measured,
        drift=drift.to_json() if drift is not None else None,
        best_calibration_ms=calibration * 1e3 if calibration > 0 else None,
        best_steps=best_cand.steps if best_cand is not None else (),
    )
