"""The measuring side of :func:`~autosched.search.tune.tune`: build a batch, run its candidates one
by one, log each result at once, retry the machinery once, stop early when the machinery (not the
programs) is broken, and hand the tuner what other runs sharing the log measured meanwhile."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from .. import records
from ..database.machine import fingerprint_for
from ..records import is_remeasurement
from ..runner.compile import compiler_version
from ..runner.errors import InfrastructureError
from ..runner.measure import Builder, BuildResult, MeasureErrorNo, MeasureInput, MeasureResult, Runner
from ..task import Task
from .progress import TuneStats
from .shared_log import SharedLog
from .tuner import Tuner
from .tuning_space import Candidate

#: a run whose first this many trials all fail with one unexplained error stops
FAIL_FAST = 8
#: seconds between two looks at the trials of runs sharing the log, while theirs fill the budget
WAIT_S = 0.05

_T = TypeVar("_T")


def retried(part: object, call: Callable[[], _T]) -> _T:
    """``call()``, once more after closing ``part`` (fresh workers) if the machinery failed."""
    try:
        return call()
    except InfrastructureError:
        close = getattr(part, "close", None)
        if close is not None:
            close()
    return call()


class Measurer:
    """Builds a batch, then runs its candidates one by one (on boards: while the rest build),
    logging each result at once.

    With a shared log, a candidate that another run is measuring (or has logged) is skipped: its
    result is ``None``. :meth:`foreign` hands over the records other runs added meanwhile.

    With a ``budget`` (the run's ``trials``), the runs sharing the log measure that many trials of
    the task in all: ``counted`` are the trials the log held when the run read it (from
    ``start``, the size it read), and :meth:`reserve` says how many programs this run may start now.
    """

    def __init__(
        self, task: Task, builder: Builder, runner: Runner, log: Path | None, stats: TuneStats, *,
        budget: int | None = None, counted: int = 0, start: int | None = None,
    ) -> None:
        self.task, self.builder, self.runner, self.log, self.stats = task, builder, runner, log, stats
        cc = task.target.cc
        version = getattr(builder, "compiler_version", compiler_version)  # a cluster's: its build workers'
        self.compiler = version(cc).strip().splitlines()[0] if cc else ""
        # a runner that measures elsewhere (a board) names the machine its records are valid for
        self.machine = getattr(runner, "machine", None) or fingerprint_for(task.target)
        self.shared = SharedLog(log, task.workload_key, str(task.target), start) if log is not None else None
        self.mine: set[str] = set()  # programs this run logged
        self.measured = 0  # programs this run measured
        self.budget = budget
        self.counted = counted  # trials of the task in the log: history, this run's, the others' read
        self.reserved: int | None = None  # programs the next batch may measure (None: not reserved)
        self.theirs: list[records.Record] = []  # records of other runs, not yet handed to the tuner
        self.first_errors: list[str] | None = []  # this run's first failures, while every trial fails

    def foreign(self) -> list[records.Record]:
        """Records other runs logged since the last call (programs to count, not to measure)."""
        self.foreign_news()
        out, self.theirs = self.theirs, []
        return out

    def reserve(self, wanted: int) -> int:
        """How many of ``wanted`` programs this run may measure in its next batch: the budget less
        the trials in the log and those other runs have under way (their slots). Waits while the
        others' measurements under way fill the budget (one of them may fail and leave a trial to
        do); 0 when the log holds the budget's trials. The programs are held (one slot each) until
        their records are logged. Without a budget or a shared log: ``wanted``."""
        shared = self.shared
        if shared is not None:
            shared.drop(shared.held)  # an unused reservation is given back
        if self.budget is None or shared is None or not shared.counts_trials:
            self.reserved = wanted
            return wanted
        while True:
            with shared.trial_lock():
                busy = shared.in_flight()  # first the measurements under way, then the log: a
                self.foreign_news()  # record is logged before its slot is given back
                left = self.budget - self.counted
                if left <= 0 or left > busy:
                    self.reserved = max(0, min(wanted, left - busy))
                    shared.hold(self.reserved)
                    return self.reserved
            time.sleep(WAIT_S)

    def _claimed(self, candidates: list[Candidate], limit: int | None = None) -> list[str | None]:
        """Each candidate's program key if this run may measure it, else None; ``limit`` at most."""
        keys: list[str | None] = [records.steps_key(c.steps) for c in candidates]
        limit = len(keys) if limit is None else limit
        if self.shared is None:
            return [k if i < limit else None for i, k in enumerate(keys)]
        shared = self.shared
        self.foreign_news()
        done = {r.program_key for r in self.theirs}
        claimed: list[str | None] = []
        for k in keys:
            ok = limit > 0 and k is not None and k not in done and shared.claim(k)
            claimed.append(k if ok else None)
            limit -= ok
        # another run may have logged one of them and given its claim back since the read above
        self.foreign_news()
        late = {r.program_key for r in self.theirs}
        for i, key in enumerate(claimed):
            if key is not None and key in late:
                shared.release(key)
                claimed[i] = None
        return claimed

    def foreign_news(self) -> None:
        """Keep the records other runs logged since the last read (for :meth:`foreign`)."""
        if self.shared is not None:
            news = [r for r in self.shared.news() if r.program_key not in self.mine]
            self.counted += sum(not is_remeasurement(r) for r in news)
            self.theirs += news

    def __call__(self, candidates: list[Candidate]) -> list[MeasureResult | None]:
        """Measure ``candidates`` (as many as :meth:`reserve` allowed; it is called here if the
        batch was not reserved) and log each result; None for those left to other runs."""
        limit = self.reserved if self.reserved is not None else self.reserve(len(candidates))
        self.reserved = None
        keys = self._claimed(candidates, limit)
        todo = [i for i, k in enumerate(keys) if k is not None]
        inputs = [MeasureInput(self.task, candidates[i].steps, candidates[i].program) for i in todo]
        out: list[MeasureResult | None] = [None] * len(candidates)
        if self.shared is not None:
            self.shared.drop(self.shared.held - len(todo))  # slots no program of the batch needs
        try:
            for j, res in self._measured(inputs):
                i, inp = todo[j], inputs[j]
                out[i] = res
                if res.calibration > 0:
                    self.stats.calibrations.append(res.calibration)
                key = keys[i]
                assert key is not None
                self.measured += 1
                self.counted += 1
                if self.log is not None:
                    record = records.Record.from_measure(inp, res, self.compiler, inp.program, self.machine)
                    records.append_records(self.log, [record])
                    self.mine.add(key)
                if self.shared is not None:
                    self.shared.drop()  # after its record is logged: the others count one or the other
                self._fail_fast(res)
        finally:
            if self.shared is not None:
                self.shared.drop(self.shared.held)
                for key in keys:
                    if key is not None:
                        self.shared.release(key)
        return out

    def _measured(self, inputs: list[MeasureInput]) -> Iterator[tuple[int, MeasureResult]]:
        """(index, result) per candidate of ``inputs``, built then measured; the stats get the
        compile time (until the last build) and the run time (the rest).

        A runner with ``run_stream`` and a builder with ``build_each`` (boards) overlap them: the
        boards time the first candidates while the others compile.
        """
        t0 = time.monotonic()
        emitted = getattr(self.builder, "emit_time", 0.0)
        run_stream = getattr(self.runner, "run_stream", None)
        build_each = getattr(self.builder, "build_each", None)
        if run_stream is not None and build_each is not None:
            built_at = [t0]

            def built() -> Iterator[tuple[int, BuildResult]]:
                yield from build_each(inputs)
                built_at[0] = time.monotonic()

            for j, res in run_stream(inputs, built()):
                self.stats.add(res.error_no)
                yield j, res
            t1 = built_at[0]
        else:
            builds = retried(self.builder, lambda: self.builder.build(inputs))
            t1 = time.monotonic()
            yield from self._results(inputs, builds)
        # lowering and emitting are Python work, not compiling: count them apart where the builder says
        self.stats.build_time += t1 - t0 - (getattr(self.builder, "emit_time", 0.0) - emitted)
        self.stats.run_time += time.monotonic() - t1

    def _results(
        self, inputs: list[MeasureInput], builds: list[BuildResult]
    ) -> Iterator[tuple[int, MeasureResult]]:
        """(index, result) per candidate: one by one, or as a runner with ``run_each`` (several
        devices measuring in parallel) completes them."""
        run_each = getattr(self.runner, "run_each", None)
        if run_each is None:
            for j, (inp, build) in enumerate(zip(inputs, builds, strict=True)):
                yield j, self._run(inp, build)
            return
        for j, res in run_each(inputs, builds):
            self.stats.add(res.error_no)
            yield j, res

    def _run(self, inp: MeasureInput, build: BuildResult) -> MeasureResult:
        (res,) = retried(self.runner, lambda: self.runner.run([inp], [build]))
        self.stats.add(res.error_no)
        return res

    def _fail_fast(self, res: MeasureResult) -> None:
        """Stop a run whose first trials all fail with the same unexplained error."""
        if self.first_errors is None:
            return
        if res.error_no != MeasureErrorNo.UNKNOWN_ERROR:
            self.first_errors = None
            return
        self.first_errors.append(res.error_msg)
        if len(self.first_errors) >= FAIL_FAST and len(set(self.first_errors)) == 1:
            raise InfrastructureError(
                f"the first {FAIL_FAST} trials all failed with the same error, so the measuring "
                f"machinery is likely broken: {res.error_msg}"
            )

    def close(self) -> None:
        """Close the shared log (and with it every claim)."""
        if self.shared is not None:
            self.shared.close()


class SyncOtherRuns:
    """Callback: after each batch, hand the tuner the records other runs logged meanwhile."""

    def __init__(self, measurer: Measurer, stats: TuneStats) -> None:
        self.measurer, self.stats = measurer, stats

    def __call__(self, tuner: Tuner, candidates: list[Candidate], results: list[MeasureResult]) -> None:
        theirs = [r for r in self.measurer.foreign() if not is_remeasurement(r)]
        for r in theirs:
            self.stats.add(r.error_no)
        tuner.load_history(theirs)


