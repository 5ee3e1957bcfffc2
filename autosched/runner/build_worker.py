"""The build worker: a fresh interpreter that runs the compiler for :class:`LocalBuilder`.

It is started by :class:`~autosched.runner.process.WorkerProcess` and fed over a socket (each
message a tuple, the first item its kind):

- parent ``("compile", job, source, target, timeout, cache_dir, n_parallel, code)``: compile one
  source (linked with the user C ``code`` it calls) into the kernel cache, in a pool of
  ``n_parallel`` threads (the compilers run in parallel processes). Answer
  ``("done", job, Compiled)``, in completion order.
- parent ``("stop",)`` or a closed socket: stop every running compiler and exit.

If the parent dies, running compilers (and their cc1/as/ld children) are killed and their
temporary files removed before the worker exits.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from multiprocessing.connection import Connection
from pathlib import Path

from ..target import Target
from ..te.ccode import NO_CODE, CCode
from .cache_trust import CacheUntrusted
from .compile import (
    BuildTimeout,
    CacheUnusable,
    CompileError,
    CompilerNotFound,
    compile_shared,
    kill_running_compiles,
)
from .measure import MeasureErrorNo
from .process import on_parent_exit


@dataclass(frozen=True, slots=True)
class Compiled:
    """What one compilation gives back (exceptions do not all pickle)."""

    lib_path: str | None
    error_no: MeasureErrorNo
    error_msg: str
    seconds: float
    infrastructure: str = ""  # the machine failed, not the program: CompilerNotFound, CacheUnusable, ...


@cache
def _target(text: str) -> Target:
    return Target.parse(text)


def compile_one(source: str, target: str, timeout: float, cache_dir: str, code: CCode = NO_CODE) -> Compiled:
    """Compile one source; every failure becomes a :class:`Compiled` with its error kind."""
    start = time.perf_counter()

    def failed(kind: MeasureErrorNo, error: BaseException, infrastructure: str = "") -> Compiled:
        unknown = kind == MeasureErrorNo.UNKNOWN_ERROR and not infrastructure
        message = f"{type(error).__name__}: {error}" if unknown else str(error)
        return Compiled(None, kind, message, time.perf_counter() - start, infrastructure)

    try:
        lib = compile_shared(source, _target(target), timeout=timeout, cache_dir=Path(cache_dir), code=code)
    except (CompilerNotFound, CacheUnusable, CacheUntrusted) as e:
        return failed(MeasureErrorNo.UNKNOWN_ERROR, e, infrastructure=type(e).__name__)
    except CompileError as e:
        return failed(MeasureErrorNo.COMPILE_ERROR, e)
    except BuildTimeout as e:
        return failed(MeasureErrorNo.BUILD_TIMEOUT, e)
    except Exception as e:  # anything else costs this candidate only
        return failed(MeasureErrorNo.UNKNOWN_ERROR, e)
    return Compiled(str(lib), MeasureErrorNo.NO_ERROR, "", time.perf_counter() - start)


class _Jobs:
    """The compilations in flight; waits for them to end when the worker stops."""

    def __init__(self) -> None:
        self.count = 0
        self.idle = threading.Condition()

    def started(self) -> None:
        with self.idle:
            self.count += 1

    def ended(self) -> None:
        with self.idle:
            self.count -= 1
            self.idle.notify_all()

    def stop(self, wait: float = 5.0) -> None:
        """Kill every running compiler; wait (bounded) until their jobs removed their temporary files."""
        kill_running_compiles()
        with self.idle:
            self.idle.wait_for(lambda: self.count == 0, timeout=wait)


def serve(conn: Connection) -> None:
    """The worker's main loop."""
    jobs = _Jobs()
    on_parent_exit(jobs.stop)
    send_lock = threading.Lock()
    pool: ThreadPoolExecutor | None = None

    def run(job: int, source: str, target: str, timeout: float, cache_dir: str, code: CCode) -> None:
        try:
            done = compile_one(source, target, timeout, cache_dir, code)
            with send_lock:
                conn.send(("done", job, done))
        except OSError:  # the parent is gone: the watcher ends the process
            pass
        finally:
            jobs.ended()

    conn.send(("ready",))
    try:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                return
            if message[0] != "compile":
                return
            _, job, source, target, timeout, cache_dir, n_parallel, code = message
            if pool is None:
                pool = ThreadPoolExecutor(max(1, int(n_parallel)), thread_name_prefix="compile")
            jobs.started()
            pool.submit(run, job, source, target, timeout, cache_dir, code)
    finally:
        jobs.stop()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
