"""What runs on a Dask worker: compile a source, measure a built kernel.

All take and give plain data. :func:`build_on_worker` compiles into the worker's own kernel cache
(``AUTOSCHED_CACHE`` there) and hands back the library's file name and bytes, or the compile error
(:func:`build_executable_on_worker`: a board's static executable, see :mod:`.board_work`);
:func:`measure_on_worker` stores the bytes it is given in that cache and checks and times the kernel
in an isolated measurement process (:class:`~autosched.runner.LocalRunner`, so a crashing kernel
costs its trial, never the worker), one measurement at a time per worker process.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..boards.program import gzipped
from ..runner.build_worker import compile_one
from ..runner.cache_trust import State, private_folder, record, say_changed, sha256_of, verify
from ..runner.compile import (
    BuildTimeout,
    CompileError,
    CompilerNotFound,
    compile_executable,
    compiler_version,
    default_cache_dir,
)
from ..runner.kernel import ArgSpec
from ..runner.local_runner import LocalRunner
from ..runner.measure import MeasureErrorNo, MeasureOption
from ..target import Target
from ..te.ccode import NO_CODE, CCode

#: what an artifact's file name may be: a cache key and a suffix, nothing that leaves the folder
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}")

#: a task's data as measurements get it: its inputs and (when outputs are checked) the expected outputs
TaskValue = tuple[list[np.ndarray], list[np.ndarray] | None]


@dataclass(frozen=True, slots=True)
class Artifact:
    """A build done on a worker: the library's file name and bytes, or the error."""

    name: str | None
    blob: bytes | None
    error_no: MeasureErrorNo
    error_msg: str
    seconds: float
    infrastructure: str = ""  # the worker's machine failed (no compiler, no cache), not the program


@dataclass(frozen=True, slots=True)
class Measurement:
    """One measurement for a worker (the task data travels beside it, as a cluster value): the
    data's key (its name in the measurement process or on the board), the built file's name and
    bytes, the kernel's name and arguments, and how to time it."""

    key: str
    name: str
    blob: bytes
    func_name: str
    specs: tuple[ArgSpec, ...]
    option: MeasureOption


def store(folder: Path, name: str, blob: bytes) -> Path:
    """``folder/name`` holding ``blob`` with the record of its sha256, written atomically unless it
    is there already and matches its record (built or stored here by autosched). ``folder`` is a
    kernel cache folder: made private if missing, refused
    (:class:`~autosched.runner.cache_trust.CacheUntrusted`) if others may write to it; a file there
    with no record is replaced, one that changed since it was recorded too, with a warning."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"not an artifact file name: {name!r}")
    private_folder(folder)
    path = folder / name
    state = verify(path)
    if state == State.OK:
        return path
    if state == State.CHANGED:
        say_changed(path)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        record(path, sha256_of(blob))
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return path


def build_on_worker(source: str, target: str, timeout: float, code: CCode = NO_CODE) -> Artifact:
    """Compile ``source`` for ``target`` here; the library's name and bytes, or why not."""
    done = compile_one(source, target, timeout, str(default_cache_dir()), code)
    if done.lib_path is None:
        return Artifact(None, None, done.error_no, done.error_msg, done.seconds, done.infrastructure)
    path = Path(done.lib_path)
    return Artifact(path.name, path.read_bytes(), done.error_no, "", done.seconds)


def installed_compiler(cc: str) -> str:
    """The ``--version`` output of compiler ``cc`` on this worker, "" if it has none."""
    try:
        return compiler_version(cc)
    except CompilerNotFound:
        return ""


def build_executable_on_worker(source: str, target: str, timeout: float, code: CCode = NO_CODE) -> Artifact:
    """Build ``source`` (with its board ``main``) into a static executable for ``target`` here,
    gzip-compressed, as a board takes it; its name and bytes, or why not. A build worker without
    the target's (cross) compiler gives a compile error naming the worker and what to install."""
    start = time.perf_counter()
    failed = MeasureErrorNo.COMPILE_ERROR
    try:
        exe = gzipped(compile_executable(source, Target.parse(target), timeout=timeout,
                                         cache_dir=default_cache_dir() / "boards", code=code))
    except CompilerNotFound as e:
        message = f"build worker {socket.gethostname()}: {e}"
    except CompileError as e:
        message = str(e)
    except BuildTimeout as e:
        failed, message = MeasureErrorNo.BUILD_TIMEOUT, str(e)
    else:
        return Artifact(exe.name, exe.read_bytes(), MeasureErrorNo.NO_ERROR, "", time.perf_counter() - start)
    return Artifact(None, None, failed, message, time.perf_counter() - start)


def _lift_nanny_limits() -> None:
    """Undo the thread limits a Dask nanny sets for its worker (``OMP_NUM_THREADS=1`` and the
    like), so that measured kernels run as they would in a plain shell: with ``OMP_NUM_THREADS=1``,
    libgomp starts a kernel's threads anew on every call (measured 10x slower)."""
    try:
        import dask.config
    except ImportError:  # not on a Dask worker
        return
    limits = dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {}
    for name, value in limits.items():
        if name != "MALLOC_TRIM_THRESHOLD_" and os.environ.get(name) == str(value):
            del os.environ[name]


_measuring = threading.Lock()
_runners: dict[MeasureOption, LocalRunner] = {}


def measure_on_worker(data: TaskValue, job: Measurement) -> tuple[int, str, tuple[float, ...], float]:
    """Check and time the kernel of ``job`` (a shared library) on the task data ``data``: (error
    kind, message, costs, seconds it took here)."""
    with _measuring:
        start = time.perf_counter()
        path = store(default_cache_dir(), job.name, job.blob)
        option = job.option
        runner = _runners.get(option)
        if runner is None:
            _lift_nanny_limits()  # the measurement process inherits this environment
            for old in _runners.values():
                old.close()
            _runners.clear()
            runner = _runners[option] = LocalRunner(option)
        error_no, message, costs = runner.measure_file(job.key, data, str(path), job.func_name, job.specs)
        return int(error_no), message, costs, time.perf_counter() - start
