"""LocalBuilder: compile a batch of candidates in parallel, in a pool of spawned processes.

Sources are generated (schedule replay, lowering, emission) in the calling process, so user
workloads registered in ``__main__`` or a test module work; only source text and the target string
cross into the pool. Libraries land in the content-addressed cache of :func:`compile_shared`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from functools import cache
from multiprocessing import get_context
from pathlib import Path

from ..target import Target
from .compile import BuildTimeout, CompileError, CompilerNotFound, compile_shared, default_cache_dir
from .measure import BuildResult, Closing, MeasureErrorNo, MeasureInput


@dataclass(frozen=True, slots=True)
class _Compiled:
    """What one compilation in the pool gives back (exceptions do not all pickle)."""

    lib_path: str | None
    error_no: MeasureErrorNo
    error_msg: str
    seconds: float
    compiler_missing: bool = False


@cache
def _target(text: str) -> Target:
    return Target.parse(text)


def _compile(source: str, target: str, timeout: float, cache_dir: str) -> _Compiled:
    """Compile one source (runs in a pool process)."""
    start = time.perf_counter()

    def failed(kind: MeasureErrorNo, error: BaseException, missing: bool = False) -> _Compiled:
        message = str(error) if kind != MeasureErrorNo.UNKNOWN_ERROR else f"{type(error).__name__}: {error}"
        return _Compiled(None, kind, message, time.perf_counter() - start, missing)

    try:
        lib = compile_shared(source, _target(target), timeout=timeout, cache_dir=Path(cache_dir))
    except CompilerNotFound as e:
        return failed(MeasureErrorNo.UNKNOWN_ERROR, e, missing=True)
    except CompileError as e:
        return failed(MeasureErrorNo.COMPILE_ERROR, e)
    except BuildTimeout as e:
        return failed(MeasureErrorNo.BUILD_TIMEOUT, e)
    except Exception as e:  # anything else costs this candidate only
        return failed(MeasureErrorNo.UNKNOWN_ERROR, e)
    return _Compiled(str(lib), MeasureErrorNo.NO_ERROR, "", time.perf_counter() - start)


class LocalBuilder(Closing):
    """Builds candidates for C targets on this machine (the :class:`Builder` protocol).

    ``n_parallel`` compiler processes (default: one per core) build each batch, each compile
    limited to ``timeout`` seconds, into ``cache_dir`` (default: :func:`default_cache_dir`).
    Identical sources in a batch are compiled once. The pool is started on the first batch and
    reused; :meth:`close` (or leaving a ``with`` block) shuts it down.

    A missing compiler raises :class:`CompilerNotFound` (it would fail every candidate); every other
    failure is a :class:`BuildResult` with its error kind and message.
    """

    def __init__(
        self, n_parallel: int | None = None, timeout: float = 60.0, cache_dir: Path | None = None
    ) -> None:
        self.n_parallel = n_parallel or len(os.sched_getaffinity(0))
        self.timeout = timeout
        self.cache_dir = cache_dir
        self._pool: ProcessPoolExecutor | None = None
        self.emit_time = 0.0  # seconds spent lowering and emitting (in this process), all batches

    def close(self) -> None:
        """Shut the compiler pool down (a later batch starts a new one)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.n_parallel, mp_context=get_context("spawn"))
        return self._pool

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        """Build every candidate of ``inputs``; one :class:`BuildResult` per input, in order."""
        cache_dir = str(self.cache_dir if self.cache_dir is not None else default_cache_dir())
        results: list[BuildResult] = []
        jobs: dict[tuple[str, str], list[tuple[int, float]]] = {}  # (source, target) -> [(index, seconds)]
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
            self.emit_time += seconds
            jobs.setdefault((source, str(task.target)), []).append((i, seconds))
        for users, done in zip(jobs.values(), self._compile_all(list(jobs), cache_dir), strict=True):
            if done.compiler_missing:
                raise CompilerNotFound(done.error_msg)
            for i, seconds in users:
                results[i] = replace(
                    results[i],
                    lib_path=done.lib_path,
                    error_no=done.error_no,
                    error_msg=done.error_msg,
                    time_cost=seconds + done.seconds,
                )
        return results

    def _compile_all(self, jobs: list[tuple[str, str]], cache_dir: str) -> list[_Compiled]:
        """Compile the (source, target) pairs in the pool; a pool that broke is replaced."""
        if not jobs:
            return []
        pool = self._executor()
        futures = [pool.submit(_compile, src, tgt, self.timeout, cache_dir) for src, tgt in jobs]
        out = []
        broken = False
        for future in futures:
            try:
                out.append(future.result())
            except Exception as e:  # the pool process died (killed, out of memory)
                broken |= isinstance(e, BrokenProcessPool)
                message = f"build process failed: {type(e).__name__}: {e}"
                out.append(_Compiled(None, MeasureErrorNo.UNKNOWN_ERROR, message, 0.0))
        if broken:
            self._pool = None
            pool.shutdown(wait=False, cancel_futures=True)
        return out
