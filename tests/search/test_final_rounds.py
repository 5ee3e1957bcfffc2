"""Interleaved rounds in the measurement worker (``LocalRunner.run_rounds``): each round times the
calibration kernel and then every program once, A B C A B C ..., in the one worker process; the
final re-measurement of a tuning run is made this way."""

from __future__ import annotations

import statistics

import pytest

from autosched.ops.schedules import default_schedule
from autosched.runner import (
    BuildResult,
    LocalBuilder,
    LocalRunner,
    MeasureErrorNo,
    MeasureInput,
    MeasureOption,
)
from autosched.task import Task

pytestmark = pytest.mark.requires("gcc")

FAST = MeasureOption(repeat=2, min_repeat_ms=2)
TARGET = "c -num-threads=1"


def _programs() -> tuple[list[MeasureInput], list[BuildResult]]:
    """The hand-written matmul schedule, the naive one, a smaller matmul (another task: the worker
    needs its data too) and a build that failed."""
    task, other = Task("matmul", (32, 32, 32), target=TARGET), Task("matmul", (24, 16, 8), target=TARGET)
    schedule, _ = default_schedule(task.workload, task.target)
    inputs = [MeasureInput(task, tuple(schedule.steps)), MeasureInput(task, ()), MeasureInput(other, ())]
    with LocalBuilder(n_parallel=1) as builder:
        builds = builder.build(inputs)
    failed = BuildResult(None, builds[0].func_name, (), MeasureErrorNo.COMPILE_ERROR, "error: no")
    return [*inputs, inputs[0]], [*builds, failed]


def test_rounds_time_every_program_once_per_round_in_one_worker() -> None:
    inputs, builds = _programs()
    with LocalRunner(FAST) as runner:
        (first,) = runner.run(inputs[:1], builds[:1])
        worker = runner._worker
        assert worker is not None
        rounds = runner.run_rounds(inputs, builds, 4)
        assert runner._worker is worker and worker.alive()  # the same process: no start per round
    *timed, failed = rounds.results
    assert first.ok and all(r.ok and len(r.costs) == 4 for r in timed)  # one repeat in each round
    assert failed.error_no == MeasureErrorNo.COMPILE_ERROR and failed.error_msg == "error: no"
    assert len(rounds.figures) == 5 and all(f > 0 for f in rounds.figures)  # before each round, after
    median = statistics.median(rounds.figures)
    assert all(r.calibration == median for r in timed) and failed.calibration == 0.0
    tuned, naive = timed[0].median, timed[1].median
    assert tuned < naive  # the hand-written schedule beats the naive loop nest in every setting


def test_rounds_with_more_repeats_and_nothing_to_time() -> None:
    inputs, builds = _programs()
    with LocalRunner(FAST) as runner:
        rounds = runner.run_rounds(inputs[:2], builds[:2], 3, repeat=2)
        empty = runner.run_rounds(inputs[3:], builds[3:], 3)
    assert all(len(r.costs) == 6 for r in rounds.results)
    assert empty.figures == [] and empty.results[0].error_no == MeasureErrorNo.COMPILE_ERROR
    with pytest.raises(ValueError, match="2 inputs but 1 build results"):
        LocalRunner(FAST).run_rounds(inputs[:2], builds[:1], 3)
