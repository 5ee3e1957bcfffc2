"""The builder and the runner of a Dask cluster (the :class:`Builder` / :class:`Runner` protocols).

:class:`DaskBuilder` emits sources here, looks each library up in this machine's kernel cache
first, and sends the others to the cluster as data (source, target, user C code); the libraries
come back as bytes into the local cache, compile errors as results. :class:`DaskRunner` sends each
built library's bytes to a measuring worker with the task's inputs and reference outputs (over
1 MiB: one cluster value per task, scattered once to the measuring workers) and yields results as they
complete, so several devices measure a batch in parallel (:mod:`.boards`: on SSH boards). A
worker lost in the middle of a task costs nothing: Dask runs the task again elsewhere.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..boards.program import main_source
from ..database.machine import fingerprint_for
from ..runner.build_worker import Compiled
from ..runner.builder import Job, emit_sources, with_libraries
from ..runner.cache_trust import State, private_folder, verify
from ..runner.compile import (
    BuildError,
    CacheUnusable,
    compiler_version,
    default_cache_dir,
    executable_name,
    shared_library_name,
)
from ..runner.local_runner import task_data
from ..runner.measure import BuildResult, Closing, MeasureErrorNo, MeasureInput, MeasureOption, MeasureResult
from ..target import Target
from ..task import Task
from .connection import DaskCluster, Workers, build_placement, measure_placement
from .work import (
    Artifact,
    Measurement,
    build_executable_on_worker,
    build_on_worker,
    installed_compiler,
    measure_on_worker,
    store,
)

#: a batch's distinct compilations and the (index, seconds spent emitting) of the candidates of each
_Jobs = dict[Job, list[tuple[int, float]]]


def data_key(task: Task, seed: int) -> str:
    """The name of ``task``'s inputs and reference outputs (drawn with ``seed``) on the cluster; its
    first 8 characters also name the task's measurements (``asc-measure-KEY8-...``)."""
    return hashlib.sha256(f"{task.workload_key}|{task.target}|{seed}".encode()).hexdigest()[:24]


class DaskBuilder(Closing):
    """Builds C candidates on a Dask cluster, ``timeout`` seconds per compile, into ``cache_dir``
    here (default: :func:`~autosched.runner.compile.default_cache_dir`). ``executable``: static
    executables for SSH boards (each source with its board ``main``, gzip-compressed, under
    ``boards/`` of the cache) instead of shared libraries."""

    def __init__(
        self, cluster: DaskCluster, timeout: float = 60.0, cache_dir: Path | None = None,
        executable: bool = False,
    ) -> None:
        self.cluster, self.timeout, self.cache_dir, self.executable = cluster, timeout, cache_dir, executable
        self.emit_time = 0.0  # seconds spent lowering and emitting (in this process), all batches
        self.remote_builds = 0  # compilations sent to the cluster (the others were in the cache)

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        """Build every candidate of ``inputs``; one :class:`BuildResult` per input, in order."""
        cache = self.cache_dir if self.cache_dir is not None else default_cache_dir()
        results, jobs, seconds = emit_sources(inputs)
        self.emit_time += seconds
        compile_on_worker = build_on_worker
        if self.executable:
            cache, compile_on_worker = cache / "boards", build_executable_on_worker
            jobs = _with_main(results, jobs)
        try:
            private_folder(cache)  # libraries are taken from it only if no one else may write it
        except OSError as e:
            raise CacheUnusable.at(cache, e.strerror or e) from None
        done: dict[int, Compiled] = {}
        futures: dict[Any, int] = {}
        where, able = build_placement(self.cluster.workers())
        for i, job in enumerate(jobs):
            cached = self._cached(cache, job)
            if cached is not None:
                done[i] = Compiled(str(cached), MeasureErrorNo.NO_ERROR, "", 0.0)
                continue
            source, target, code = job
            futures[self.cluster.submit(compile_on_worker, source, target, self.timeout, code,
                                        prefix="asc-build", **where)] = i
        self.remote_builds += len(futures)
        art: Artifact
        for future, art in self.cluster.completed(futures, able, "build", start=""):
            path = None
            if art.name is not None and art.blob is not None:
                path = str(store(cache, art.name, art.blob))
            outcome = Compiled(path, art.error_no, art.error_msg, art.seconds, art.infrastructure)
            done[futures[future]] = outcome
        return with_libraries(results, jobs, [done[i] for i in range(len(jobs))])

    def compiler_version(self, cc: str) -> str:
        """The ``--version`` output of compiler ``cc`` on the cluster's build workers (records name
        the compiler that built them; the tuning machine needs no cross compiler), else here."""
        workers = self.cluster.workers()
        where = build_placement(workers)[0]
        needs, listed = where.get("resources", {}), where.get("workers", list(workers))
        chosen = [a for a, r in workers.items() if a in listed and all(k in r for k in needs)]
        found = self.cluster.client.run(installed_compiler, cc, workers=chosen) if chosen else {}
        versions = sorted(v for v in found.values() if v.strip())
        return versions[0] if versions else compiler_version(cc)

    def _cached(self, cache: Path, job: Job) -> Path | None:
        """The library (executable) of ``job`` in this machine's kernel cache, if it is there."""
        source, target, code = job
        try:
            if self.executable:
                path = cache / (executable_name(source, Target.parse(target), code) + ".gz")
            else:
                path = cache / shared_library_name(source, Target.parse(target), code)
        except BuildError:  # no compiler here (a cross target): only the cluster can tell
            return None
        return path if verify(path) == State.OK else None  # else built again: see cache_trust


def _with_main(results: list[BuildResult], jobs: _Jobs) -> _Jobs:
    """``jobs`` with each source followed by the board ``main`` of its kernel (an executable)."""
    out: _Jobs = {}
    for (source, target, code), users in jobs.items():
        kernel = results[users[0][0]]  # one source, one kernel: its users share name and arguments
        out[(source + main_source(kernel.func_name, kernel.arg_specs), target, code)] = users
    return out


#: task data up to this size travels inside each measurement task (Dask keeps it with the task, so
#: a measuring worker that dies loses nothing and the task reruns elsewhere); larger data is
#: scattered once to the measuring workers (Dask warns about task graphs over 10 MB)
SCATTER_BYTES = 1 << 20


class DaskRunner(Closing):
    """Checks and times built candidates of target kind ``kind`` on the cluster's measuring
    workers, with ``option`` (its ``run_timeout`` applies on the worker) and inputs drawn with
    ``seed``. Each task's data (inputs, reference outputs) goes to the measuring workers once."""

    #: what runs a measurement on a worker
    measure_task = staticmethod(measure_on_worker)

    def __init__(
        self, cluster: DaskCluster, option: MeasureOption, kind: str = "c", seed: int = 0,
        target: str | None = None,
    ) -> None:
        self.cluster, self.option, self.kind, self.seed, self.target = cluster, option, kind, seed, target
        self._data: dict[str, tuple[str, Any]] = {}  # data key -> (key, the cluster value of the data)
        self._machine = ""
        self.what, self.start = f"measure {kind} programs", "--device local"  # for a stop's message

    def placements(self, workers: Workers) -> tuple[list[dict[str, Any]], Callable[[Workers], bool]]:
        """The submit keywords measurements cycle through, and whether a cluster can measure."""
        where, able = measure_placement(workers, self.kind)
        return [where], able

    def fingerprints(self, chosen: list[str]) -> set[str]:
        """The machine fingerprints of the measuring workers ``chosen`` (addresses)."""
        return set(self.cluster.client.run(fingerprint_for, self.target, workers=chosen).values())

    def _measuring(self, workers: Workers) -> list[str]:
        wheres = self.placements(workers)[0]
        return [a for a, r in workers.items()
                if any(all(k in r for k in w.get("resources", {})) for w in wheres)]  # fmt: skip

    @property
    def machine(self) -> str:
        """The fingerprint of the machine the measuring workers are, for ``target`` ("" without a
        target or while no measuring worker is there: records then name this machine). Measuring
        workers on different machines are refused: one log's records name one machine."""
        if self._machine or self.target is None:
            return self._machine
        chosen = self._measuring(self.cluster.workers())
        if not chosen:
            return ""
        prints = sorted(self.fingerprints(chosen))
        if len(prints) > 1:
            raise ValueError(
                f"the measuring workers are {len(prints)} different machines ({', '.join(prints)}): "
                "tune on a cluster of alike devices, or give each kind its own scheduler"
            )
        self._machine = prints[0]
        return self._machine

    def close(self) -> None:
        """Drop the task data held on the cluster."""
        self._data.clear()

    def devices(self) -> int:
        """How many devices measure this runner's programs at the same time: its measuring workers
        now (at least 1: with none, measurements wait for one to join)."""
        return max(1, len(self._measuring(self.cluster.workers())))

    def _task_data(self, inp: MeasureInput, workers: Workers) -> tuple[str, Any]:
        key = data_key(inp.task, self.seed)
        if key not in self._data:
            value = task_data(inp.task, self.seed, self.option.check)
            inputs, expected = value
            size = sum(a.nbytes for a in (*inputs, *(expected or ())))
            shared = self.cluster.scatter(value, self._measuring(workers)) if size > SCATTER_BYTES else value
            self._data[key] = (key, shared)
        return self._data[key]

    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]:
        """Check and time each built candidate; one :class:`MeasureResult` per input, in order."""
        results = dict(self.run_each(inputs, builds))
        return [results[j] for j in range(len(inputs))]

    def run_each(
        self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]
    ) -> Iterator[tuple[int, MeasureResult]]:
        """(index, result) of each candidate as its measurement completes."""
        if len(inputs) != len(builds):
            raise ValueError(f"{len(inputs)} inputs but {len(builds)} build results")
        workers = self.cluster.workers()
        wheres, able = self.placements(workers)
        futures: dict[Any, int] = {}
        failed: list[tuple[int, MeasureResult]] = []
        for j, (inp, build) in enumerate(zip(inputs, builds, strict=True)):
            if build.error_no != MeasureErrorNo.NO_ERROR or build.lib_path is None:
                error_no = build.error_no or MeasureErrorNo.UNKNOWN_ERROR
                message = build.error_msg or "the build gave no library"
                failed.append((j, MeasureResult((), error_no, message, build.time_cost, time.time())))
                continue
            key, data = self._task_data(inp, workers)
            lib = Path(build.lib_path)
            specs = tuple(build.arg_specs)
            job = Measurement(key, lib.name, lib.read_bytes(), build.func_name, specs, self.option)
            where = wheres[len(futures) % len(wheres)]
            prefix = f"asc-measure-{key[:8]}"  # which task a measurement is for, in the task stream
            futures[self.cluster.submit(self.measure_task, data, job, prefix=prefix, **where)] = j
        yield from failed
        for future, value in self.cluster.completed(futures, able, self.what, self.start):
            error_no, message, costs, seconds = value
            j = futures[future]
            all_cost = builds[j].time_cost + seconds
            yield j, MeasureResult(tuple(costs), MeasureErrorNo(error_no), message, all_cost, time.time())
