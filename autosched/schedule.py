"""Schedules: a DAG plus a list of replayable steps, with TVM ``te``-style primitives.

``create_schedule(C)`` makes one stage per operation. ``s[C].split(...)`` and the other primitives
append a :mod:`~autosched.steps` record and apply it to the stage state; every illegal request raises
:class:`ScheduleError` naming the step. ``Schedule.replay(steps)`` rebuilds the same schedule from
the records alone, which is how tuning logs are turned back into programs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import steps as st
from .expr import (
    ComputeOp,
    Expr,
    IterVar,
    Load,
    Operation,
    PlaceholderOp,
    Reduce,
    Tensor,
    Var,
    as_tensors,
    rewrite,
    topo_order,
)
from .transform import make_cache_op, make_rfactor_ops

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
        handler = _HANDLERS.get(type(step))
        if handler is None:
            raise ScheduleError(f"no handler for step {step!r}")
        name: str = getattr(step, "stage", "")
        stage = self.stages.get(name)
        if stage is None:
            raise ScheduleError(f"{step.kind}: no stage named {name!r}")
        with self.transaction():
            try:
                handler(self, stage, step)
            except ScheduleError as err:
                raise ScheduleError(f"{step.kind} on stage {stage.name}: {err}") from None
            self.steps.append(step)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Undo every change made inside the block if it raises: a rejected request (one step, or
        a composite such as ``tile``) leaves the schedule as it was."""
        saved_order = dict(self.stages)
        saved = {name: stage.snapshot() for name, stage in self.stages.items()}
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


# ---------------------------------------------------------------------------- step handlers


def _leaf(stage: Stage, axis: str) -> int:
    if axis not in stage.leaves:
        if axis in stage.kinds:
            raise ScheduleError(f"axis {axis!r} is no longer a loop (it was split or fused)")
        raise ScheduleError(f"no axis {axis!r}; current loops: {stage.leaves}")
    return stage.leaves.index(axis)


def _compute_only(stage: Stage) -> ComputeOp:
    if not isinstance(stage.op, ComputeOp):
        raise ScheduleError(f"{stage.name} is a placeholder; it has no loops to schedule")
    return stage.op


def _split(s: Schedule, stage: Stage, step: st.SplitStep) -> None:
    _compute_only(stage)
    pos = _leaf(stage, step.axis)
    if (step.factor is None) == (step.nparts is None):
        raise ScheduleError("give exactly one of factor and nparts")
    value = step.factor if step.factor is not None else step.nparts
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ScheduleError(f"split factor/nparts must be a positive int, got {value!r}")
    outer, inner = stage.leaves_after_split(step.axis)
    if outer in stage.kinds or inner in stage.kinds:
        raise ScheduleError(f"axis names {outer}/{inner} already exist")
    kind = stage.kinds[step.axis]
    stage.kinds[outer] = stage.kinds[inner] = kind
    stage.relations.append(SplitRel(step.axis, outer, inner, step.factor, step.nparts))
    stage.leaves[pos : pos + 1] = [outer, inner]
    stage.annotations.pop(step.axis, None)


def _reorder(s: Schedule, stage: Stage, step: st.ReorderStep) -> None:
    _compute_only(stage)
    if len(set(step.order)) != len(step.order):
        raise ScheduleError(f"repeated axis in {list(step.order)}")
    positions = sorted(_leaf(stage, a) for a in step.order)
    for pos, name in zip(positions, step.order, strict=True):
        stage.leaves[pos] = name


def _fuse(s: Schedule, stage: Stage, step: st.FuseStep) -> None:
    _compute_only(stage)
    if len(step.axes) < 2:
        raise ScheduleError("fuse needs at least two axes")
    positions = [_leaf(stage, a) for a in step.axes]
    if positions != list(range(positions[0], positions[0] + len(positions))):
        raise ScheduleError(f"axes {list(step.axes)} are not adjacent loops in order (loops: {stage.leaves})")
    kinds = {stage.kinds[a] for a in step.axes}
    if len(kinds) > 1:
        raise ScheduleError("cannot fuse a data-parallel axis with a reduction axis")
    kind = stage.kinds[step.axes[0]]
    current = step.axes[0]
    for nxt in step.axes[1:]:
        base = current[: -len(".fused")] if current.endswith(".fused") else current
        fused = f"{base}.{nxt}.fused"
        if fused in stage.kinds:
            raise ScheduleError(f"axis name {fused} already exists")
        stage.relations.append(FuseRel(current, nxt, fused))
        stage.kinds[fused] = kind
        current = fused
    stage.leaves[positions[0] : positions[-1] + 1] = [current]
    for a in step.axes:
        stage.annotations.pop(a, None)


def _annotate(s: Schedule, stage: Stage, step: st.AnnotateStep) -> None:
    _compute_only(stage)
    _leaf(stage, step.axis)
    if step.annotation not in ANNOTATIONS:
        raise ScheduleError(f"unknown annotation {step.annotation!r}; known: {ANNOTATIONS}")
    if stage.kinds[step.axis] == "reduce" and step.annotation in ("vectorize", "parallel"):
        raise ScheduleError(
            f"cannot {step.annotation} reduction axis {step.axis!r}: iterations would race "
            "on the same output element (use rfactor first)"
        )
    old = stage.annotations.get(step.axis)
    if old is not None and old != step.annotation:
        raise ScheduleError(f"axis {step.axis!r} is already annotated {old!r}")
    stage.annotations[step.axis] = step.annotation


def _bind(s: Schedule, stage: Stage, step: st.BindStep) -> None:
    _compute_only(stage)
    _leaf(stage, step.axis)
    thread_axis(step.thread)
    if stage.kinds[step.axis] == "reduce":
        raise ScheduleError(f"cannot bind reduction axis {step.axis!r} to {step.thread}")
    if step.thread in stage.annotations.values():
        raise ScheduleError(f"{step.thread} is already bound in this stage")
    stage.annotations[step.axis] = step.thread


def _pragma(s: Schedule, stage: Stage, step: st.PragmaStep) -> None:
    _compute_only(stage)
    _leaf(stage, step.axis)
    if step.key not in PRAGMAS:
        raise ScheduleError(f"unknown pragma {step.key!r}; known: {PRAGMAS}")
    if step.value < 0:
        raise ScheduleError(f"pragma {step.key} needs a value >= 0, got {step.value}")
    stage.pragmas.setdefault(step.axis, {})[step.key] = step.value


def effective_readers(s: Schedule, name: str) -> list[Stage]:
    """Stages that read ``name`` directly or through inlined stages."""
    out: list[Stage] = []
    for r in s.readers(name):
        for x in effective_readers(s, r.name) if r.attach == ("inline",) else [r]:
            if x not in out:
                out.append(x)
    return out


def _downstream(s: Schedule, name: str) -> set[str]:
    seen: set[str] = set()
    todo = [name]
    while todo:
        for r in s.readers(todo.pop()):
            if r.name not in seen:
                seen.add(r.name)
                todo.append(r.name)
    return seen


def _compute_at(s: Schedule, stage: Stage, step: st.ComputeAtStep) -> None:
    _compute_only(stage)
    if stage.name in s.outputs:
        raise ScheduleError("an output stage cannot be computed at another stage")
    target = s.stages.get(step.target)
    if target is None:
        raise ScheduleError(f"no stage named {step.target!r}")
    _leaf(target, step.axis)
    if target.name not in _downstream(s, stage.name):
        raise ScheduleError(f"{step.target} does not consume {stage.name}; compute_at needs a consumer loop")
    node = target
    while node.attach[0] == "at":
        if node.attach[1] == stage.name:
            raise ScheduleError("compute_at would create a cycle")
        node = s.stages[node.attach[1]]
    stage.attach = ("at", target.name, step.axis)


def _compute_inline(s: Schedule, stage: Stage, step: st.ComputeInlineStep) -> None:
    op = _compute_only(stage)
    if stage.name in s.outputs:
        raise ScheduleError("an output stage cannot be inlined")
    if isinstance(op.body, Reduce):
        raise ScheduleError("a reduction cannot be inlined")
    if any(t.attach[:2] == ("at", stage.name) for t in s.stages.values()):
        raise ScheduleError("other stages are computed at this one; it cannot be inlined")
    stage.attach = ("inline",)


def _compute_root(s: Schedule, stage: Stage, step: st.ComputeRootStep) -> None:
    _compute_only(stage)
    stage.attach = ("root",)


def _cache_write(s: Schedule, stage: Stage, step: st.CacheWriteStep) -> None:
    op = _compute_only(stage)
    if step.scope not in SCOPES:
        raise ScheduleError(f"unknown scope {step.scope!r}; known: {SCOPES}")
    if stage.relations or stage.annotations:
        raise ScheduleError("cache_write must come before split/fuse/annotate of the stage")
    if stage.attach == ("inline",):
        raise ScheduleError("cannot cache_write an inlined stage")
    cache_op, new_op = make_cache_op(op, f"{op.name}.{step.scope}")
    s.insert_stage(cache_op, before=stage.name, scope=step.scope)
    stage.reset(new_op)


def _cache_read(s: Schedule, stage: Stage, step: st.CacheReadStep) -> None:
    if step.scope not in SCOPES:
        raise ScheduleError(f"unknown scope {step.scope!r}; known: {SCOPES}")
    if not step.readers:
        raise ScheduleError("give at least one reader")
    readers = []
    for r in step.readers:
        reader = s.stages.get(r)
        if reader is None or not isinstance(reader.op, ComputeOp):
            raise ScheduleError(f"reader {r!r} is not a compute stage of this schedule")
        if not any(t.name == stage.name for t in reader.op.input_tensors):
            raise ScheduleError(f"stage {r} does not read {stage.name}")
        readers.append(reader)
    shape = stage.op.shape
    cache = _copy_op(stage.op.output(0), f"{stage.name}.{step.scope}", shape)
    first = min(list(s.stages).index(r.name) for r in readers)
    s.insert_stage(cache.op, before=list(s.stages)[first], scope=step.scope)
    for reader in readers:
        old = reader.op
        assert isinstance(old, ComputeOp)

        def swap(e: Expr, src: str = stage.name, dst: Tensor = cache) -> Expr | None:
            if isinstance(e, Load) and e.tensor.name == src:
                return Load(dst, tuple(rewrite(i, swap) for i in e.indices))
            return None

        reader.op = ComputeOp(old.name, old.axis, rewrite(old.body, swap), old.tag, old.attrs)


def _copy_op(src: Tensor, name: str, shape: tuple[int, ...]) -> Tensor:
    axis = tuple(IterVar(Var(f"ax{d}"), n, "data") for d, n in enumerate(shape))
    return Tensor(ComputeOp(name, axis, Load(src, tuple(iv.var for iv in axis)), "cache"))


def _rfactor(s: Schedule, stage: Stage, step: st.RfactorStep) -> None:
    op = _compute_only(stage)
    if stage.kinds.get(step.axis) != "reduce":
        raise ScheduleError(f"{step.axis!r} is not a reduction axis of {stage.name}")
    _leaf(stage, step.axis)
    if not 0 <= step.factor_axis <= len(op.axis):
        raise ScheduleError(f"factor_axis must be in [0, {len(op.axis)}], got {step.factor_axis}")
    split = next(
        (r for r in stage.relations if isinstance(r, SplitRel) and step.axis in (r.outer, r.inner)), None
    )
    if split is not None and any(
        isinstance(r, SplitRel) and r.parent == split.parent and r is not split for r in stage.relations
    ):
        raise ScheduleError("rfactor supports an axis from at most one split of a root reduction axis")
    if split is not None and split.parent not in {iv.name for iv in op.reduce_axis}:
        raise ScheduleError("rfactor supports an axis from at most one split of a root reduction axis")
    try:
        rf_op, new_op = make_rfactor_ops(op, step.axis, split, step.factor_axis)
    except ValueError as err:
        raise ScheduleError(str(err)) from None
    s.insert_stage(rf_op, before=stage.name)
    stage.reset(new_op)


_HANDLERS: dict[type, Callable[[Schedule, Stage, Any], None]] = {
    st.SplitStep: _split,
    st.ReorderStep: _reorder,
    st.FuseStep: _fuse,
    st.AnnotateStep: _annotate,
    st.BindStep: _bind,
    st.PragmaStep: _pragma,
    st.ComputeAtStep: _compute_at,
    st.ComputeInlineStep: _compute_inline,
    st.ComputeRootStep: _compute_root,
    st.CacheWriteStep: _cache_write,
    st.CacheReadStep: _cache_read,
    st.RfactorStep: _rfactor,
}
