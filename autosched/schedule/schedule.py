"""Schedules: a DAG plus a list of replayable steps, with TVM ``te``-style primitives.

``create_schedule(C)`` makes one stage per operation. ``s[C].split(...)`` and the other primitives
append a :mod:`~autosched.schedule.steps` record and apply it to the stage state (the handlers are
in :mod:`~autosched.schedule.primitives`); every illegal request raises :class:`ScheduleError`
naming the step. ``Schedule.replay(steps)`` rebuilds the same schedule from the records alone,
which is how tuning logs are turned back into programs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from ..expr import IterVar, Operation, ScanOp, Tensor, as_tensors, topo_order, unique_names
from ..te.rename import all_ops
from . import steps as st
from .group import StageGroup, group_members
from .primitives import HANDLERS
from .stage import ScheduleError, Stage, axis_name


class Schedule:
    """A DAG of operations and the steps applied to it; ``s[T]`` gives a tensor's stage."""

    def __init__(self, outputs: Sequence[Tensor]) -> None:
        #: the DAG with unique operation names; ``tensor`` maps the caller's tensors onto it
        self.renamed = unique_names(outputs)
        self.source_outputs = self.renamed.outputs
        self.outputs: tuple[str, ...] = tuple(dict.fromkeys(t.op.name for t in self.source_outputs))
        self.stages: dict[str, Stage] = {}
        for op in topo_order(self.source_outputs):
            parts = op.parts if isinstance(op, ScanOp) else ()  # stages of the scan's init and body
            for part in (*parts, op):
                if part.name not in self.stages:
                    stage = Stage(self, part)
                    stage.reset(part)
                    self.stages[part.name] = stage
        self.steps: list[st.Step] = []
        #: every operation of the DAG or of a stage, ever (by id, kept alive): see :meth:`owns`
        self._ops: dict[int, Operation] = {id(op): op for op in all_ops(self.source_outputs)}
        self._note_ops()

    def _note_ops(self, only: Stage | None = None) -> None:
        for stage in (only,) if only is not None else self.stages.values():
            self._ops[id(stage.op)] = stage.op

    def owns(self, t: Tensor) -> bool:
        """Whether ``t`` is a tensor of this schedule: of the DAG it was made for (the caller's
        tensor or the schedule's renamed copy) or of a stage one of its steps made (a cache, an rf
        stage), as opposed to another tensor that only shares a name with one of them."""
        op = self.tensor(t).op
        return self._ops.get(id(op)) is op

    def tensor(self, t: Tensor) -> Tensor:
        """This schedule's tensor for the caller's ``t``: its copy when two operations of the DAG
        shared ``t``'s name (see :func:`~autosched.expr.unique_names`), else ``t``."""
        return self.renamed.tensor(t)

    def stage_name(self, t: Tensor | Operation | Stage | str) -> str:
        """The name of the stage of a tensor, an operation (the caller's or the schedule's) or a stage."""
        if isinstance(t, str):
            return t
        if isinstance(t, Stage):
            return t.name
        return self.renamed.op(t.op if isinstance(t, Tensor) else t).name

    def __getitem__(self, t: Tensor | Operation | str) -> Stage:
        name = self.stage_name(t)
        try:
            return self.stages[name]
        except KeyError:
            raise ScheduleError(f"no stage named {name!r} in this schedule") from None

    # -- schedule-level primitives
    def cache_write(self, tensor: Tensor | Sequence[Tensor], scope: str) -> Any:
        """Compute ``tensor`` into a new ``<name>.<scope>`` stage; ``tensor`` then copies from it.

        Every output of a tuple compute moves to the cache together; given a list of outputs (as
        TVM takes them) the result is the list of their caches, else the one cache tensor."""
        given = [tensor] if isinstance(tensor, Tensor) else list(tensor)
        names = {self.stage_name(t) for t in given}
        if len(names) != 1:
            raise ScheduleError("cache_write: give one tensor, or outputs of one tuple compute")
        name = names.pop()
        self.apply(st.CacheWriteStep(name, scope))
        cache = self.stages[f"{name}.{scope}"].op
        caches = [cache.output(t.value_index) for t in given]
        return caches[0] if isinstance(tensor, Tensor) else caches

    def cache_read(self, tensor: Tensor, scope: str, readers: Sequence[Tensor | Operation | Stage]) -> Tensor:
        """Copy ``tensor`` into a new ``<name>.<scope>`` stage that ``readers`` read instead (all
        outputs of a tuple compute are copied, in one stage; the result is ``tensor``'s copy)."""
        names = tuple(self.stage_name(r) for r in readers)
        name = self.stage_name(tensor)
        self.apply(st.CacheReadStep(name, scope, names))
        return self.stages[f"{name}.{scope}"].op.output(tensor.value_index)

    def rfactor(self, tensor: Tensor, axis: IterVar | str, factor_axis: int = 0) -> Any:
        """Turn reduce loop ``axis`` into a data axis of a new ``<name>.rf`` stage of partial results
        (the rf tensor; for a tuple reduction such as argmax, the list of its outputs, as TVM)."""
        name = self.stage_name(tensor)
        self.apply(st.RfactorStep(name, axis_name(axis), int(factor_axis)))
        rf = self.stages[f"{name}.rf"].op
        return rf.output(0) if rf.num_outputs == 1 else [rf.output(k) for k in range(rf.num_outputs)]

    def dot_layout(self, tensor: Tensor, group: int, lanes: int = 16) -> Tensor:
        """Lay the second operand of ``tensor``'s stage, a reduction ``sum(A[i, k].astype(t) *
        B[k, j].astype(t), k)``, out in the ``[N/lanes, K/group, lanes, group]`` panels of the
        dot-product intrinsics, in a new ``<B>.packed`` stage it then reads (its reduction becomes
        ``k.o``, ``k.i``); returns the packed tensor."""
        name = self.stage_name(tensor)
        self.apply(st.DotLayoutStep(name, int(group), int(lanes)))
        names = list(self.stages)
        return self.stages[names[names.index(name) - 1]].op.output(0)  # inserted just before the stage

    def normalize(self) -> Schedule:
        """te's normalize (loops start at 0): autosched's loops always do, so this changes nothing."""
        return self

    def create_group(
        self,
        outputs: Tensor | Operation | Sequence[Tensor | Operation],
        inputs: Tensor | Operation | Sequence[Tensor | Operation] | None = None,
        include_inputs: bool = False,
    ) -> StageGroup:
        """The stages from ``inputs`` (excluded unless ``include_inputs``) to ``outputs``, to attach
        together (``g.compute_at(s[D], x)``); each member records its own step."""
        ins = None if inputs is None else [self.tensor(t) for t in as_tensors(inputs)]
        outs = [self.tensor(t) for t in as_tensors(outputs)]
        return StageGroup(self, group_members(self, outs, ins, include_inputs))

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
        local = not isinstance(step, (st.CacheWriteStep, st.CacheReadStep, st.RfactorStep, st.DotLayoutStep))
        with self.transaction(stage.name if local else None):
            try:
                handler(self, stage, step)
            except ScheduleError as err:
                raise ScheduleError(f"{step.kind} on stage {stage.name}: {err}") from None
            self.steps.append(step)
        self._note_ops(stage if local else None)

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
            if not s.is_placeholder and any(t.op.name == name for t in s.op.input_tensors)
        ]


def create_schedule(outputs: Tensor | Operation | Sequence[Tensor | Operation]) -> Schedule:
    """A schedule with the default loop nest for every stage of the DAG behind ``outputs``."""
    return Schedule(as_tensors(outputs))
