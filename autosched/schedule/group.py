"""Stage groups (te's ``create_group``): the stages between some inputs and outputs, attached as
one. Attaching a group records one ``compute_at`` (or ``compute_root`` / ``compute_inline``) step
per member, so a group needs no step of its own and replays from ordinary steps."""

from __future__ import annotations

from collections.abc import Sequence

from ..expr import IterVar, Operation, Tensor, as_tensors
from . import steps as st
from .stage import ScheduleError, ScheduleLike, Stage, axis_name


class StageGroup:
    """The member stages of a group, in the schedule's (topological) order."""

    def __init__(self, schedule: ScheduleLike, members: Sequence[str]) -> None:
        self.schedule = schedule
        self.members = tuple(members)

    def __repr__(self) -> str:
        return f"StageGroup({', '.join(self.members)})"

    def _each(self, make: type[st.Step], *args: str) -> None:
        with self.schedule.transaction():
            for name in self.members:
                if self.schedule.stages[name].attach == ("root",):
                    self.schedule.apply(make(name, *args))  # type: ignore[call-arg]

    def compute_at(self, parent: Stage, axis: IterVar | str) -> None:
        """Compute every member not already attached inside the group at loop ``axis`` of ``parent``."""
        self._each(st.ComputeAtStep, parent.name, axis_name(axis))

    def compute_root(self) -> None:
        """Compute every member at the top level (the default)."""
        with self.schedule.transaction():
            for name in self.members:
                self.schedule.apply(st.ComputeRootStep(name))

    def compute_inline(self) -> None:
        """Inline every member into its consumers."""
        with self.schedule.transaction():
            for name in reversed(self.members):
                self.schedule.apply(st.ComputeInlineStep(name))


def group_members(
    schedule: ScheduleLike,
    outputs: Tensor | Operation | Sequence[Tensor | Operation],
    inputs: Tensor | Operation | Sequence[Tensor | Operation] | None,
    include_inputs: bool,
) -> list[str]:
    """The computed stages that ``outputs`` depend on, up to (and, with ``include_inputs``,
    including) ``inputs``, in schedule order."""
    outs = as_tensors(outputs)
    ins = {t.op.name for t in as_tensors(inputs)} if inputs is not None else set()
    found: set[str] = set()
    todo = [t.op.name for t in outs]
    while todo:
        name = todo.pop()
        if name in found:
            continue
        stage = schedule.stages.get(name)
        if stage is None:
            raise ScheduleError(f"create_group: no stage named {name!r}")
        if name in ins:
            if include_inputs and not stage.is_placeholder:
                found.add(name)
            continue
        if stage.is_placeholder:
            continue
        found.add(name)
        todo.extend(t.op.name for t in stage.op.input_tensors)
    return [n for n in schedule.stages if n in found]
