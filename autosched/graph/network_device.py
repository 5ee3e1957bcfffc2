"""A network on a GPU (``asc.build_network(graph, log, target="cuda")`` or ``"opencl"``).

Every task's kernel is built as on a CPU (its best record in the log, else the GPU default
schedule: :func:`~autosched.backends.gpu_default.default_gpu_schedule`). On the first call the
weights are uploaded and every intermediate value gets a buffer of its own on the device; they stay
there for the calls after it. A call uploads the inputs, queues every kernel back to back on the
device's in-order queue, and downloads the outputs: nothing else crosses to the host. A reshape
is the same buffer; a concatenation is a copy per part (per leading index) on the device.

Calls from several threads run one at a time (the device's queue and buffers are shared).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..expr import static_shape
from ..ops import Workload
from ..runner.gpu_program import DeviceMemory, GpuCallable
from .fusion import Group, fuse
from .inputs import checked_inputs, index_rows, input_dtype
from .ir import Graph, GraphError

if TYPE_CHECKING:  # network.py builds device networks: an annotation only
    from .network import BuiltTask


@dataclass(frozen=True, slots=True)
class DeviceValue:
    """A value on the device: its buffer (shared by the reshapes of one value) and numpy type."""

    buffer: Any
    dtype: np.dtype[Any]
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        """Bytes of the value."""
        return math.prod(self.shape) * self.dtype.itemsize


@dataclass(frozen=True, slots=True)
class DeviceStep:
    """One fused group of a device network and what queues it (None: a reshape, nothing to run)."""

    group: Group
    run: Callable[[], None] | None


@dataclass(frozen=True, slots=True)
class Placed:
    """A device network's buffers and steps, made on its first call."""

    inputs: list[DeviceValue]
    steps: list[DeviceStep]
    outputs: list[DeviceValue]


class DeviceNetwork:
    """A graph with a GPU kernel per task; call it with the graph's inputs as numpy arrays. Built by
    :func:`~autosched.graph.network.build_network` for a GPU target."""

    def __init__(
        self, graph: Graph, target: str, kernels: dict[Workload, GpuCallable], built: list[BuiltTask]
    ) -> None:
        self.graph = graph  # laid out for the target (a GPU keeps the graph's layouts)
        self.groups = fuse(graph)
        self.kernels = kernels
        self.built = built  # how each task was built
        self._rows = index_rows(graph)
        if not kernels:
            raise GraphError(f"network {graph.name!r} has no kernel to run on {target}")
        self._memory: DeviceMemory = next(iter(kernels.values())).memory()
        self._lock = threading.Lock()
        self._plan: Placed | None = None

    def __repr__(self) -> str:
        tuned = sum(b.tuned for b in self.built)
        return f"<DeviceNetwork {self.graph.name!r}: {len(self.built)} tasks, {tuned} tuned>"

    def _value(self, shape: Sequence[int], dtype: str) -> DeviceValue:
        dt = np.dtype(dtype)
        return DeviceValue(self._memory.alloc(math.prod(shape) * dt.itemsize), dt, tuple(shape))

    def _place(self) -> Placed:
        """Every value's buffer (the weights uploaded) and every group's step, made once."""
        g = self.graph
        values: dict[str, DeviceValue] = {}
        for name, array in g.constants.items():
            arr = np.ascontiguousarray(array)
            values[name] = self._value(arr.shape, str(arr.dtype))
            self._memory.upload(values[name].buffer, arr)
        inputs = [self._value(g.shapes[v], input_dtype(g, v)) for v in g.inputs]
        values.update(zip(g.inputs, inputs, strict=True))
        steps = []
        for group in self.groups:
            run, values[group.output] = self._step(group, values)
            steps.append(DeviceStep(group, run))
        return Placed(inputs, steps, [values[v] for v in g.outputs])

    def _step(
        self, group: Group, values: dict[str, DeviceValue]
    ) -> tuple[Callable[[], None] | None, DeviceValue]:
        """What computes ``group`` on the device (None: a reshape, nothing to run) and its output."""
        node, shape = group.nodes[0], self.graph.shapes[group.output]
        if group.workload is None:
            if node.op == "reshape":
                source = values[node.inputs[0]]
                return None, DeviceValue(source.buffer, source.dtype, shape)
            if node.op == "concat":
                out = self._value(shape, self.graph.dtype)
                return self._concat([values[v] for v in node.inputs], out, node.attr("axis")), out
            raise GraphError(f"node {node.name!r}: no runtime for operator {node.op!r}")
        wl = group.workload
        out = self._value(static_shape(wl.outputs[0].shape), self.graph.dtype)
        buffers = [values[v].buffer for v in group.inputs] + [out.buffer]
        kernel = self.kernels[wl]
        return (lambda: kernel.launch(buffers)), DeviceValue(out.buffer, out.dtype, shape)

    def _concat(self, parts: list[DeviceValue], out: DeviceValue, axis: int) -> Callable[[], None]:
        """Copies that place ``parts`` side by side along ``axis`` in ``out``."""
        axis %= len(out.shape)
        outer = math.prod(out.shape[:axis])
        row = out.nbytes // max(outer, 1)
        copies, start = [], 0
        for part in parts:
            chunk = part.nbytes // max(outer, 1)
            copies += [(o * row + start, part.buffer, o * chunk, chunk) for o in range(outer)]
            start += chunk

        def run() -> None:
            for dst_offset, src, src_offset, nbytes in copies:
                self._memory.copy(out.buffer, dst_offset, src, src_offset, nbytes)

        return run

    def steps(self, *inputs: np.ndarray) -> Iterator[DeviceStep]:
        """Run the network on ``inputs`` one group at a time, the device's work finished before each
        group's step is yielded (to time the groups: :func:`~.profile.profile_network`); the
        outputs stay on the device until :meth:`output_buffers`. Other calls wait until the
        iteration ends."""
        arrays = checked_inputs(self.graph, inputs, self._rows)
        with self._lock, self._memory.session():
            yield from self._queue(self._placed(), arrays, wait=True)

    def output_buffers(self) -> tuple[np.ndarray, ...]:
        """The outputs of the last call (or :meth:`steps`), downloaded."""
        with self._lock, self._memory.session():
            return tuple(self._download(self._placed().outputs))

    def __call__(self, *inputs: np.ndarray) -> np.ndarray | list[np.ndarray]:
        """The graph's outputs for ``inputs``: one array, or a list for several outputs."""
        arrays = checked_inputs(self.graph, inputs, self._rows)
        with self._lock, self._memory.session():
            placed = self._placed()
            for _ in self._queue(placed, arrays, wait=False):
                pass
            outs = self._download(placed.outputs)
        return outs[0] if len(outs) == 1 else outs

    def _queue(self, placed: Placed, arrays: list[np.ndarray], wait: bool) -> Iterator[DeviceStep]:
        """Upload ``arrays`` and queue every step, yielding each after it is queued (and, with
        ``wait``, after the device has run it)."""
        for value, arr in zip(placed.inputs, arrays, strict=True):
            self._memory.upload(value.buffer, arr)
        for step in placed.steps:
            if step.run is not None:
                step.run()
                if wait:
                    self._memory.finish()
            yield step

    def _placed(self) -> Placed:
        if self._plan is None:
            self._plan = self._place()
        return self._plan

    def _download(self, values: list[DeviceValue]) -> list[np.ndarray]:
        outs = [np.empty(v.shape, v.dtype) for v in values]
        for arr, value in zip(outs, values, strict=True):
            self._memory.download(arr, value.buffer)
        return outs
