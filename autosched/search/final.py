"""Before the best is declared: the top few programs measured again, with more repeats.

A lucky measurement (a quiet moment on a shared machine, a timer glitch) must not win a tuning
run. So at the end of :func:`~autosched.search.tune` the ``top`` fastest distinct programs found
(earlier runs in the log included) are measured once more with ``repeat`` repeats, and the best is
the lowest median of these re-measurements. The task's hand-written default schedule, where it was
measured, is always measured again with them, so the run's best is declared against it under the
same conditions, and its record is marked as the baseline: another program wins only by
:data:`~autosched.records.BASELINE_MARGIN` (see :mod:`autosched.records.best`).

The programs are timed in interleaved rounds, so that a slow stretch of a shared machine slows
every program alike rather than the one that happened to be measured in it. A runner that times
rounds itself (:meth:`~autosched.runner.LocalRunner.run_rounds`: in its worker, no process or
round trip per round) gets ``repeat`` rounds, each timing the calibration kernel and then every
program once (A B C A B C ...); a program's re-measured time is the median of its rounds, and its
record carries the rounds' median calibration figure. Other runners whose repeats can be set (a
``MeasureOption``: boards, a cluster) get :data:`ROUNDS` passes over all the programs, each with
its share of the repeats; any other runner is used as it is. Each re-measurement is logged as an
ordinary record (one line per measurement) whose ``program`` carries ``"remeasure": REPEATS``; such
records are no trials (a resumed run does not count them), and a program that already has one in
the log is not measured again.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import records
from ..records import BASELINE_KEY, BASELINE_MARGIN, REMEASURE_KEY, Record, is_remeasurement, steps_key
from ..runner.local_runner import Rounds
from ..runner.measure import Builder, MeasureErrorNo, MeasureInput, MeasureOption, MeasureResult, Runner
from ..task import Task
from .baseline import is_default
from .tuning_space import Candidate

__all__ = ["Remeasured", "remeasure_top"]

#: passes over the programs that share a re-measurement's repeats (each at least one repeat)
ROUNDS = 5


@dataclasses.dataclass
class Remeasured:
    """The outcome of the re-measurements: the winner and how many programs were measured again."""

    best: Candidate | None
    best_cost: float
    measured: int  # re-measurements made by this run (the others came from the log)
    medians: dict[str, float]  # program key -> re-measured median (inf: failed)
    calibrations: dict[str, float] = dataclasses.field(default_factory=dict)  # key -> its figure (0: none)
    figures: list[float] = dataclasses.field(default_factory=list)  # this run's calibration figures

    @property
    def best_calibration(self) -> float:
        """The calibration figure of the best's re-measurement (0.0: none)."""
        return self.calibrations.get(self.best.key, 0.0) if self.best is not None else 0.0


def _top(
    measured: Sequence[tuple[Candidate, float]], n: int, default_key: str | None = None
) -> list[tuple[Candidate, float]]:
    """The ``n`` fastest distinct valid programs, fastest first (the earliest on ties), and the
    default schedule after them if it is valid and not among them (the program logged as the
    default, or the one whose key is ``default_key``: in a template space the hand-written
    schedule is measured as the template's point)."""
    best: dict[str, tuple[Candidate, float]] = {}
    for cand, cost in measured:
        key = cand.key
        if math.isfinite(cost) and cost < best.get(key, (cand, math.inf))[1]:
            best[key] = (cand, cost)
    top = sorted(best.values(), key=lambda cc: cc[1])[:n]
    default = next((cc for cc in best.values() if is_default(cc[0]) or cc[0].key == default_key), None)
    return top + [default] if default is not None and default not in top else top


def _with_repeats(option: MeasureOption, repeat: int) -> MeasureOption:
    scale = repeat / max(1, option.repeat)
    return dataclasses.replace(option, repeat=repeat, run_timeout=option.run_timeout * max(1.0, scale))


def _merged(passes: list[list[MeasureResult]]) -> list[MeasureResult]:
    """One result per program from its results of several passes: all their repeats, in order;
    the first failure where a pass failed."""
    merged = []
    for results in zip(*passes, strict=True):
        failed = next((r for r in results if r.error_no != MeasureErrorNo.NO_ERROR), None)
        if failed is not None:
            merged.append(failed)
            continue
        costs = tuple(c for r in results for c in r.costs)
        merged.append(dataclasses.replace(results[0], costs=costs, all_cost=sum(r.all_cost for r in results)))
    return merged


def _measure(
    inputs: list[MeasureInput], builder: Builder, runner: Runner, repeat: int
) -> tuple[list[MeasureResult], list[float]]:
    """Build ``inputs`` once and time them with ``repeat`` repeats each, in interleaved rounds
    (see the module docstring): the results and the calibration figures of the rounds."""
    option = getattr(runner, "option", None)
    builds = builder.build(inputs)
    run_rounds = getattr(runner, "run_rounds", None)
    if run_rounds is not None:
        timed: Rounds = run_rounds(inputs, builds, repeat)
        return timed.results, timed.figures
    if not isinstance(option, MeasureOption):
        results = runner.run(inputs, builds)
        return results, [r.calibration for r in results if r.calibration > 0]
    rounds = min(ROUNDS, repeat) if len(inputs) > 1 else 1
    passes = []
    try:
        for r in range(rounds):  # repeats spread over the passes: the first ones get the remainder
            share = repeat // rounds + (r < repeat % rounds)
            runner.option = _with_repeats(option, share)  # type: ignore[attr-defined]
            passes.append(runner.run(inputs, builds))
    finally:
        runner.option = option  # type: ignore[attr-defined]
    return _merged(passes), [r.calibration for p in passes for r in p if r.calibration > 0]


def remeasure_top(
    task: Task,
    measured: Sequence[tuple[Candidate, float]],
    *,
    top: int,
    repeat: int,
    builder: Builder,
    runner: Runner,
    log: Path | None,
    compiler: str,
    machine: str = "",
    earlier: Sequence[Record] = (),
    default_key: str | None = None,
) -> Remeasured:
    """Measure the ``top`` fastest programs of ``measured`` again with ``repeat`` repeats (see the
    module docstring). ``earlier`` are re-measurements already in the log. A runner with an
    ``option`` (:class:`~autosched.runner.LocalRunner`, a board pool) gets ``repeat`` repeats for
    these measurements, interleaved (in rounds, where it has ``run_rounds``); any other runner is
    used as it is. Records carry ``machine``, the fingerprint of the machine measured on, and the
    calibration figure. ``default_key``: the key of the search space's point that is the default
    schedule, if it has one."""
    done = {r.program_key: r.median for r in earlier if is_remeasurement(r)}
    calibrations = {r.program_key: r.calibration for r in earlier if is_remeasurement(r)}
    chosen = _top(measured, top, default_key)
    base = next((c.key for c, _ in chosen if is_default(c) or c.key == default_key), None)
    todo = [cand for cand, _ in chosen if cand.key not in done]
    results: list[MeasureResult] = []
    figures: list[float] = []
    if todo:
        inputs = [MeasureInput(task, c.steps, c.program) for c in todo]
        results, figures = _measure(inputs, builder, runner, repeat)
        for inp, res in zip(inputs, results, strict=True):
            done[steps_key(inp.steps)] = res.median
            calibrations[steps_key(inp.steps)] = res.calibration
            if log is not None and res.error_no != MeasureErrorNo.UNKNOWN_ERROR:
                program: dict[str, Any] = {**(inp.program or {}), REMEASURE_KEY: repeat}
                if steps_key(inp.steps) == base:
                    program[BASELINE_KEY] = True
                records.append_records(log, [Record.from_measure(inp, res, compiler, program, machine)])
    medians = {c.key: done[c.key] for c, _ in chosen}
    best, best_score = None, math.inf
    for cand, _ in chosen:  # the others must beat the baseline by the margin (records.best)
        score = medians[cand.key] / (1.0 if base is None or cand.key == base else 1.0 - BASELINE_MARGIN)
        if score < best_score:
            best, best_score = cand, score
    return Remeasured(best, medians[best.key] if best is not None else math.inf, len(results), medians,
                 {c.key: calibrations.get(c.key, 0.0) for c, _ in chosen}, figures)
