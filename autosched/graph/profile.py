"""Where a network call's time goes: the whole call, and each task's kernels inside it.

A task's kernel timed alone (as tuning measures it: the same call repeated, its data hot in the
caches) is faster than inside the network, where each kernel finds the caches holding the previous
layer's data and the thread pool idle; the network also spends time outside every kernel (input and
output copies, concatenations, the call of each step). :func:`profile_network` measures both, so the
task scheduler's estimate can be set against the network's real latency
(:meth:`autosched.search.scheduler.TaskScheduler.calibrate`).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..ops import Workload
from ..search.scheduler import TaskScheduler
from ..task import Task
from .inputs import sample_inputs
from .ir import Graph
from .network import Network, build_network
from .network_device import DeviceNetwork


@dataclass(frozen=True, slots=True)
class NetworkProfile:
    """Seconds per network call (median of the calls), and per workload the seconds per call spent
    in its kernels (all its occurrences; median of the calls)."""

    total: float
    kernels: dict[Workload, float]

    @property
    def outside(self) -> float:
        """Seconds per call outside every kernel (copies, concatenations, stepping)."""
        return max(0.0, self.total - sum(self.kernels.values()))


def profile_network(
    net: Network | DeviceNetwork, inputs: Sequence[np.ndarray], calls: int = 10, min_seconds: float = 0.2,
    max_calls: int = 1000,
) -> NetworkProfile:
    """Time ``calls`` calls of ``net`` on ``inputs`` (more, up to ``max_calls``, until they last
    ``min_seconds``) after one untimed call, each kernel step timed inside the call."""
    net(*inputs)
    totals: list[float] = []
    per_call: dict[Workload, list[float]] = {}
    started = time.perf_counter()
    while len(totals) < max_calls and (len(totals) < calls or time.perf_counter() - started < min_seconds):
        spent: dict[Workload, float] = {}
        start = last = time.perf_counter()
        for step in net.steps(*inputs):
            now = time.perf_counter()
            wl = step.group.workload
            if wl is not None:
                spent[wl] = spent.get(wl, 0.0) + now - last
            last = now
        for v in net.output_buffers():
            np.array(v)  # the copy a call makes of its outputs
        totals.append(time.perf_counter() - start)
        for wl, s in spent.items():
            per_call.setdefault(wl, []).append(s)
    return NetworkProfile(statistics.median(totals), {wl: statistics.median(s) for wl, s in per_call.items()})


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One measurement of the whole network during tuning: after ``trials`` trials in all, the
    network ran in ``measured_ms``; the tasks' kernels timed alone added up to ``kernels_ms``
    (weight x best); the scheduler estimated ``estimated_ms`` just before (calibrated by the
    previous checkpoint, if any)."""

    trials: int
    measured_ms: float
    kernels_ms: float
    estimated_ms: float

    def to_json(self) -> dict[str, float]:
        """A JSON-compatible dict."""
        return {"trials": self.trials, "measured_ms": self.measured_ms, "kernels_ms": self.kernels_ms,
                "estimated_ms": self.estimated_ms}

    def text(self) -> str:
        """One line for the progress output."""
        off = (self.estimated_ms / self.measured_ms - 1) * 100 if self.measured_ms > 0 else math.nan
        return (f"network measured after {self.trials} trials: {self.measured_ms:.3f} ms; estimated "
                f"{self.estimated_ms:.3f} ms ({off:+.0f}%), its kernels alone {self.kernels_ms:.3f} ms")


class NetworkCheck:
    """Measures the network built from the tuning log at ``count`` points of a run (evenly over
    ``budget`` trials; the last one is :meth:`measure` called at the end) and calibrates the
    scheduler with each measurement (:meth:`TaskScheduler.calibrate`)."""

    def __init__(self, graph: Graph, log: Path, target: str, tasks: Sequence[Task], sched: TaskScheduler,
                 budget: int, count: int) -> None:
        self.graph, self.log, self.target, self.tasks, self.sched = graph, log, target, tasks, sched
        self.points = sorted({math.ceil(budget * k / count) for k in range(1, count)}) if count > 1 else []
        self.done: list[Checkpoint] = []

    def due(self, trials: int) -> bool:
        """Whether a checkpoint falls at or before ``trials`` trials and was not measured yet."""
        return bool(self.points) and trials >= self.points[0]

    def measure(self, trials: int) -> Checkpoint:
        """Build the network from the log, time it, calibrate the scheduler; the checkpoint."""
        while self.points and self.points[0] <= trials:
            self.points.pop(0)
        estimated, kernels = self.sched.latency(), self.sched.kernels_latency()
        net = build_network(self.graph, self.log if self.log.exists() else None, self.target)
        found = profile_network(net, sample_inputs(self.graph))
        self.sched.calibrate([found.kernels.get(t.workload, 0.0) for t in self.tasks], found.total)
        point = Checkpoint(trials, found.total * 1e3, kernels * 1e3, estimated * 1e3)
        self.done.append(point)
        return point
