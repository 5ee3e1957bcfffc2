"""LocalRunner: check and time built candidates on this machine, in an isolated worker process.

The worker (:mod:`autosched.runner.measure_worker`) is a long-lived fresh interpreter fed over a socket
(:class:`~autosched.runner.process.WorkerProcess`): it never imports the caller's main module, so
scripts without a main guard and notebooks work. A kernel that segfaults, aborts or hangs kills or
stalls only the worker: that candidate gets a ``RUNTIME_ERROR`` (naming the signal) or a
``RUN_TIMEOUT``, and the next one gets a fresh worker. Timing happens in C (``Kernel.bench``);
each candidate's first run is checked against the workload's reference on random inputs.

On C targets of this machine each measurement is bracketed by timings of the calibration kernel
(:mod:`autosched.runner.calibration`): the result carries the figure, and a measurement made in a
slow minute is made again (:mod:`autosched.runner.drift`). :meth:`LocalRunner.run_rounds` times
several programs in interleaved rounds in the worker (A B C A B C ...), the calibration kernel in
every round.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..diagnostics import warn
from .calibration import calibration_library
from .compile import BuildError
from .drift import SpeedWatch
from .gpu_load import is_gpu_program
from .kernel import ArgSpec
from .measure import (
    Builder,
    BuildResult,
    Closing,
    MeasureErrorNo,
    MeasureInput,
    MeasureOption,
    MeasureResult,
    Runner,
)
from .measure_worker import KEEP_TASKS
from .process import WorkerProcess

if TYPE_CHECKING:
    from ..task import Task

#: seconds a fresh worker may take to start (import numpy, cffi and autosched) before giving up
START_TIMEOUT = 120.0

_TaskData = tuple[list[np.ndarray], list[np.ndarray] | None]
_Outcome = tuple[MeasureErrorNo, str, tuple[float, ...]]

#: candidates a worker measures before it is replaced: it never unloads a library (OpenMP thread
#: pools make unloading unsafe), so a fresh worker now and then bounds its memory and mappings
RECYCLE_AFTER = 500

#: the default measurement: 3 repeats of at least 20 ms, checked, 20 s per candidate
DEFAULT_OPTION = MeasureOption()

#: seconds for which the calibration taken after one measurement also counts as taken before the next
FRESH_S = 1.0


@dataclasses.dataclass(frozen=True)
class Rounds:
    """What :meth:`LocalRunner.run_rounds` measured: one result per program (its costs: its repeats
    of every round, in round order) and the calibration figures (one before each round and one
    after the last; empty where the target has no calibration kernel)."""

    results: list[MeasureResult]
    figures: list[float]


def task_data(task: Task, seed: int, check: bool) -> _TaskData:
    """A task's random inputs for ``seed`` and (with ``check``) its reference outputs on them."""
    inputs = task.workload.random_inputs(seed)
    expected = task.workload.reference(*[a.copy() for a in inputs]) if check else None
    return inputs, expected


def _build_failure(build: BuildResult) -> _Outcome | None:
    """The outcome of a candidate whose build failed; None if it has a library to measure."""
    if build.error_no != MeasureErrorNo.NO_ERROR:
        return build.error_no, build.error_msg, ()
    if build.lib_path is None:
        return MeasureErrorNo.UNKNOWN_ERROR, "the build gave no library", ()
    return None


def _outcome(answer: tuple[Any, ...]) -> _Outcome:
    """The outcome a worker's answer to a measurement gives."""
    if answer[0] == "ok":
        return MeasureErrorNo.NO_ERROR, "", tuple(answer[1])
    if answer[0] == "error":
        return MeasureErrorNo(answer[1]), str(answer[2]), ()
    return MeasureErrorNo.UNKNOWN_ERROR, f"the measurement worker answered {answer[0]!r}", ()


def measure_batch(builder: Builder, runner: Runner, inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
    """Build every candidate, then run them: builds never share the cores with a measurement."""
    builds = builder.build(inputs)
    return runner.run(inputs, builds)


class LocalRunner(Closing):
    """Runs built C candidates on this machine (the :class:`Runner` protocol).

    ``option`` sets the timing (``number``, ``repeat``, ``min_repeat_ms``, ``flush_cache``,
    ``cooldown_ms``), whether outputs are checked (``check``) and ``run_timeout``: the seconds one
    candidate may spend in the worker (load, first run and check, calibration, every repeat)
    before the worker is killed. ``seed`` picks the random inputs.

    On C targets of this machine each measurement carries its calibration figure, and
    :attr:`speeds` keeps each target's figures (:class:`~autosched.runner.drift.SpeedWatch`: the
    run's drift, the measurements made again). The worker starts on the first :meth:`run` and is
    reused; :meth:`close` (or leaving a ``with`` block) stops it.
    """

    def __init__(self, option: MeasureOption = DEFAULT_OPTION, seed: int = 0) -> None:
        self.option = option
        self.seed = seed
        self._data: OrderedDict[str, _TaskData] = OrderedDict()
        self._worker: WorkerProcess | None = None
        self._served = 0  # candidates the current worker has measured
        self.speeds: dict[str, SpeedWatch] = {}  # per target string: its calibration figures
        self._libraries: dict[str, str | None] = {}  # per target string: the calibration library
        self._calibrator: tuple[WorkerProcess, str] | None = None  # the worker's calibration library
        self._last: tuple[WorkerProcess | None, float, float] = (None, 0.0, 0.0)  # worker, when, figure

    def close(self) -> None:
        """Stop the worker (a later :meth:`run` starts a new one)."""
        if self._worker is not None:
            self._worker.stop()
        self._worker = None
        self._served = 0
        self._calibrator = None

    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]:
        """Check and time each built candidate; one :class:`MeasureResult` per input, in order."""
        if len(inputs) != len(builds):
            raise ValueError(f"{len(inputs)} inputs but {len(builds)} build results")
        results = []
        for inp, build in zip(inputs, builds, strict=True):
            start = time.perf_counter()
            figure = 0.0
            outcome = _build_failure(build)
            if outcome is None:
                outcome, figure = self._watched(inp, build)
            error_no, message, costs = outcome
            results.append(
                MeasureResult(
                    costs,
                    error_no,
                    message,
                    all_cost=build.time_cost + time.perf_counter() - start,
                    timestamp=time.time(),
                    calibration=figure,
                )
            )
        return results

    def run_rounds(
        self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult], rounds: int, repeat: int = 1
    ) -> Rounds:
        """Time the built programs in ``rounds`` interleaved rounds in the worker: each round times
        the calibration kernel (where the target has one), then each program once with ``repeat``
        repeats (A B C A B C ...), so that a slow minute slows all of them alike. A program that
        fails (its build, its check or a run) gets its error; the others go on. Each result's
        calibration is the median figure."""
        if len(inputs) != len(builds):
            raise ValueError(f"{len(inputs)} inputs but {len(builds)} build results")
        start = time.perf_counter()
        outcomes: dict[int, _Outcome] = {}
        order, items, data = [], [], {}
        for i, (inp, build) in enumerate(zip(inputs, builds, strict=True)):
            failure = _build_failure(build)
            if failure is None:
                try:
                    key, data[key] = self._task_data(inp)
                except Exception as e:  # the workload's inputs or reference failed
                    failure = (MeasureErrorNo.UNKNOWN_ERROR, f"reference: {type(e).__name__}: {e}", ())
            if failure is not None:
                outcomes[i] = failure
                continue
            order.append(i)
            items.append((key, build.lib_path, build.func_name, build.arg_specs))
        figures: list[float] = []
        if items:
            watch = self._calibrated(inputs[order[0]])
            timeout = self.option.run_timeout * rounds * len(items)
            option = dataclasses.replace(self.option, repeat=repeat, run_timeout=timeout)
            answer = self._ask_rounds(items, data, option, rounds)
            got = answer[1] if answer[0] == "ok" else [answer] * len(order)
            outcomes.update(zip(order, map(_outcome, got), strict=True))
            if answer[0] == "ok" and watch is not None:
                figures = [float(f) for f in answer[2]]
        figure = statistics.median(figures) if figures else 0.0
        share = (time.perf_counter() - start) / len(inputs) if inputs else 0.0
        results = []
        for i, build in enumerate(builds):
            error_no, message, costs = outcomes[i]
            ok = error_no == MeasureErrorNo.NO_ERROR
            results.append(MeasureResult(costs, error_no, message, all_cost=build.time_cost + share,
                                         timestamp=time.time(), calibration=figure if ok else 0.0))
        return Rounds(results, figures)

    # -- the parent's side of the worker protocol

    def _task_data(self, inp: MeasureInput) -> tuple[str, _TaskData]:
        """The key and (inputs, expected outputs) of a candidate's task, computed once per task."""
        task = inp.task
        key = f"{task.workload_key}|{task.target}|{self.seed}"
        data = self._data.get(key)
        if data is None:
            data = task_data(task, self.seed, self.option.check)
            self._data[key] = data
            while len(self._data) > KEEP_TASKS:
                self._data.popitem(last=False)
        self._data.move_to_end(key)
        return key, data

    # -- the calibration kernel beside the candidates

    def _calibrated(self, inp: MeasureInput) -> SpeedWatch | None:
        """The :class:`SpeedWatch` of the candidate's target, its calibration kernel loaded in the
        worker; None where it has none (a GPU or cross target, a build that failed)."""
        target = inp.task.target
        if not target.is_native:
            return None
        key = str(target)
        if key not in self._libraries:
            try:
                self._libraries[key] = calibration_library(target)
            except BuildError as e:
                warn(f"no calibration kernel for {key} (measurements are not calibrated): {e}")
                self._libraries[key] = None
        path = self._libraries[key]
        if path is None:
            return None
        worker = self._worker
        if worker is None or not worker.alive() or self._calibrator != (worker, path):
            answer = self._ask(("calibration", path))
            if answer[0] != "ok":
                warn(f"the calibration kernel of {key} did not load (measurements are not calibrated): "
                     f"{answer[2]}")
                self._libraries[key] = None
                return None
            assert self._worker is not None
            self._calibrator = (self._worker, path)
        return self.speeds.setdefault(key, SpeedWatch())

    def _calibrate(self) -> float:
        """The calibration kernel's seconds per call now (0.0 if the worker could not say)."""
        answer = self._ask(("calibrate",))
        figure = float(answer[1]) if answer[0] == "ok" else 0.0
        self._last = (self._worker, time.monotonic(), figure)
        return figure

    def _watched(self, inp: MeasureInput, build: BuildResult) -> tuple[_Outcome, float]:
        """Measure a built candidate between two calibrations (the one taken after the previous
        measurement, if recent, counts as the one before); measure it once more, between two new
        calibrations, if its minute was slow (see :mod:`autosched.runner.drift`), and keep the
        measurement made at the faster speed: the outcome kept and its calibration figure."""
        if self._served >= RECYCLE_AFTER:
            self.close()  # here, not between the calibrations (measure_file recycles too)
        watch = self._calibrated(inp)
        if watch is None:
            return self._measure(inp, build), 0.0
        worker, when, before = self._last
        if worker is not self._worker or time.monotonic() - when > FRESH_S or before <= 0:
            before = self._calibrate()
        outcome = self._measure(inp, build)
        after = self._calibrate()
        if outcome[0] != MeasureErrorNo.NO_ERROR or before <= 0 or after <= 0:
            return outcome, 0.0
        figure = (before + after) / 2
        if watch.should_remeasure(figure):  # between calibrations of its own: a spike may be over
            first = self._calibrate()
            again = self._measure(inp, build)
            later = self._calibrate()
            second = (first + later) / 2 if first > 0 and later > 0 else 0.0
            watch.remeasured_as(second)
            if again[0] == MeasureErrorNo.NO_ERROR and 0 < second < figure:
                outcome, figure = again, second
        watch.add(figure)
        return outcome, figure

    def _measure(self, inp: MeasureInput, build: BuildResult) -> _Outcome:
        try:
            key, data = self._task_data(inp)
        except Exception as e:  # the workload's inputs or reference failed
            return MeasureErrorNo.UNKNOWN_ERROR, f"reference: {type(e).__name__}: {e}", ()
        assert build.lib_path is not None
        return self.measure_file(key, data, build.lib_path, build.func_name, build.arg_specs)

    def measure_file(
        self, key: str, data: _TaskData, lib_path: str, func_name: str, specs: Sequence[ArgSpec]
    ) -> _Outcome:
        """Check and time the built kernel at ``lib_path`` on ``data`` (the task's inputs and
        expected outputs, known to the worker as ``key``): (error kind, message, costs)."""
        if self._served >= RECYCLE_AFTER:
            self.close()
        request = ("run", key, lib_path, func_name, specs, self.option)
        answer = self._ask(request)
        if answer[0] == "missing":
            answer = self._ask(request, ("data", key, *data))
        self._served += 1
        if answer[0] == "error" and answer[1] == MeasureErrorNo.RUNTIME_ERROR and is_gpu_program(lib_path):
            self.close()  # a device fault can leave the worker's context (or process) unusable
        return _outcome(answer)

    def _ask_rounds(
        self, items: list[tuple[Any, ...]], data: dict[str, _TaskData], option: MeasureOption, rounds: int
    ) -> tuple[Any, ...]:
        """Send a ``rounds`` request (and the task data the worker lacks) under ``option``'s timeout."""
        request = ("rounds", items, option, rounds)
        answer = self._ask(request, timeout=option.run_timeout)
        for _ in range(len(data)):
            if answer[0] != "missing":
                break
            answer = self._ask(request, ("data", answer[1], *data[answer[1]]), option.run_timeout)
        self._served += len(items)
        return answer

    def _ask(
        self, request: tuple[Any, ...], data: tuple[Any, ...] | None = None, timeout: float | None = None
    ) -> tuple[Any, ...]:
        """Send ``data`` (if any) and ``request`` to the worker; its answer, or an error tuple if it
        hangs past ``timeout`` (default: the run timeout) or dies. A worker that cannot start raises
        :class:`~autosched.runner.process.WorkerError`."""
        if self._worker is None or not self._worker.alive():
            self.close()
            self._worker = WorkerProcess("autosched.runner.measure_worker", "measurement", START_TIMEOUT)
        worker = self._worker
        try:
            if data is not None:
                worker.send(data)
            worker.send(request)
        except OSError:
            return self._died(worker)
        timeout = self.option.run_timeout if timeout is None else timeout
        if not worker.conn.poll(timeout):
            worker.kill()
            self._worker, self._served = None, 0
            return ("error", MeasureErrorNo.RUN_TIMEOUT, f"no result within {timeout:g} s; worker killed")
        try:
            answer: tuple[Any, ...] = worker.conn.recv()
        except (EOFError, OSError):
            return self._died(worker)
        return answer

    def _died(self, worker: WorkerProcess) -> tuple[Any, ...]:
        """The error answer for a worker that died on a candidate (a crash: the program's fault)."""
        why = worker.death()
        self._worker, self._served = None, 0
        return ("error", MeasureErrorNo.RUNTIME_ERROR, f"worker died: {why}")
