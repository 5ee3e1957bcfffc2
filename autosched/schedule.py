"""Schedules: a DAG plus a list of replayable steps, with TVM ``te``-style primitives.

``create_schedule(C)`` makes one stage per operation. ``s[C].split(...)`` and the other primitives
append a :mod:`~autosched.steps` record and apply it to the stage state (the handlers are in
:mod:`~autosched.primitives`); every illegal request raises :class:`ScheduleError` naming the step.
``Schedule.replay(steps)`` rebuilds the same schedule from the records alone, which is how tuning
logs are turned back into programs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from . import steps as st
from .expr import ComputeOp, IterVar, Operation, PlaceholderOp, Tensor, Var, as_tensors, topo_order

ANNOTATIONS = ("vectorize", "unroll", "parallel")
THREAD_TAGS = (
    "blockIdx.x",
    "blockIdx.y",
    "blockIdx.z",
    "threadIdx.x",
    "threadIdx.y",
    "threadIdx.z",
    "vthread",
)
PRAGMAS = ("auto_unroll_max_step",)
SCOPES = ("global", "shared", "local")


class ScheduleError(ValueError):
    """An illegal schedule request; the message names the step and the reason."""


@dataclass(frozen=True, slots=True)
class SplitRel:
    parent: str
    outer: str
    inner: str
    factor: int | None
    nparts: int | None


@dataclass(frozen=True, slots=True)
class FuseRel:
    outer: str
    inner: str
    fused: str


Relation = SplitRel | FuseRel


@dataclass(slots=True)
class Stage:
    """The mutable scheduling state of one operation (what ``s[T]`` returns)."""

    schedule: Schedule
    op: Operation
    kinds: dict[str, str] = field(default_factory=dict)  # axis name -> "data" | "reduce"
    relations: list[Relation] = field(default_factory=list)
    leaves: list[str] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)  # leaf -> annotation or thread tag
    pragmas: dict[str, dict[str, int]] = field(default_factory=dict)
    attach: tuple[str, ...] = ("root",)  # ("root",) | ("inline",) | ("at", stage, axis)
    scope: str = "global"

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def is_placeholder(self) -> bool:
        return isinstance(self.op, PlaceholderOp)

    def snapshot(self) -> tuple:
        """A copy of the mutable state (see :meth:`Schedule.transaction`)."""
        pragmas = {k: dict(v) for k, v in self.pragmas.items()}
        return (
            self.op,
            dict(self.kinds),
            list(self.relations),
            list(self.leaves),
            dict(self.annotations),
            pragmas,
            self.attach,
            self.scope,
        )

    def restore(self, state: tuple) -> None:
        """Go back to a :meth:`snapshot`."""
        (
            self.op,
            self.kinds,
            self.relations,
            self.leaves,
            self.annotations,
            self.pragmas,
            self.attach,
            self.scope,
        ) = state

    def reset(self, op: Operation) -> None:
        """Start over with ``op``: root axes as leaves, no relations or annotations."""
        self.op = op
        self.relations.clear()
        self.annotations.clear()
        self.pragmas.clear()
        if isinstance(op, ComputeOp):
            self.kinds = {iv.name: "data" for iv in op.axis} | {iv.name: "reduce" for iv in op.reduce_axis}
        else:
            self.kinds = {}
        self.leaves = list(self.kinds)

    # -- te-style primitives: each records a step
    def split(
        self, axis: IterVar | str, factor: int | None = None, nparts: int | None = None
    ) -> tuple[IterVar, IterVar]:
        """Split ``axis`` into (outer, inner) by an inner ``factor`` or a number of outer ``nparts``."""
        pos = self.leaves.index(_name(axis)) if _name(axis) in self.leaves else 0
        self.schedule.apply(st.SplitStep(self.name, _name(axis), factor, nparts))
        outer, inner = self._iv(self.leaves[pos : pos + 2])
        return outer, inner

    def tile(self, x: IterVar | str, y: IterVar | str, x_factor: int, y_factor: int) -> tuple[IterVar, ...]:
        """Split ``x`` and ``y`` and reorder to (xo, yo, xi, yi), as te's tile (all or nothing)."""
        with self.schedule.transaction():
            xo, xi = self.split(x, x_factor)
            yo, yi = self.split(y, y_factor)
            self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def reorder(self, *axes: IterVar | str) -> None:
        """Put the given leaf loops in this relative order (the others keep their places)."""
        self.schedule.apply(st.ReorderStep(self.name, tuple(_name(a) for a in axes)))

    def fuse(self, *axes: IterVar | str) -> IterVar:
        """Fuse adjacent leaf loops (outer first) into one."""
        first = _name(axes[0]) if axes else ""
        pos = self.leaves.index(first) if first in self.leaves else 0
        self.schedule.apply(st.FuseStep(self.name, tuple(_name(a) for a in axes)))
        return self._iv([self.leaves[pos]])[0]

    def vectorize(self, axis: IterVar | str) -> None:
        """Emit this loop as vector instructions."""
        self.schedule.apply(st.AnnotateStep(self.name, _name(axis), "vectorize"))

    def unroll(self, axis: IterVar | str) -> None:
        """Unroll this loop."""
        self.schedule.apply(st.AnnotateStep(self.name, _name(axis), "unroll"))

    def parallel(self, axis: IterVar | str) -> None:
        """Run this loop's iterations on parallel threads."""
        self.schedule.apply(st.AnnotateStep(self.name, _name(axis), "parallel"))

    def bind(self, axis: IterVar | str, thread: IterVar | str) -> None:
        """Bind a loop to a GPU thread axis (``thread_axis("threadIdx.x")``)."""
        self.schedule.apply(st.BindStep(self.name, _name(axis), _name(thread)))

    def pragma(self, axis: IterVar | str, key: str, value: int) -> None:
        """Attach a pragma; ``auto_unroll_max_step`` unrolls inner loops up to that many iterations."""
        self.schedule.apply(st.PragmaStep(self.name, _name(axis), key, int(value)))

    def compute_at(self, parent: Stage, axis: IterVar | str) -> None:
        """Compute this stage inside loop ``axis`` of ``parent``, only the region it needs."""
        self.schedule.apply(st.ComputeAtStep(self.name, parent.name, _name(axis)))

    def compute_inline(self) -> None:
        """Substitute this stage's expression into its consumers."""
        self.schedule.apply(st.ComputeInlineStep(self.name))

    def compute_root(self) -> None:
        """Compute this stage at the top level, whole (the default)."""
        self.schedule.apply(st.ComputeRootStep(self.name))

    # -- helpers
    def leaves_after_split(self, axis: str) -> list[str]:
        return [f"{axis}.outer", f"{axis}.inner"]

    def _iv(self, names: list[str]) -> tuple[IterVar, ...]:
        return tuple(IterVar(Var(n), 0, self.kinds[n]) for n in names)

    def leaf_itervars(self) -> tuple[IterVar, ...]:
        """The current loops, outermost first (extents are resolved at lowering)."""
        return self._iv(self.leaves)


def _name(axis: IterVar | Var | str) -> str:
    if isinstance(axis, str):
        return axis
    if isinstance(axis, (IterVar, Var)):
        return axis.name
    raise TypeError(f"expected an axis (IterVar or name), got {type(axis).__name__}")


def thread_axis(tag: str) -> str:
    """A GPU thread axis tag for ``bind`` (``blockIdx.x``, ``threadIdx.y``, ``vthread``, ...)."""
    if tag not in THREAD_TAGS:
        raise ScheduleError(f"thread_axis: unknown tag {tag!r}; known: {', '.join(THREAD_TAGS)}")
    return tag


class Schedule:
    """A DAG of operations and the steps applied to it; ``s[T]`` gives a tensor's stage."""

    def __init__(self, outputs: Sequence[Tensor]) -> None:
        self.outputs: tuple[str, ...] = tuple(t.name for t in outputs)
        self.source_outputs = tuple(outputs)
        self.stages: dict[str, Stage] = {}
        for op in topo_order(outputs):
            stage = Stage(self, op)
            stage.reset(op)
            self.stages[op.name] = stage
        self.steps: list[st.Step] = []

    def __getitem__(self, t: Tensor | Operation | str) -> Stage:
        name = t if isinstance(t, str) else t.name
        try:
            return self.stages[name]
        except KeyError:
            raise ScheduleError(f"no stage named {name!r} in this schedule") from None

    # -- schedule-level primitives
    def cache_write(self, tensor: Tensor, scope: str) -> Tensor:
        """Compute ``tensor`` into a new ``<name>.<scope>`` stage; ``tensor`` then copies from it."""
        self.apply(st.CacheWriteStep(tensor.name, scope))
        return self.stages[f"{tensor.name}.{scope}"].op.output(0)

    def cache_read(self, tensor: Tensor, scope: str, readers: Sequence[Tensor | Operation | Stage]) -> Tensor:
        """Copy ``tensor`` into a new ``<name>.<scope>`` stage that ``readers`` read instead."""
        names = tuple(r.name for r in readers)
        self.apply(st.CacheReadStep(tensor.name, scope, names))
        return self.stages[f"{tensor.name}.{scope}"].op.output(0)

    def rfactor(self, tensor: Tensor, axis: IterVar | str, factor_axis: int = 0) -> Tensor:
        """Turn reduce loop ``axis`` into a data axis of a new ``<name>.rf`` stage of partial results."""
        self.apply(st.RfactorStep(tensor.name, _name(axis), int(factor_axis)))
        return self.stages[f"{tensor.name}.rf"].op.output(0)

    # -- replay
    @classmethod
    def replay(cls, outputs: Sequence[Tensor], steps: Sequence[st.Step]) -> Schedule:
        """A fresh schedule of ``outputs`` with ``steps`` applied in order."""
        s = cls(outputs)
        for step in steps:
            s.apply(step)
        return s

    def apply(self, step: st.Step) -> None:
        """Apply one step and record it; an illegal step raises and records nothing."""
        handler = HANDLERS.get(type(step))
        if handler is None:
            raise ScheduleError(f"no handler for step {step!r}")
        name: str = getattr(step, "stage", "")
        stage = self.stages.get(name)
        if stage is None:
            raise ScheduleError(f"{step.kind}: no stage named {name!r}")
        local = not isinstance(step, (st.CacheWriteStep, st.CacheReadStep, st.RfactorStep))
        with self.transaction(stage.name if local else None):
            try:
                handler(self, stage, step)
            except ScheduleError as err:
                raise ScheduleError(f"{step.kind} on stage {stage.name}: {err}") from None
            self.steps.append(step)

    @contextlib.contextmanager
    def transaction(self, only: str | None = None) -> Iterator[None]:
        """Undo every change made inside the block if it raises: a rejected request (one step, or
        a composite such as ``tile``) leaves the schedule as it was. ``only`` names the one stage
        the block can change (a cheaper snapshot)."""
        saved_order = dict(self.stages)
        saved = {name: stage.snapshot() for name, stage in self.stages.items() if only in (None, name)}
        n_steps = len(self.steps)
        try:
            yield
        except BaseException:
            self.stages = saved_order
            for name, state in saved.items():
                self.stages[name].restore(state)
            del self.steps[n_steps:]
            raise

    def insert_stage(self, op: Operation, before: str, scope: str = "global") -> Stage:
        """Add a new stage for ``op`` just before stage ``before`` (keeps topological order)."""
        if op.name in self.stages:
            raise ScheduleError(f"a stage named {op.name!r} already exists")
        stage = Stage(self, op, scope=scope)
        stage.reset(op)
        items = list(self.stages.items())
        pos = [n for n, _ in items].index(before)
        items.insert(pos, (op.name, stage))
        self.stages = dict(items)
        return stage

    def readers(self, name: str) -> list[Stage]:
        """Stages whose expression reads tensor ``name`` directly."""
        return [
            s
            for s in self.stages.values()
            if isinstance(s.op, ComputeOp) and any(t.name == name for t in s.op.input_tensors)
        ]


def create_schedule(outputs: Tensor | Operation | Sequence[Tensor | Operation]) -> Schedule:
    """A schedule with the default loop nest for every stage of the DAG behind ``outputs``."""
    return Schedule(as_tensors(outputs))


# The step handlers (and effective_readers, re-exported for lowering).
from .primitives import HANDLERS, effective_readers  # noqa: E402, F401 - last: primitives imports this module
