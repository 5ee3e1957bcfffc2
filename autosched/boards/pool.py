"""BoardPool: the runner that times candidates on boards over SSH, several boards in parallel.

    pool = BoardPool(["rpi4", "rpi4b"], option=MeasureOption(run_timeout=30))
    asc.tune(asc.Task("matmul", (256, 256, 256), target="c -cc=aarch64-linux-gnu-gcc"), runner=pool)

A free board takes a batch of queued candidates (at most ``batch``, and no more than its share of
the queue when several boards are up): their executables go up in one transfer, and the board
times them one at a time (holding a lock on the board itself while each runs, so other tuning
processes sharing it wait).

Health: a board whose batch fails for the board's reasons (ssh cannot connect, the connection
drops, a garbled answer) is retried after a backoff (1, 2, 4 s); after ``retries`` failures in a
row it is marked down and probed again every ``probe_every`` seconds (an ``AutoschedWarning``
says when a board stops answering). The candidates of its batch go back to the queue: another
board measures them, or they wait for one. A board failure is never charged to the program. If no
board is up for ``down_timeout`` seconds,
:meth:`BoardPool.run_each` raises :class:`BoardsDown` (an infrastructure error); the tuning log
keeps everything measured, so running again resumes.
"""

from __future__ import annotations

import collections
import math
import threading
import time
import warnings
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from queue import Empty, SimpleQueue
from typing import Any

from ..diagnostics import AutoschedWarning
from ..runner.errors import InfrastructureError
from ..runner.measure import BuildResult, Closing, MeasureErrorNo, MeasureInput, MeasureOption, MeasureResult
from .board import Board
from .program import RemoteBuilder
from .session import BoardSession, Job, Outcome, TaskData
from .ssh import BoardUnreachable

__all__ = ["BoardPool", "BoardsDown"]


class BoardsDown(InfrastructureError):
    """No board answered for longer than the pool's ``down_timeout``."""


@dataclass
class _Health:
    """A board's state in the pool."""

    session: BoardSession
    failures: int = 0  # board failures in a row
    down: bool = False
    next_try: float = 0.0  # monotonic time before which the board is left alone
    last_error: str = ""
    busy: bool = False
    measured: int = field(default=0)  # candidates this board measured


class BoardPool(Closing):
    """Times built candidates on ``boards`` (aliases or :class:`Board` s): the :class:`Runner` protocol.

    ``option`` sets the timing as for the local runner; ``seed`` the task inputs; ``ssh_config``
    a configuration file instead of ``~/.ssh/config``; ``share=False`` turns off connection
    sharing; ``batch`` is the most candidates a board gets in one transfer (1: one round trip
    per candidate); ``overlap=False`` builds a whole batch before the boards time any of it (for
    a stand-in board on this machine, whose timings the compilers would disturb).
    :meth:`make_builder` gives the matching builder (static executables).
    """

    def __init__(
        self,
        boards: Sequence[str | Board],
        option: MeasureOption | None = None,
        seed: int = 0,
        *,
        ssh_config: str | None = None,
        share: bool = True,
        retries: int = 3,
        probe_every: float = 2.0,
        down_timeout: float = 600.0,
        batch: int = 8,
        overlap: bool = True,
    ) -> None:
        if not boards:
            raise ValueError("a board pool needs at least one board")
        if batch < 1:
            raise ValueError(f"batch must be at least 1, got {batch}")
        self.boards = [b if isinstance(b, Board) else Board(b) for b in boards]
        if len({b.name for b in self.boards}) != len(self.boards):
            raise ValueError("a board is named twice")
        self.option = option or MeasureOption()
        self.retries, self.probe_every, self.down_timeout = retries, probe_every, down_timeout
        self.batch, self.overlap = batch, overlap
        self._health = [_Health(BoardSession(b, ssh_config, share)) for b in self.boards]
        self._data = TaskData(seed)
        self._machine = ""
        self.board_failures = 0  # trials a board failure sent back to the queue

    def make_builder(self, option: MeasureOption) -> RemoteBuilder:
        """The builder for this runner: static executables, ``option``'s parallelism and timeout."""
        return RemoteBuilder(n_parallel=option.n_parallel, timeout=option.build_timeout)

    @property
    def machine(self) -> str:
        """The fingerprint of the first board that answers (records are valid for its hardware).

        Connects to the boards in turn; raises ``BoardUnreachable`` naming each board's error if
        none answers.
        """
        if not self._machine:
            errors = []
            for health in self._health:
                try:
                    info = health.session.info or health.session.start()
                except BoardUnreachable as e:
                    errors.append(str(e))
                    continue
                self._machine = info.fingerprint(health.session.board.launcher)
                break
            else:
                raise BoardUnreachable("no board answers: " + "; ".join(errors))
        return self._machine

    def close(self) -> None:
        """Remove the run directories on the boards and end the connections."""
        for health in self._health:
            health.session.close()

    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]:
        """Check and time each built candidate; one :class:`MeasureResult` per input, in order."""
        out: list[MeasureResult | None] = [None] * len(inputs)
        for i, res in self.run_each(inputs, builds):
            out[i] = res
        assert all(r is not None for r in out)
        return [r for r in out if r is not None]

    def run_each(
        self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]
    ) -> Iterator[tuple[int, MeasureResult]]:
        """(index, result) for each candidate as soon as it is measured, boards in parallel."""
        if len(inputs) != len(builds):
            raise ValueError(f"{len(inputs)} inputs but {len(builds)} build results")
        yield from self.run_stream(inputs, enumerate(builds))

    def run_stream(
        self, inputs: Sequence[MeasureInput], built: Iterable[tuple[int, BuildResult]]
    ) -> Iterator[tuple[int, MeasureResult]]:
        """:meth:`run_each` of builds that arrive while the boards measure: ``built`` gives
        (index, build) pairs (e.g. :meth:`RemoteBuilder.build_each`) and is read in a thread of
        its own, so the boards time the first candidates while the others compile."""
        if not self.overlap:
            built = list(built)
        arrivals: SimpleQueue[Any] = SimpleQueue()  # (index, build) pairs, then None or an exception
        threading.Thread(target=_feed, args=(built, arrivals), name="board-builds", daemon=True).start()
        yield from self._dispatch(inputs, arrivals)

    def _dispatch(
        self, inputs: Sequence[MeasureInput], arrivals: SimpleQueue[Any]
    ) -> Iterator[tuple[int, MeasureResult]]:
        builds: dict[int, BuildResult] = {}
        queue: collections.deque[int] = collections.deque()
        running: dict[Future[list[Outcome]], tuple[_Health, list[int], float]] = {}
        none_up_since: float | None = None
        feeding = True
        with ThreadPoolExecutor(len(self._health), thread_name_prefix="board") as threads:
            while feeding or queue or running:
                if feeding:  # take the builds made meanwhile (waiting for one when there is nothing to do)
                    failed, feeding = _arrived(arrivals, builds, queue, wait=not (queue or running))
                    yield from failed
                now, share = time.monotonic(), self._share(len(queue))
                for h in self._health:
                    if h.busy or now < h.next_try or not queue:
                        continue
                    taken = [] if h.down else [queue.popleft() for _ in range(min(share, len(queue)))]
                    h.busy = True
                    job = threads.submit(self._work, h, [(inputs[i], builds[i]) for i in taken])
                    running[job] = (h, taken, time.perf_counter())
                if any(not h.down for h in self._health):
                    none_up_since = None
                elif none_up_since is None:
                    none_up_since = now
                elif now - none_up_since > self.down_timeout:
                    raise BoardsDown(self._down_message())
                if not running:
                    if queue:  # every board waits out a backoff
                        time.sleep(0.2)
                    continue
                done, _ = wait(running, timeout=0.05 if feeding else 0.2, return_when=FIRST_COMPLETED)
                for job in done:
                    h, taken, started = running.pop(job)
                    h.busy = False
                    try:
                        outcomes = job.result()
                    except BoardUnreachable as e:
                        self._failed(h, str(e))
                        queue.extendleft(reversed(taken))  # first in line again, in their order
                        self.board_failures += len(taken)
                        continue
                    h.failures, h.down = 0, False
                    h.measured += len(taken)
                    each = (time.perf_counter() - started) / max(1, len(taken))
                    for i, (error_no, message, costs) in zip(taken, outcomes, strict=True):
                        spent = builds[i].time_cost + each
                        yield i, MeasureResult(costs, error_no, message, spent, time.time())

    def _share(self, queued: int) -> int:
        """How many of the ``queued`` candidates a free board takes: at most ``batch``, and no more
        than its share of the queue among the boards that are up (so that none stands idle while
        another works through a long batch)."""
        up = sum(not h.down for h in self._health)
        return max(1, min(self.batch, math.ceil(queued / max(1, up))))

    def _work(self, h: _Health, jobs: list[Job]) -> list[Outcome]:
        """Measure ``jobs`` on the board in one batch, or (none) probe a down board by starting a
        fresh session. Raises ``BoardUnreachable`` if the board failed."""
        if not jobs:
            h.session.conn.close()
            h.session.start()
            return []
        return h.session.measure_batch(jobs, self._data, self.option)

    def _failed(self, h: _Health, error: str) -> None:
        h.failures += 1
        h.last_error = error
        h.session.conn.close()  # a fresh connection next time
        if h.failures == 1:  # once per outage, not per retry
            others = "other boards take its candidates" if len(self._health) > 1 else "its trials wait"
            warnings.warn(
                f"board {h.session.board.name} does not answer ({error}); {others}, and it is tried "
                f"again ({self.retries} times with backoff, then every {self.probe_every:g} s)",
                AutoschedWarning,
                stacklevel=2,
            )
        if h.failures >= self.retries:
            h.down = True
            h.next_try = time.monotonic() + self.probe_every
        else:
            h.next_try = time.monotonic() + 2.0 ** (h.failures - 1)

    def _down_message(self) -> str:
        errors = "; ".join(h.last_error for h in self._health if h.last_error)
        return (
            f"every board has been down for over {self.down_timeout:g} s, so tuning stops ({errors}); "
            "the log keeps every measurement: run the same command again to resume"
        )


def _feed(built: Iterable[tuple[int, BuildResult]], arrivals: SimpleQueue[Any]) -> None:
    """Put each of ``built`` on ``arrivals``, then None (or what went wrong: raised by the reader)."""
    try:
        for item in built:
            arrivals.put(item)
    except BaseException as e:  # handed to the measuring thread, which raises it
        arrivals.put(e)
        return
    arrivals.put(None)


def _arrived(
    arrivals: SimpleQueue[Any], builds: dict[int, BuildResult], queue: collections.deque[int], wait: bool
) -> tuple[list[tuple[int, MeasureResult]], bool]:
    """Move the builds on ``arrivals`` into ``builds`` and ``queue`` (with ``wait``, waiting up to
    0.2 s for the first); the results of the candidates that did not build, and whether more come."""
    failed: list[tuple[int, MeasureResult]] = []
    while True:
        try:
            item = arrivals.get(timeout=0.2) if wait else arrivals.get_nowait()
        except Empty:
            return failed, True
        wait = False
        if item is None:
            return failed, False
        if isinstance(item, BaseException):
            raise item
        i, build = item
        if build.error_no == MeasureErrorNo.NO_ERROR and build.lib_path is not None:
            builds[i] = build
            queue.append(i)
            continue
        kind, message = build.error_no, build.error_msg
        if kind == MeasureErrorNo.NO_ERROR:
            kind, message = MeasureErrorNo.UNKNOWN_ERROR, "the build gave no executable"
        failed.append((i, MeasureResult((), kind, message, build.time_cost, time.time())))
