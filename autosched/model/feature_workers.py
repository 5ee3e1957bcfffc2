"""Features of a large batch of programs extracted on several cores.

Scoring a search step's population (hundreds of programs, each lowered and described in pure
Python) is most of a model-guided search's own time, and it runs while the cores wait: nothing is
compiled or measured meanwhile. :func:`fill` splits a batch among ``workers()`` helper processes
(fresh interpreters started by :class:`~autosched.runner.process.WorkerProcess`, running
:mod:`.feature_helper`: they never re-run the caller's main module) and puts their arrays in
:data:`~.feature_cache.FEATURE_CACHE`, where :func:`~.features.extract_features` finds them: the
same arrays, bit for bit, as this process would compute. This process waits meanwhile: a helper,
whose heap holds only its batch, describes a program faster than a tuning process full of cached
programs does. The evolutionary search also has the helpers make its children
(:func:`sketch_steps`): a child's sketch program is drawn here, and the helper replays it into
schedule steps and describes the result.

Helpers serve only inside a tuning run (:func:`session`; ``asc.tune`` and ``asc.tune_network`` are
one), which stops them as it ends; elsewhere every program is described in the calling process.
How many: ``AUTOSCHED_FEATURE_WORKERS=N`` (read when the first large batch comes; at most
:data:`MAX_WORKERS`), none by default: what they buy depends on the workload and the machine. On
two cores (AMD EPYC Zen 4, ``benchmarks/bench_search_overhead.py``, 256 trials, the same programs)
two helpers cut the search's own time per trial by 9-20% on a packed conv2d, whose programs take
3-4 ms each to lower and describe, and raised it by a third on matmul 512, whose programs take
about 1.3 ms: there, sending sketch programs and steps between processes costs more than it
saves. A program of a workload registered in ``__main__`` (a script or a notebook cell, which a
fresh interpreter does not have) stays in this process; so does a batch a helper fails on, and
after a helper dies or stops answering no helpers are used again (one warning). Helpers wait on
their socket between batches: no CPU time is taken from the kernels being measured.
"""

from __future__ import annotations

import atexit
import functools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import wait
from typing import Any, TypeVar

from ..diagnostics import warn
from ..ops.registry import registered
from ..runner.measure import MeasureInput
from ..runner.process import WorkerError, WorkerProcess
from ..schedule.steps import Step
from ..task import Task
from .feature_cache import FEATURE_CACHE, feature_key, remember

__all__ = ["MAX_WORKERS", "MIN_BATCH", "fill", "in_session", "session", "shutdown", "sketch_steps", "workers"]

#: most helper processes (a population is a few hundred programs)
MAX_WORKERS = 7
#: fewest new programs in a batch worth sending to helpers (fewer: this process alone)
MIN_BATCH = 24
#: chunks per helper a batch is cut into (the next chunk goes to whichever helper is free)
CHUNKS_PER_HELPER = 4
#: seconds a helper may take per program before it is given up (lowering takes milliseconds)
SECONDS_PER_PROGRAM = 2.0


def workers() -> int:
    """How many helper processes large batches use (see the module doc)."""
    text = os.environ.get("AUTOSCHED_FEATURE_WORKERS", "").strip()
    if text:
        try:
            return max(0, min(int(text), MAX_WORKERS))
        except ValueError:
            warn(f"AUTOSCHED_FEATURE_WORKERS={text!r} is not a number; using no helpers")
    return 0


def _module(task: Task) -> str | None:
    """The module a fresh interpreter imports to know ``task``'s workload; None: it cannot."""
    definition = registered(task.workload.name)
    module = getattr(getattr(definition, "func", None), "__module__", None)
    if not module or module.startswith("__"):  # __main__, __mp_main__: the caller's own script
        return None
    return module


class _Pool:
    """The helper processes of this process, started on first use."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.helpers: list[WorkerProcess] = []
        self.broken = False
        self.lock = threading.Lock()

    def _start(self) -> None:
        while len(self.helpers) < self.count:
            self.helpers.append(WorkerProcess("autosched.model.feature_helper", "feature"))

    def close(self) -> None:
        for helper in self.helpers:
            helper.stop()
        self.helpers = []

    def _give_up(self, why: str) -> None:
        self.broken = True
        self.close()
        warn(f"feature helper processes stopped ({why}); extracting features in this process only")

    def run(self, kind: str, module: str, task: Task, items: list[Any]) -> list[Any]:
        """The helpers' answers for ``items`` of ``task`` (``kind`` as in the protocol), sent in
        small chunks (the next one to whichever helper answers first); None where a chunk failed
        (the caller computes those)."""
        out: list[Any] = [None] * len(items)
        try:
            self._start()
        except WorkerError as e:
            self._give_up(str(e))
            return out
        size = max(2, -(-len(items) // (CHUNKS_PER_HELPER * len(self.helpers))))
        todo = [list(range(i, min(i + size, len(items)))) for i in range(0, len(items), size)]
        busy: dict[Any, tuple[WorkerProcess, list[int]]] = {}  # by connection
        spec = (task.workload.name, task.workload.args, str(task.target))

        def give(helper: WorkerProcess) -> None:
            if todo:
                chunk = todo.pop(0)
                helper.send((kind, [module], spec, [items[i] for i in chunk]))
                busy[helper.conn] = (helper, chunk)

        try:
            for helper in self.helpers:
                give(helper)
            while busy:
                limit = 30.0 + SECONDS_PER_PROGRAM * size
                ready = wait(list(busy), timeout=limit)
                if not ready:
                    self._give_up(f"a helper gave no answer within {limit:g} s")
                    return out
                for conn in ready:
                    helper, chunk = busy.pop(conn)
                    answer, payload = helper.conn.recv()
                    if answer == "done" and len(payload) == len(chunk):
                        for i, got in zip(chunk, payload, strict=True):
                            out[i] = got
                    give(helper)
        except (EOFError, OSError):
            self._give_up("a helper died")
        return out


_POOL: _Pool | None = None
_POOL_LOCK = threading.Lock()


_SESSIONS = 0  # tuning runs under way (helpers serve batches only inside one)

_F = TypeVar("_F", bound=Callable[..., Any])


@contextmanager
def session() -> Iterator[None]:
    """Inside: large batches may go to helpers (started at the first one). The last session to
    end stops them, so nothing outlives a tuning run."""
    global _SESSIONS
    with _POOL_LOCK:
        _SESSIONS += 1
    try:
        yield
    finally:
        with _POOL_LOCK:
            _SESSIONS -= 1
            last = _SESSIONS == 0
        if last:
            shutdown()


def in_session(func: _F) -> _F:
    """Decorator: ``func`` runs inside a :func:`session` (``asc.tune``, ``asc.tune_network``)."""

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        with session():
            return func(*args, **kwargs)

    return run  # type: ignore[return-value]


def _pool() -> _Pool | None:
    global _POOL
    with _POOL_LOCK:
        if _SESSIONS == 0:
            return None
        if _POOL is None:
            _POOL = _Pool(workers())
            atexit.register(_POOL.close)
        return None if _POOL.broken or _POOL.count == 0 else _POOL


def shutdown() -> None:
    """Stop the helper processes; the next large batch starts them again (reading
    ``AUTOSCHED_FEATURE_WORKERS`` again)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is not None:
            with _POOL.lock:
                _POOL.close()
            _POOL = None


def fill(programs: Sequence[MeasureInput]) -> None:
    """Put the features of ``programs`` that are not cached yet into the feature cache, on
    several cores when there are at least :data:`MIN_BATCH` of one task and helpers are enabled.
    Smaller batches, and programs the helpers cannot take, are left to the caller."""
    by_task: dict[tuple[str, str], tuple[Task, dict[tuple[Step, ...], None]]] = {}
    for p in programs:
        steps = tuple(p.steps)
        if not FEATURE_CACHE.has(feature_key(p.task, steps)):
            by_task.setdefault(p.task.key, (p.task, {}))[1][steps] = None
    for task, new in by_task.values():
        module = _module(task)
        if len(new) < MIN_BATCH or module is None:
            continue
        pool = _pool()
        if pool is None or not pool.lock.acquire(blocking=False):  # another thread uses the helpers
            return
        try:
            batch = list(new)
            for s, feats in zip(batch, pool.run("features", module, task, batch), strict=True):
                if feats is not None:
                    remember(task, s, feats)
        finally:
            pool.lock.release()


def sketch_steps(
    task: Task, points: Sequence[tuple[int, dict[str, Any]]]
) -> list[tuple[Step, ...] | None] | None:
    """The steps of sketch programs ``points`` ((sketch index, annotation JSON) of ``task``'s
    sketch space), made by the helpers, which also put each one's features in the feature cache;
    None for a point a helper could not make (the caller makes it, or finds it is no program).
    None for the whole batch where helpers do not serve it (see :func:`fill`)."""
    module = _module(task)
    if len(points) < MIN_BATCH or module is None:
        return None
    pool = _pool()
    if pool is None or not pool.lock.acquire(blocking=False):
        return None
    try:
        made = pool.run("sketch", module, task, list(points))
    finally:
        pool.lock.release()
    out: list[tuple[Step, ...] | None] = []
    for got in made:
        if got is None:
            out.append(None)
        else:
            steps, feats = got
            remember(task, steps, feats)
            out.append(steps)
    return out
