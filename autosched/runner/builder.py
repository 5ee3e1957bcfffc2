"""LocalBuilder: compile a batch of candidates in parallel, in a separate build worker.

Sources are generated (schedule replay, lowering, emission) in the calling process, so user
workloads registered in ``__main__``, a notebook cell or a test module work; only source text and
the target string reach the worker (:mod:`autosched.runner.build_worker`), a fresh interpreter that
runs the compilers and never imports the caller's main module. Libraries land in the
content-addressed cache of :func:`compile_shared`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ..te.ccode import CCode
from .build_worker import Compiled
from .cache_trust import CacheUntrusted
from .compile import CacheUnusable, CompilerNotFound, default_cache_dir
from .errors import InfrastructureError
from .measure import BuildResult, Closing, MeasureErrorNo, MeasureInput
from .process import WorkerError, WorkerProcess

_INFRASTRUCTURE: dict[str, type[InfrastructureError]] = {
    "CompilerNotFound": CompilerNotFound,
    "CacheUnusable": CacheUnusable,
    "CacheUntrusted": CacheUntrusted,
}

#: seconds a whole batch may wait for the worker beyond its compile timeouts
_SLACK = 60.0


#: one compilation: (source, target string, user C code)
Job = tuple[str, str, CCode]


def emit_sources(
    inputs: Sequence[MeasureInput],
) -> tuple[list[BuildResult], dict[Job, list[tuple[int, float]]], float]:
    """Generate every candidate's source (in this process): the results so far (an
    ``INSTANTIATION_ERROR`` for steps that do not lower or emit, else no library yet), the distinct
    compilations with the (index, seconds spent emitting) of the candidates that need each, and the
    seconds spent emitting in all."""
    results: list[BuildResult] = []
    jobs: dict[Job, list[tuple[int, float]]] = {}
    emitted = 0.0
    for i, inp in enumerate(inputs):
        start = time.perf_counter()
        task = inp.task
        try:
            specs = tuple(task.arg_specs())
            source = task.source(inp.steps)
        except Exception as e:  # illegal steps, or a lowering/emission failure
            kind, message = MeasureErrorNo.INSTANTIATION_ERROR, f"{type(e).__name__}: {e}"
            seconds = time.perf_counter() - start
            results.append(BuildResult(None, task.func_name, (), kind, message, seconds))
            continue
        results.append(BuildResult(None, task.func_name, specs))
        seconds = time.perf_counter() - start
        emitted += seconds
        jobs.setdefault((source, str(task.target), task.code), []).append((i, seconds))
    return results, jobs, emitted


def with_libraries(
    results: list[BuildResult], jobs: dict[Job, list[tuple[int, float]]], compiled: Sequence[Compiled]
) -> list[BuildResult]:
    """``results`` completed with the outcome of each job (``compiled``, in the order of ``jobs``);
    a failure of the machine rather than the program raises its
    :class:`~autosched.runner.errors.InfrastructureError`."""
    for users, done in zip(jobs.values(), compiled, strict=True):
        if done.infrastructure:
            raise _INFRASTRUCTURE.get(done.infrastructure, InfrastructureError)(done.error_msg)
        for i, seconds in users:
            results[i] = replace(
                results[i],
                lib_path=done.lib_path,
                error_no=done.error_no,
                error_msg=done.error_msg,
                time_cost=seconds + done.seconds,
            )
    return results


class LocalBuilder(Closing):
    """Builds candidates for C targets on this machine (the :class:`Builder` protocol).

    ``n_parallel`` compilers (default: one per core) build each batch, each compile limited to
    ``timeout`` seconds, into ``cache_dir`` (default: :func:`default_cache_dir`). Identical sources
    in a batch are compiled once. The build worker is started on the first batch and reused;
    :meth:`close` (or leaving a ``with`` block) stops it.

    Failures of the machine rather than the program (a missing compiler, an unwritable cache, a
    build worker that cannot start or dies twice in a batch) raise an
    :class:`~autosched.runner.errors.InfrastructureError`; every other failure is a
    :class:`BuildResult` with its error kind and message.
    """

    def __init__(
        self, n_parallel: int | None = None, timeout: float = 60.0, cache_dir: Path | None = None
    ) -> None:
        self.n_parallel = n_parallel or len(os.sched_getaffinity(0))
        self.timeout = timeout
        self.cache_dir = cache_dir
        self._worker: WorkerProcess | None = None
        self.emit_time = 0.0  # seconds spent lowering and emitting (in this process), all batches

    def close(self) -> None:
        """Stop the build worker (a later batch starts a new one)."""
        if self._worker is not None:
            self._worker.stop()
            self._worker = None

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        """Build every candidate of ``inputs``; one :class:`BuildResult` per input, in order."""
        cache_dir = str(self.cache_dir if self.cache_dir is not None else default_cache_dir())
        results, jobs, seconds = emit_sources(inputs)
        self.emit_time += seconds
        return with_libraries(results, jobs, self._compile_all(list(jobs), cache_dir))

    def _compile_all(self, jobs: list[Job], cache_dir: str) -> list[Compiled]:
        """Compile the (source, target) pairs in the worker; a worker that died is replaced once."""
        done: dict[int, Compiled] = {}
        for attempt in range(2):
            try:
                self._compile_in_worker(jobs, cache_dir, done)
                break
            except WorkerError:
                self.close()
                if attempt:
                    raise
        return [done[i] for i in range(len(jobs))]

    def _compile_in_worker(
        self, jobs: list[Job], cache_dir: str, done: dict[int, Compiled]
    ) -> None:
        """Send the jobs not yet in ``done`` and collect their answers into ``done``."""
        todo = [i for i in range(len(jobs)) if i not in done]
        if not todo:
            return
        if self._worker is None or not self._worker.alive():
            self._worker = WorkerProcess("autosched.runner.build_worker", "build")
        worker = self._worker
        try:
            for i in todo:
                source, target, code = jobs[i]
                worker.send(("compile", i, source, target, self.timeout, cache_dir, self.n_parallel, code))
        except OSError:
            raise WorkerError(f"the build worker died: {worker.death()}") from None
        rounds = -(-len(todo) // self.n_parallel)
        limit = rounds * self.timeout + _SLACK
        deadline = time.monotonic() + limit
        while any(i not in done for i in todo):
            left = deadline - time.monotonic()
            if left <= 0 or not worker.conn.poll(left):
                raise WorkerError(f"the build worker gave no answer within {limit:g} s")
            try:
                _, i, compiled = worker.conn.recv()
            except (EOFError, OSError):
                raise WorkerError(f"the build worker died: {worker.death()}") from None
            done[i] = compiled
