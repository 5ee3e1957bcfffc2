"""The two kinds of search space behind one small interface for tuners.

A tuner sees a :class:`TuningSpace`: it draws random :class:`Candidate` s, and walks the space in
a fixed order by index (a grid). A candidate is a program (its schedule steps) plus a JSON
description of where in the space it came from, which goes to the tuning log.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..schedule import ScheduleError
from ..schedule.steps import Step
from ..space.generated import SketchSpace
from ..space.templates import instantiate, template_space
from ..task import Task


class SpaceError(ValueError):
    """A space cannot be built for a task (for example: no template for the workload)."""


@dataclass(frozen=True)
class Candidate:
    """A program to measure: its steps and where it came from (``program``, JSON)."""

    steps: tuple[Step, ...]
    program: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


class TuningSpace(Protocol):
    """What tuners need from a space."""

    kind: str

    def sample(self, rng: random.Random) -> Candidate:
        """A random program."""
        ...

    def grid_size(self) -> int:
        """The number of points of the space's enumeration."""
        ...

    def grid_point(self, index: int) -> Candidate | None:
        """Point ``index`` of the enumeration, or None if that point is not a valid program."""
        ...


class TemplateTuningSpace:
    """A knob template's :class:`~autosched.space.knobs.ConfigSpace`; points are config indices."""

    kind = "template"

    def __init__(self, task: Task) -> None:
        self.task = task
        try:
            self.space = template_space(task.workload, task.target)
        except KeyError as err:
            raise SpaceError(str(err.args[0])) from None
        self._instantiate = instantiate

    def _candidate(self, index: int) -> Candidate:
        config = self.space.get(index)
        sched = self._instantiate(self.task.workload, self.task.target, config)
        return Candidate(tuple(sched.steps), {"space": "template", **config.to_json()})

    def sample(self, rng: random.Random) -> Candidate:
        return self._candidate(rng.randrange(len(self.space)))

    def grid_size(self) -> int:
        return len(self.space)

    def grid_point(self, index: int) -> Candidate | None:
        try:
            return self._candidate(index)
        except ScheduleError:
            return None


class SketchTuningSpace:
    """The generated space (sketches + annotation) of the task's workload."""

    kind = "sketch"

    def __init__(self, task: Task) -> None:
        self.task = task
        self.space = SketchSpace(task.workload, task.target)

    def _candidate(self, program: Any) -> Candidate:
        steps = self.space.steps(program)
        return Candidate(
            steps, {"space": "sketch", "sketch": program.sketch, "annotation": program.annotation.to_json()}
        )

    def sample(self, rng: random.Random) -> Candidate:
        return self._candidate(self.space.sample(rng))

    def grid_size(self) -> int:
        return self.space.grid_size()

    def grid_point(self, index: int) -> Candidate | None:
        try:
            program = self.space.grid_point(index)
            if not self.space.is_valid(program):
                return None
            return self._candidate(program)
        except (ScheduleError, ValueError):
            return None


#: space kinds by name, as ``--space`` and ``asc.tune(space=...)`` take them
SPACES: dict[str, Callable[[Task], TuningSpace]] = {
    "sketch": SketchTuningSpace,
    "template": TemplateTuningSpace,
}


def make_space(task: Task, kind: str) -> TuningSpace:
    """The ``kind`` space (``sketch`` or ``template``) of ``task``."""
    try:
        factory = SPACES[kind]
    except KeyError:
        raise SpaceError(f"unknown space {kind!r}; spaces: {', '.join(SPACES)}") from None
    return factory(task)
