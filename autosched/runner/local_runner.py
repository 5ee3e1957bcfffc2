"""LocalRunner: check and time built candidates on this machine, in an isolated worker process.

The worker (:mod:`autosched.runner.worker`) is a long-lived fresh interpreter fed over a socket
(:class:`~autosched.runner.process.WorkerProcess`): it never imports the caller's main module, so
scripts without a main guard and notebooks work. A kernel that segfaults, aborts or hangs kills or
stalls only the worker: that candidate gets a ``RUNTIME_ERROR`` (naming the signal) or a
``RUN_TIMEOUT``, and the next one gets a fresh worker. Timing happens in C (``Kernel.bench``);
each candidate's first run is checked against the workload's reference on random inputs.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

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
from .process import WorkerProcess
from .worker import KEEP_TASKS

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


def task_data(task: Task, seed: int, check: bool) -> _TaskData:
    """A task's random inputs for ``seed`` and (with ``check``) its reference outputs on them."""
    inputs = task.workload.random_inputs(seed)
    expected = task.workload.reference(*[a.copy() for a in inputs]) if check else None
    return inputs, expected


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

    The worker starts on the first :meth:`run` and is reused; :meth:`close` (or leaving a ``with``
    block) stops it.
    """

    def __init__(self, option: MeasureOption = DEFAULT_OPTION, seed: int = 0) -> None:
        self.option = option
        self.seed = seed
        self._data: OrderedDict[str, _TaskData] = OrderedDict()
        self._worker: WorkerProcess | None = None
        self._served = 0  # candidates the current worker has measured

    def close(self) -> None:
        """Stop the worker (a later :meth:`run` starts a new one)."""
        if self._worker is not None:
            self._worker.stop()
        self._worker = None
        self._served = 0

    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]:
        """Check and time each built candidate; one :class:`MeasureResult` per input, in order."""
        if len(inputs) != len(builds):
            raise ValueError(f"{len(inputs)} inputs but {len(builds)} build results")
        results = []
        for inp, build in zip(inputs, builds, strict=True):
            start = time.perf_counter()
            outcome: _Outcome
            if build.error_no != MeasureErrorNo.NO_ERROR:
                outcome = (build.error_no, build.error_msg, ())
            elif build.lib_path is None:
                outcome = (MeasureErrorNo.UNKNOWN_ERROR, "the build gave no library", ())
            else:
                outcome = self._measure(inp, build)
            error_no, message, costs = outcome
            results.append(
                MeasureResult(
                    costs,
                    error_no,
                    message,
                    all_cost=build.time_cost + time.perf_counter() - start,
                    timestamp=time.time(),
                )
            )
        return results

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
        if answer[0] == "ok":
            return MeasureErrorNo.NO_ERROR, "", tuple(answer[1])
        if answer[1] == MeasureErrorNo.RUNTIME_ERROR and is_gpu_program(lib_path):
            self.close()  # a device fault can leave the worker's context (or process) unusable
        return MeasureErrorNo(answer[1]), str(answer[2]), ()

    def _ask(self, request: tuple[Any, ...], data: tuple[Any, ...] | None = None) -> tuple[Any, ...]:
        """Send ``data`` (if any) and ``request`` to the worker; its answer, or an error tuple if it
        hangs past the run timeout or dies. A worker that cannot start raises
        :class:`~autosched.runner.process.WorkerError`."""
        if self._worker is None or not self._worker.alive():
            self.close()
            self._worker = WorkerProcess("autosched.runner.worker", "measurement", START_TIMEOUT)
        worker = self._worker
        try:
            if data is not None:
                worker.send(data)
            worker.send(request)
        except OSError:
            return self._died(worker)
        timeout = self.option.run_timeout
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
