"""The builder and the runner of a Dask cluster (the :class:`Builder` / :class:`Runner` protocols).

:class:`DaskBuilder` emits sources here, looks each library up in this machine's kernel cache
first, and sends the others to the cluster as data (source, target, user C code); the libraries
come back as bytes into the local cache, compile errors as results. :class:`DaskRunner` sends each
built library's bytes to a measuring worker with the task's inputs and reference outputs (one
cluster value per task) and yields results as they complete, so several devices measure a batch
in parallel. A worker lost in the middle of a task costs nothing: Dask runs the task again elsewhere.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..database.machine import fingerprint_for
from ..runner.build_worker import Compiled
from ..runner.builder import Job, emit_sources, with_libraries
from ..runner.compile import BuildError, default_cache_dir, shared_library_name
from ..runner.local_runner import task_data
from ..runner.measure import BuildResult, Closing, MeasureErrorNo, MeasureInput, MeasureOption, MeasureResult
from ..target import Target
from ..task import Task
from .connection import DaskCluster, build_placement, measure_placement
from .work import Artifact, build_on_worker, hold, measure_on_worker, store


def data_key(task: Task, seed: int) -> str:
    """The name of ``task``'s inputs and reference outputs (drawn with ``seed``) on the cluster; its
    first 8 characters also name the task's measurements (``asc-measure-KEY8-...``)."""
    return hashlib.sha256(f"{task.workload_key}|{task.target}|{seed}".encode()).hexdigest()[:24]


class DaskBuilder(Closing):
    """Builds C candidates on a Dask cluster, ``timeout`` seconds per compile, into ``cache_dir``
    here (default: :func:`~autosched.runner.compile.default_cache_dir`)."""

    def __init__(self, cluster: DaskCluster, timeout: float = 60.0, cache_dir: Path | None = None) -> None:
        self.cluster, self.timeout, self.cache_dir = cluster, timeout, cache_dir
        self.emit_time = 0.0  # seconds spent lowering and emitting (in this process), all batches
        self.remote_builds = 0  # compilations sent to the cluster (the others were in the cache)

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        """Build every candidate of ``inputs``; one :class:`BuildResult` per input, in order."""
        cache = self.cache_dir if self.cache_dir is not None else default_cache_dir()
        results, jobs, seconds = emit_sources(inputs)
        self.emit_time += seconds
        done: dict[int, Compiled] = {}
        futures: dict[Any, int] = {}
        where, able = build_placement(self.cluster.workers())
        for i, job in enumerate(jobs):
            cached = self._cached(cache, job)
            if cached is not None:
                done[i] = Compiled(str(cached), MeasureErrorNo.NO_ERROR, "", 0.0)
                continue
            source, target, code = job
            futures[self.cluster.submit(build_on_worker, source, target, self.timeout, code,
                                        prefix="asc-build", **where)] = i
        self.remote_builds += len(futures)
        art: Artifact
        for future, art in self.cluster.completed(futures, able, "build"):
            path = None
            if art.name is not None and art.blob is not None:
                path = str(store(cache, art.name, art.blob))
            outcome = Compiled(path, art.error_no, art.error_msg, art.seconds, art.infrastructure)
            done[futures[future]] = outcome
        return with_libraries(results, jobs, [done[i] for i in range(len(jobs))])

    @staticmethod
    def _cached(cache: Path, job: Job) -> Path | None:
        """The library of ``job`` in this machine's kernel cache, if it is there."""
        source, target, code = job
        try:
            path = cache / shared_library_name(source, Target.parse(target), code)
        except BuildError:  # no compiler here (a cross target): only the cluster can tell
            return None
        return path if path.exists() else None


class DaskRunner(Closing):
    """Checks and times built candidates of target kind ``kind`` on the cluster's measuring
    workers, with ``option`` (its ``run_timeout`` applies on the worker) and inputs drawn with
    ``seed``."""

    def __init__(
        self, cluster: DaskCluster, option: MeasureOption, kind: str = "c", seed: int = 0,
        target: str | None = None,
    ) -> None:
        self.cluster, self.option, self.kind, self.seed, self.target = cluster, option, kind, seed, target
        self._data: dict[str, tuple[str, Any]] = {}  # data key -> (key, the cluster value of the data)
        self._machine = ""

    @property
    def machine(self) -> str:
        """The fingerprint of the machine the measuring workers are, for ``target`` ("" without a
        target or while no measuring worker is there: records then name this machine). Measuring
        workers on different machines are refused: one log's records name one machine."""
        if self._machine or self.target is None:
            return self._machine
        workers = self.cluster.workers()
        needs = measure_placement(workers, self.kind)[0].get("resources", {})
        chosen = [a for a, r in workers.items() if all(k in r for k in needs)]
        if not chosen:
            return ""
        prints = sorted(set(self.cluster.client.run(fingerprint_for, self.target, workers=chosen).values()))
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

    def _task_data(self, inp: MeasureInput) -> tuple[str, Any]:
        key = data_key(inp.task, self.seed)
        if key not in self._data:
            value = task_data(inp.task, self.seed, self.option.check)
            self._data[key] = (key, self.cluster.submit(hold, value, prefix="asc-data"))
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
        where, able = measure_placement(self.cluster.workers(), self.kind)
        futures: dict[Any, int] = {}
        failed: list[tuple[int, MeasureResult]] = []
        for j, (inp, build) in enumerate(zip(inputs, builds, strict=True)):
            if build.error_no != MeasureErrorNo.NO_ERROR or build.lib_path is None:
                error_no = build.error_no or MeasureErrorNo.UNKNOWN_ERROR
                message = build.error_msg or "the build gave no library"
                failed.append((j, MeasureResult((), error_no, message, build.time_cost, time.time())))
                continue
            key, data = self._task_data(inp)
            lib = Path(build.lib_path)
            args = (key, data, lib.name, lib.read_bytes(), build.func_name, build.arg_specs, self.option)
            prefix = f"asc-measure-{key[:8]}"  # which task a measurement is for, in the task stream
            futures[self.cluster.submit(measure_on_worker, *args, prefix=prefix, **where)] = j
        yield from failed
        for future, value in self.cluster.completed(futures, able, f"measure {self.kind} programs"):
            error_no, message, costs, seconds = value
            j = futures[future]
            all_cost = builds[j].time_cost + seconds
            yield j, MeasureResult(tuple(costs), MeasureErrorNo(error_no), message, all_cost, time.time())
