"""A tuning task: one workload on one target, the unit that is measured, logged and tuned.

task = asc.Task("matmul", (1024, 1024, 1024), target="c -num-threads=1")
task.source(steps)          # the source of one program (steps): C, OpenCL or CUDA, by target
task.lowered(steps)         # its loop nest, lowered once and shared (features, builder)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from .backends import backend_for
from .backends.base import Built
from .dtypes import dtype
from .emit_c import function_name
from .expr import NO_CODE, CCode, op_code, static_shape, topo_order
from .lower import Lowered, lower_loops
from .lower.cache import LRUCache
from .memory import tensors_problem
from .ops import Workload, get_workload
from .runner.kernel import ArgSpec
from .schedule import Schedule
from .schedule.steps import Step
from .target import Target

#: the C name every tuned kernel gets (exported kernels are renamed by the exporter)
KERNEL_NAME = "default_function"

#: programs lowered lately, shared by every task of the process (see :meth:`Task.lowered`)
LOWERING_CACHE: LRUCache[Lowered] = LRUCache(4096)
#: schedules built by a search space for programs not lowered yet (see :meth:`Task.keep_schedule`)
BUILT_SCHEDULES: LRUCache[Schedule] = LRUCache(1024)


@dataclass(frozen=True, init=False)
class Task:
    """A workload (a name and its arguments) on a target.

    ``Task("matmul", (64, 64, 64), target="c")`` or ``Task(workload_object, target=...)``; the
    arguments are normalized by the workload's signature, so equal tasks compare equal.
    """

    workload: Workload
    target: Target

    def __init__(
        self, workload: str | Workload, args: Sequence[Any] = (), target: str | Target = "c"
    ) -> None:
        if isinstance(workload, Workload):
            if args:
                raise TypeError("Task(workload_object, ...) takes no separate args")
            wl = workload
        else:
            wl = get_workload(workload, tuple(args))
        try:
            tensors = wl.tensors()  # arguments that make no tensors (a negative size) fail here, not mid-run
            sizes = [(t.name, static_shape(t.shape), dtype(t.dtype).bytes) for t in tensors]
        except (ValueError, TypeError) as e:
            raise ValueError(f"workload {wl}: {e}") from None
        too_big = tensors_problem(f"workload {wl}", sizes)  # before any trial is spent on it
        if too_big is not None:
            raise ValueError(too_big)
        object.__setattr__(self, "workload", wl)
        object.__setattr__(self, "target", Target.parse(target))

    def __str__(self) -> str:
        return f"{self.workload} on {self.target}"

    @property
    def workload_key(self) -> str:
        """The workload's stable key (name, arguments and DAG hash)."""
        return self.workload.key

    def flops(self) -> int:
        """Floating-point operations of one run."""
        return self.workload.flops()

    def schedule(self, steps: Sequence[Step]) -> Schedule:
        """The program ``steps`` replayed on the workload's tensors (raises ScheduleError if illegal)."""
        return Schedule.replay(self.workload.outputs, steps)

    @cached_property
    def key(self) -> tuple[str, str]:
        """(workload key, target string): what identifies the task in logs and caches (computed once)."""
        return (self.workload_key, str(self.target))

    def lowered(self, steps: Sequence[Step], name: str = KERNEL_NAME, keep: bool = True) -> Lowered:
        """The program ``steps`` lowered for this task (raises ScheduleError if illegal).

        Served from :data:`LOWERING_CACHE`, keyed by the workload key, the target and the steps,
        so the builder's source and the cost model's features lower a program once between them.
        With ``keep`` False a program not in the cache is lowered but not added to it: the cost
        model describes thousands of programs the search never builds, and keeping their loop
        nests made Python's garbage collector walk them again and again (``bench_search_overhead.py``
        shows its share; a program then built is lowered once more, a few ms before its compile).
        """
        steps = tuple(steps)
        gpu = backend_for(self.target).gpu
        key = (*self.key, steps, name)

        def make() -> Lowered:
            return lower_loops(self._built(steps), self.workload.tensors(), name, gpu)

        return LOWERING_CACHE.get(key, make) if keep or LOWERING_CACHE.has(key) else make()

    def keep_schedule(self, steps: tuple[Step, ...], sched: Schedule) -> None:
        """Keep ``sched``, a schedule just built whose steps are ``steps`` (a search space made it
        to learn the steps of a program), for the program's first lowering, which then lowers it
        instead of replaying the steps on a new schedule. Kept for a while only (the 1,024 latest)."""
        BUILT_SCHEDULES.put((*self.key, steps), sched)

    def _built(self, steps: tuple[Step, ...]) -> Schedule:
        """The schedule of ``steps``: a kept one (taken: lowering reads it, and only once), else
        the steps replayed."""
        kept = BUILT_SCHEDULES.take((*self.key, steps))
        return kept if kept is not None else self.schedule(steps)

    def source(
        self,
        steps: Sequence[Step],
        name: str = KERNEL_NAME,
        portable: bool = False,
        timing: bool | None = None,
        symbolic: bool = False,
    ) -> str:
        """Source of the program ``steps`` for this task's target, from its backend (for C, see
        :func:`~autosched.emit_c.emit_c` for ``portable`` and ``timing``). With ``symbolic``, the
        kernel is built over :meth:`~autosched.ops.Workload.symbolic_tensors` (the steps tuned at
        this task's sizes, applied to every size) and takes the sizes as ``int`` parameters after
        the buffers."""
        backend = backend_for(self.target)
        if symbolic:
            tensors, _ = self.workload.symbolic_tensors()
            n_out = self.workload.definition.num_outputs
            sched = Schedule.replay(tensors[len(tensors) - n_out :], steps)
            func = lower_loops(sched, tensors, name, backend.gpu).func()
        else:
            func = self.lowered(steps, name).func()
        return backend.source(func, self.target, portable=portable, timing=timing)

    def build(self, steps: Sequence[Step], cache_dir: Path | None = None) -> Built:
        """The program ``steps`` built by the target's backend (into ``cache_dir``, by default the
        kernel cache): a callable over numpy arrays (inputs, then outputs)."""
        func = self.lowered(steps).func()
        return backend_for(self.target).build(func, self.target, self.arg_specs(), (), cache_dir)

    @cached_property
    def code(self) -> CCode:
        """The user C the workload's kernels call (extern stages, ``call_extern``): the builder
        links it, the export writes it into the Makefile. The same for every program of the task."""
        return NO_CODE.merge(*(op_code(op) for op in topo_order(self.workload.outputs)))

    def arg_specs(self) -> list[ArgSpec]:
        """The kernel's arguments: inputs, then outputs (written)."""
        n_in = len(self.workload.inputs)
        return [
            ArgSpec(t.name, tuple(t.shape), t.dtype, i >= n_in) for i, t in enumerate(self.workload.tensors())
        ]

    @property
    def func_name(self) -> str:
        """The C symbol of the tuned kernel."""
        return function_name(KERNEL_NAME)
