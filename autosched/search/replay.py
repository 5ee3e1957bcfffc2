"""A tuning log served as if it were a device: deterministic tuner tests without a compiler.

    log = ReplayLog("tests/data/replay_matmul128.jsonl.gz")      # plain or gzip JSON lines
    space = LogSpace(log)                      # a TuningSpace of the log's programs only
    device = ReplayRunner(log)                 # a Builder + Runner, and a ``measure`` callable
    tuner = make_tuner("evolutionary", log.task, space, seed=0, model=my_model)
    tuner.tune(200, device.measure)

:class:`ReplayRunner` answers each program with its recorded result (costs, error kind and
message). A program the log does not hold gets ``UNKNOWN_ERROR`` with the message
``"not in the replay log: ..."`` (the program is not at fault) and is listed in
:attr:`ReplayRunner.misses`. So that tuners only propose programs the log holds, :class:`LogSpace`
restricts the space to them: ``sample`` and ``grid_point`` return logged programs, ``mutate`` one of
the ``neighbours`` logged programs nearest by step distance (the steps one program has and the other
lacks), ``crossover`` a logged program near both parents.
"""

from __future__ import annotations

import gzip
import os
import random
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ..records import Record, RecordError, load_records, steps_key
from ..runner.measure import (
    BuildResult,
    Closing,
    MeasureErrorNo,
    MeasureInput,
    MeasureResult,
)
from ..schedule.steps import Step
from ..task import Task
from .tuning_space import Candidate

__all__ = ["LogSpace", "ReplayLog", "ReplayRunner", "first_hit", "read_log"]

#: the message of a program the replay log does not hold (its error kind is UNKNOWN_ERROR)
MISS = "not in the replay log"


def read_log(path: str | os.PathLike[str]) -> list[Record]:
    """The records of a tuning log, plain or gzip-compressed (``.gz``); bad lines are skipped."""
    path = Path(path)
    if path.suffix != ".gz":
        return load_records(path)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    found, bad = [], 0
    for line in lines:
        try:
            found.append(Record.from_line(line))
        except (RecordError, ValueError):
            bad += 1
    if not found:
        raise RecordError(f"{path} is not an autosched tuning log")
    if bad:
        warnings.warn(f"{path}: skipped {bad} bad lines", stacklevel=2)
    return found


class ReplayLog:
    """The programs of one task in a tuning log, each with its (first) recorded measurement.

    ``task`` defaults to the task of the log's first record.
    """

    def __init__(self, log: str | os.PathLike[str] | Iterable[Record], task: Task | None = None) -> None:
        records = read_log(log) if isinstance(log, (str, os.PathLike)) else list(log)
        if not records:
            raise ValueError("a replay log needs at least one record")
        if task is None:
            name, args = records[0].workload
            task = Task(name, args, target=records[0].target)
        self.task = task
        key, target = task.workload.key, str(task.target)
        self.by_key: dict[str, Record] = {}
        for r in records:
            if (r.workload_key, r.target) == (key, target):
                self.by_key.setdefault(r.program_key, r)
        if not self.by_key:
            raise ValueError(f"the replay log has no record of {task}")
        self.programs: list[Record] = list(self.by_key.values())

    def __len__(self) -> int:
        return len(self.programs)

    def ranked(self) -> list[str]:
        """Keys of the valid programs, fastest first (ties: log order)."""
        valid = [r for r in self.programs if r.ok]
        return [r.program_key for r in sorted(valid, key=lambda r: r.median)]

    def top(self, fraction: float) -> set[str]:
        """Keys of the fastest ``fraction`` of the valid programs (at least one)."""
        ranked = self.ranked()
        return set(ranked[: max(1, int(len(ranked) * fraction))])


    def within(self, share: float) -> set[str]:
        """Keys of the valid programs at least ``share`` (0.9: 90 %) as fast as the fastest."""
        valid = [r for r in self.programs if r.ok]
        best = min(r.median for r in valid)
        return {r.program_key for r in valid if best / r.median >= share}


def first_hit(keys: Sequence[str], wanted: set[str]) -> int | None:
    """The 1-based trial at which a program of ``wanted`` was first measured (None: never)."""
    for i, key in enumerate(keys):
        if key in wanted:
            return i + 1
    return None


class ReplayRunner(Closing):
    """A Builder and Runner that serve the recorded results of a :class:`ReplayLog`."""

    def __init__(self, log: ReplayLog | str | os.PathLike[str]) -> None:
        self.log = log if isinstance(log, ReplayLog) else ReplayLog(log)
        self.misses: list[str] = []  # keys of programs asked for that the log does not hold
        self.served = 0

    def result(self, steps: Sequence[Step]) -> MeasureResult:
        """The recorded result of the program ``steps``."""
        key = steps_key(steps)
        record = self.log.by_key.get(key)
        if record is None:
            self.misses.append(key)
            return MeasureResult((), MeasureErrorNo.UNKNOWN_ERROR, f"{MISS}: program {key}")
        self.served += 1
        r = record
        return MeasureResult(r.costs, r.error_no, r.error_msg, r.all_cost, r.timestamp)

    def measure(self, candidates: list[Candidate]) -> list[MeasureResult]:
        """A ``measure`` callable for :meth:`Tuner.tune`: the recorded result of each candidate."""
        return [self.result(c.steps) for c in candidates]

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        """Nothing to build: an empty build result per input."""
        return [BuildResult(None, inp.task.func_name, ()) for inp in inputs]

    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]:
        """The recorded result of each input."""
        return [self.result(inp.steps) for inp in inputs]


class LogSpace:
    """A :class:`~autosched.search.tuning_space.TuningSpace` of the programs a replay log holds."""

    kind = "log"
    #: distance vectors kept (one per program asked about)
    CACHE = 4096

    def __init__(self, log: ReplayLog, neighbours: int = 8) -> None:
        self.log = log
        self.neighbours = neighbours
        self.index = {r.program_key: i for i, r in enumerate(log.programs)}
        vocabulary: dict[Step, int] = {}
        rows = [[vocabulary.setdefault(s, len(vocabulary)) for s in set(r.steps)] for r in log.programs]
        self.incidence = np.zeros((len(rows), len(vocabulary)), dtype=np.float32)
        for i, row in enumerate(rows):
            self.incidence[i, row] = 1.0
        self.sizes = self.incidence.sum(axis=1)
        self._near: dict[int, list[int]] = {}
        self._distances: dict[int, np.ndarray] = {}
        self._cands: dict[int, Candidate] = {}

    def _candidate(self, i: int) -> Candidate:
        cand = self._cands.get(i)
        if cand is None:
            record = self.log.programs[i]
            cand = self._cands[i] = Candidate(record.steps, dict(record.program or {}), i)
        return cand

    def _position(self, candidate: Candidate) -> int:
        if isinstance(candidate.point, int):
            return candidate.point
        try:
            return self.index[candidate.key]
        except KeyError:
            raise ValueError("the program is not in the replay log") from None

    def distances(self, i: int) -> np.ndarray:
        """Step distance from program ``i`` to every program: steps one has and the other lacks."""
        if i not in self._distances:
            if len(self._distances) >= self.CACHE:
                self._distances.clear()
            shared = self.incidence @ self.incidence[i]
            self._distances[i] = self.sizes[i] + self.sizes - 2 * shared
        return self._distances[i].copy()

    def nearest(self, i: int) -> list[int]:
        """The ``neighbours`` programs nearest to program ``i`` (itself excluded; ties: log order)."""
        if i not in self._near:
            d = self.distances(i)
            d[i] = np.inf
            self._near[i] = np.argsort(d, kind="stable")[: self.neighbours].tolist()
        return self._near[i]

    def sample(self, rng: random.Random) -> Candidate:
        return self._candidate(rng.randrange(len(self.log)))

    def grid_size(self) -> int:
        return len(self.log)

    def grid_point(self, index: int) -> Candidate | None:
        return self._candidate(index)

    def mutate(self, candidate: Candidate, rng: random.Random) -> Candidate:
        """One of the logged programs nearest to ``candidate``."""
        near = self.nearest(self._position(candidate))
        return self._candidate(rng.choice(near)) if near else candidate

    def crossover(self, a: Candidate, b: Candidate, rng: random.Random) -> Candidate:
        """One of the logged programs nearest to both parents (least summed step distance)."""
        i, j = self._position(a), self._position(b)
        if i == j:
            return self.mutate(a, rng)
        d = self.distances(i) + self.distances(j)
        d[[i, j]] = np.inf
        best = np.argsort(d, kind="stable")[: self.neighbours].tolist()
        return self._candidate(rng.choice(best))
