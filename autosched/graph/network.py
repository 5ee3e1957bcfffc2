"""``asc.build_network(graph, log)``: every task's best kernel, run in order as one callable.

    net = asc.build_network(asc.from_onnx("model.onnx"), log="model.jsonl")
    y = net(x)                       # numpy in, numpy out, in the graph's input order

Each distinct workload is built once: the best record of its task in ``log`` (this machine's
records only), else the workload's default schedule. Weights are constants held by the network
(convolution kernels packed for a CPU once, here: :mod:`.layout`) and passed to the kernels as
inputs; reshape is a view and concat a copy, done in numpy.

Intermediate values live in one workspace per calling thread, placed by the exported library's
memory plan (:func:`.plan.plan_memory`: values whose lifetimes do not overlap share bytes), so a
call allocates only its outputs (ResNet-18: 3.8 MiB held per thread instead of 10.2 MiB per call).
Each thread's first call binds every kernel to its arrays once (:class:`Bound`, checked then); a
call copies its inputs in, runs the bound kernels back to back and copies the outputs out.

An integer input (token ids read by ``gather``) takes any integer array; its values must lie in
[-n, n) for the n rows it indexes (negative ones count from the end), and the kernels read it
as int64.
"""

from __future__ import annotations

import functools
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..backends import backend_for
from ..database.apply import NotTunedWarning, find_best
from ..diagnostics import warn
from ..expr import static_shape
from ..ops import Workload
from ..ops.schedules import default_schedule
from ..records import load_records
from ..runner.aligned import aligned_array, aligned_empty
from ..runner.compile import CompileError, compile_shared
from ..runner.gpu_program import GpuCallable
from ..runner.kernel import Kernel
from ..runner.load import load_kernel
from ..schedule import ScheduleError
from ..schedule.steps import Step
from ..task import Task
from .fusion import Group, TaskInfo, fuse
from .inputs import checked_inputs, index_rows, input_dtype
from .ir import Graph, GraphError
from .layout import for_target
from .network_device import DeviceNetwork
from .plan import plan_memory


@dataclass(frozen=True, slots=True)
class BuiltTask:
    """How one task of a network was built: tuned (from a log record) or the default schedule."""

    task: Task
    tuned: bool


def network_tasks(graph: Graph, target: str = "c") -> list[Task]:
    """The graph's distinct tasks on ``target`` (its weights laid out for it:
    :func:`.layout.for_target`), in order of first use."""
    seen: dict[Workload, Task] = {}
    for g in fuse(for_target(graph, target)):
        if g.workload is not None and g.workload not in seen:
            seen[g.workload] = Task(g.workload, target=target)
    return list(seen.values())


def extract_tasks(graph: Graph, target: str = "c") -> list[TaskInfo]:
    """The distinct workloads of ``graph`` compiled for ``target`` (:func:`.layout.for_target`) in
    order of first use, each with its weight and FLOP share."""
    counts = Counter(g.workload for g in fuse(for_target(graph, target)) if g.workload is not None)
    flops = {wl: wl.flops() for wl in counts}
    total = sum(flops[wl] * n for wl, n in counts.items()) or 1
    return [TaskInfo(wl, flops[wl], n, flops[wl] * n / total) for wl, n in counts.items()]


def _load(task: Task, steps: Sequence[Step]) -> Kernel | GpuCallable:
    if backend_for(task.target).gpu:
        return task.build(steps)  # a GPU program: its buffers are the device network's
    return load_kernel(compile_shared(task.source(steps), task.target), task.func_name, task.arg_specs())


def build_tasks(
    graph: Graph, log: str | os.PathLike[str] | None, target: str
) -> tuple[dict[Workload, Kernel | GpuCallable], list[BuiltTask]]:
    """The kernel of every task of ``graph`` (laid out for ``target``) and how each was built:
    the best record in ``log`` (checked to be this model's), else the default schedule."""
    tasks = network_tasks(graph, target)
    if log is not None:
        _check_log(log, tasks, graph.name)
    kernels: dict[Workload, Kernel | GpuCallable] = {}
    built = []
    for task in tasks:
        kernels[task.workload], tuned = _build(task, log)
        built.append(BuiltTask(task, tuned))
    return kernels, built


def _build(task: Task, log: str | os.PathLike[str] | None) -> tuple[Kernel | GpuCallable, bool]:
    """Task's kernel from its best record in ``log`` (True), else its default schedule (False)."""
    record = find_best(task, log=log, db=False).record if log is not None else None
    if record is not None:
        try:
            return _load(task, record.steps), True
        except (ScheduleError, CompileError) as err:  # e.g. a record of an older version
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            warn(f"the best record of {task.workload} in {os.fspath(log or '')} does not build here "
                 f"({first}); using its default schedule", NotTunedWarning)
    return _load(task, default_schedule(task.workload, task.target)[0].steps), False


def _check_log(log: str | os.PathLike[str], tasks: list[Task], name: str) -> None:
    """Raise GraphError when ``log`` has records but none of this network's tasks (another model's)."""
    if not os.path.exists(log):
        raise GraphError(f"tuning log {os.fspath(log)} does not exist")
    records = load_records(log) if os.path.getsize(log) > 0 else []
    keys = {t.workload.key for t in tasks}
    if records and not any(r.workload_key in keys for r in records):
        raise GraphError(
            f"tuning log {os.fspath(log)} has no records of the {len(tasks)} tasks of {name!r} "
            f"(it was made for another model or other shapes)"
        )


@dataclass(frozen=True, slots=True)
class BoundGroup:
    """One fused group of a bound network call: ``run`` computes it (None: a view, nothing to run)
    from ``arrays`` (its inputs, then its output, as its kernel takes them)."""

    group: Group
    run: Callable[[], object] | None
    arrays: tuple[np.ndarray, ...]


@dataclass(frozen=True, slots=True)
class Bound:
    """A thread's network call with every array in place: ``inputs`` (each call's inputs are
    copied there), ``steps`` in order, ``outputs`` (copied out after the steps)."""

    inputs: tuple[np.ndarray, ...]
    steps: tuple[BoundGroup, ...]
    outputs: tuple[np.ndarray, ...]


class Network:
    """A graph with a built kernel per task; call it with the graph's inputs as numpy arrays."""

    def __init__(self, graph: Graph, log: str | os.PathLike[str] | None = None, target: str = "c") -> None:
        runs = for_target(graph, target)  # as it runs: convolution weights packed on a CPU
        # every array a kernel reads starts at a vector-aligned address (as the workspace does)
        self.graph = replace(runs, constants={k: aligned_array(v) for k, v in runs.constants.items()})
        self.groups = fuse(self.graph)
        kernels, self.built = build_tasks(self.graph, log, target)
        self.kernels: dict[Workload, Kernel] = {wl: k for wl, k in kernels.items() if isinstance(k, Kernel)}
        self._plan = plan_memory(self.graph, self.groups, [])
        self._rows = index_rows(self.graph)
        self._local = threading.local()  # each thread's workspace

    def _workspace(self) -> np.ndarray:
        """This thread's workspace (bytes, 64-byte aligned), made on its first call."""
        ws = getattr(self._local, "workspace", None)
        if ws is None:
            ws = self._local.workspace = aligned_empty((self._plan.peak,), "uint8")
        return ws

    def _bound(self) -> Bound:
        """This thread's bound call (made on its first call)."""
        bound = getattr(self._local, "bound", None)
        if bound is None:
            bound = self._local.bound = self._bind(self._workspace())
        return bound

    def _bind(self, workspace: np.ndarray) -> Bound:
        """Every group's arrays placed (intermediates in ``workspace``, inputs and outputs in
        buffers of their own) and its kernel bound to them."""
        values: dict[str, np.ndarray] = dict(self.graph.constants)
        inputs = tuple(aligned_empty(self.graph.shapes[v], input_dtype(self.graph, v))
                       for v in self.graph.inputs)
        values.update(zip(self.graph.inputs, inputs, strict=True))
        steps = []
        for g in self.groups:
            steps.append(self._step(g, values, workspace))
            values[g.output] = steps[-1].arrays[-1].reshape(self.graph.shapes[g.output])
        return Bound(inputs, tuple(steps), tuple(values[v] for v in self.graph.outputs))

    def _step(self, g: Group, values: dict[str, np.ndarray], workspace: np.ndarray) -> BoundGroup:
        """Group ``g`` bound to its arrays (``values``: the arrays of the values before it)."""
        node = g.nodes[0]
        if g.workload is None:
            if node.op == "reshape":
                return BoundGroup(g, None, (values[node.inputs[0]].reshape(self.graph.shapes[node.output]),))
            if node.op == "concat":
                parts = [values[v] for v in node.inputs]
                out = self._buffer(g.output, workspace)
                run = functools.partial(np.concatenate, parts, axis=node.attr("axis"), out=out)
                return BoundGroup(g, run, (*parts, out))
            raise GraphError(f"node {node.name!r}: no runtime for operator {node.op!r}")
        wl = g.workload
        pairs = zip(g.inputs, wl.inputs, strict=True)
        args = [values[v].reshape(static_shape(t.shape)) for v, t in pairs]
        out = self._buffer(g.output, workspace).reshape(static_shape(wl.outputs[0].shape))
        return BoundGroup(g, self.kernels[wl].bind(*args, out), (*args, out))

    def _buffer(self, value: str, workspace: np.ndarray) -> np.ndarray:
        """Where ``value`` is written: its place in the workspace, or an array of its own (an output)."""
        shape = self.graph.shapes[value]
        offset = self._plan.offsets.get(value)
        if offset is None:
            return aligned_empty(shape, self.graph.dtype)
        size = int(np.prod(shape)) * np.dtype(self.graph.dtype).itemsize
        return workspace[offset : offset + size].view(self.graph.dtype).reshape(shape)

    def __repr__(self) -> str:
        tuned = sum(b.tuned for b in self.built)
        return f"<Network {self.graph.name!r}: {len(self.built)} tasks, {tuned} tuned>"

    def steps(self, *inputs: np.ndarray) -> Iterator[BoundGroup]:
        """Run the network on ``inputs`` one group at a time, yielding each group's step after it
        ran: its arrays hold what the group got and wrote, until the next step overwrites them (for
        benchmarks that time or inspect layers)."""
        bound = self._bound()
        for buf, arr in zip(bound.inputs, checked_inputs(self.graph, inputs, self._rows), strict=True):
            np.copyto(buf, arr)
        for step in bound.steps:
            if step.run is not None:
                step.run()
            yield step

    def output_buffers(self) -> tuple[np.ndarray, ...]:
        """This thread's output buffers: what its last call (or :meth:`steps`) wrote, until its next."""
        return self._bound().outputs

    def __call__(self, *inputs: np.ndarray) -> np.ndarray | list[np.ndarray]:
        """The graph's outputs for ``inputs``: one array, or a list for several outputs."""
        for _ in self.steps(*inputs):
            pass
        outs = [np.array(v) for v in self.output_buffers()]  # the buffers are this thread's next call's
        return outs[0] if len(outs) == 1 else outs


def build_network(
    graph: Graph, log: str | os.PathLike[str] | None = None, target: str = "c"
) -> Network | DeviceNetwork:
    """Build every task of ``graph`` (best record in ``log``, else the default schedule): a
    :class:`Network` on a CPU, a :class:`~.network_device.DeviceNetwork` on a GPU target."""
    if backend_for(target).gpu:
        runs = for_target(graph, target)
        kernels, built = build_tasks(runs, log, target)
        programs = {wl: k for wl, k in kernels.items() if isinstance(k, GpuCallable)}
        return DeviceNetwork(runs, target, programs, built)
    return Network(graph, log, target)
