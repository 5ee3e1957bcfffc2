"""The calibration kernel beside the candidates: every measurement says how fast the machine was,
and one made in a slow minute is measured again (a real slow minute: busy processes on the
measuring core, with the real compiler, worker and runner)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

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
from autosched.runner.calibration import (
    CALIBRATION_NAME,
    WINDOW_MS,
    Calibrator,
    calibration_library,
    calibration_source,
)
from autosched.runner.drift import MIN_SAMPLES, SLOW, SpeedWatch, drift_of
from autosched.target import Target
from autosched.task import Task

pytestmark = pytest.mark.requires("gcc")

TASK = Task("matmul", (32, 32, 32), target="c -num-threads=1")
FAST = MeasureOption(repeat=2, min_repeat_ms=5)
Outcome = tuple[MeasureErrorNo, str, tuple[float, ...]]
HOGS = 5  # busy processes beside the worker on its core: it gets a sixth of it at most


@pytest.fixture(scope="module")
def built() -> tuple[MeasureInput, BuildResult]:
    schedule, _ = default_schedule(TASK.workload, TASK.target)
    inp = MeasureInput(TASK, tuple(schedule.steps))
    with LocalBuilder(n_parallel=1) as builder:
        (build,) = builder.build([inp])
    assert build.error_no == MeasureErrorNo.NO_ERROR, build.error_msg
    return inp, build


@contextmanager
def one_core() -> Iterator[int]:
    """This process (and the processes it starts: the runner's worker) on one core."""
    saved = os.sched_getaffinity(0)
    core = min(saved)
    os.sched_setaffinity(0, {core})
    try:
        yield core
    finally:
        os.sched_setaffinity(0, saved)


@contextmanager
def busy() -> Iterator[None]:
    """A slow minute: :data:`HOGS` processes spinning on this process's core."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(HOGS)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def test_the_calibration_kernel_runs_on_the_candidates_threads() -> None:
    two = calibration_source(Target.parse("c -num-threads=2"))
    assert "#pragma omp parallel for num_threads(2)" in two and f"int {CALIBRATION_NAME}(" in two
    assert "#pragma omp" not in calibration_source(Target.parse("c -num-threads=1"))
    calibrate = Calibrator(calibration_library(TASK.target))
    first, second = calibrate(), calibrate()
    assert first > 0 and second > 0
    assert second * calibrate.number >= WINDOW_MS / 1e3 / 4  # a window long enough to see waits


def test_every_measurement_carries_the_machine_speed(built: tuple[MeasureInput, BuildResult]) -> None:
    inp, build = built
    with LocalRunner(FAST) as runner:
        results = [runner.run([inp], [build])[0] for _ in range(3)]
        watch = runner.speeds[str(TASK.target)]
    assert all(r.ok and r.calibration > 0 for r in results)
    assert watch.figures == [r.calibration for r in results]
    failed = BuildResult(None, build.func_name, build.arg_specs, MeasureErrorNo.COMPILE_ERROR, "no")
    with LocalRunner(FAST) as runner:
        (res,) = runner.run([inp], [failed])
    assert res.error_no == MeasureErrorNo.COMPILE_ERROR and res.calibration == 0.0


def test_the_speed_watch_remeasures_a_spike_once_and_a_stretch_not_at_all() -> None:
    watch = SpeedWatch()
    for figure in (1.0, 1.02, 0.98, 1.01, 0.99):
        assert not watch.should_remeasure(2.0) or len(watch.figures) >= MIN_SAMPLES
        watch.add(figure)
    assert not watch.should_remeasure(1.0 + SLOW * 0.9)
    assert watch.should_remeasure(1.0 + SLOW * 1.5)  # a spike: measured again
    watch.remeasured_as(1.0)  # ... and the second time was normal
    assert not watch.stretch and watch.should_remeasure(1.3)
    watch.remeasured_as(1.3)  # the second time was slow too: a stretch
    assert watch.stretch and not watch.should_remeasure(1.4)  # not measured twice while it lasts
    assert not watch.should_remeasure(1.0) and not watch.stretch  # back to normal: it ended
    assert watch.should_remeasure(1.4) and watch.remeasured == 2
    drift = watch.drift
    assert drift is not None and drift.samples == 5 and drift.median_s == 1.0
    assert (drift.low_pct, drift.high_pct) == pytest.approx((98.0, 102.0))
    assert drift_of([]) is None and drift_of([0.0, float("nan")]) is None


class _SpikeRunner(LocalRunner):
    """The real runner; the busy processes run from the start of one chosen measurement until the
    calibration after it (a spike). Every outcome and calibration figure is noted."""

    def __init__(self, option: MeasureOption, spike_at: int) -> None:
        super().__init__(option)
        self.spike_at, self.measured = spike_at, 0
        self.outcomes: list[Outcome] = []
        self.calibrations: list[float] = []
        self._busy: contextlib.AbstractContextManager[None] | None = None

    def _measure(self, inp: MeasureInput, build: BuildResult) -> Outcome:
        self.measured += 1
        if self.measured == self.spike_at:
            self._busy = busy()
            self._busy.__enter__()
        outcome = super()._measure(inp, build)
        self.outcomes.append(outcome)
        return outcome

    def _calibrate(self) -> float:
        figure = super()._calibrate()
        self.calibrations.append(figure)
        if self._busy is not None:
            self._busy.__exit__(None, None, None)
            self._busy = None
        return figure


def test_a_measurement_in_a_slow_minute_is_made_again(built: tuple[MeasureInput, BuildResult]) -> None:
    inp, build = built
    with one_core(), _SpikeRunner(FAST, spike_at=MIN_SAMPLES + 1) as runner:
        for _ in range(MIN_SAMPLES):
            runner.run([inp], [build])
        (res,) = runner.run([inp], [build])
        watch = runner.speeds[str(TASK.target)]
    # the spiked measurement's brackets: the calibration after the one before it (reused) and the
    # slow one after it; then the second measurement's own two
    before, after, first, later = runner.calibrations[-4:]
    spiked, again = (before + after) / 2, (first + later) / 2
    assert runner.measured == MIN_SAMPLES + 2 and watch.remeasured == 1, "the slow minute was not seen"
    assert spiked > (1 + SLOW) * sorted(watch.figures[:MIN_SAMPLES])[MIN_SAMPLES // 2]
    # the measurement made at the faster speed is kept (the second, unless the machine stayed slow)
    kept = -1 if again < spiked else -2
    assert res.ok and res.costs == runner.outcomes[kept][2]
    assert res.calibration == pytest.approx(min(spiked, again)) and watch.figures[-1] == res.calibration


def test_a_slow_stretch_is_measured_again_once_then_stated(built: tuple[MeasureInput, BuildResult]) -> None:
    inp, build = built
    with one_core(), LocalRunner(FAST) as runner:
        quiet = [runner.run([inp], [build])[0] for _ in range(MIN_SAMPLES)]
        with busy():
            slow = [runner.run([inp], [build])[0] for _ in range(3)]
        watch = runner.speeds[str(TASK.target)]
    normal = sorted(r.calibration for r in quiet)[MIN_SAMPLES // 2]
    assert all(r.ok for r in slow)
    assert all(r.calibration > (1 + SLOW) * normal for r in slow), (normal, [r.calibration for r in slow])
    assert watch.remeasured == 1 and watch.stretch  # the first slow one only: then a stretch
    drift = watch.drift
    assert drift is not None and drift.samples == MIN_SAMPLES + 3 and drift.high_pct > 100 * (1 + SLOW)
