"""The two kinds of search space behind one small interface for tuners.

A tuner sees a :class:`TuningSpace`: it draws random :class:`Candidate` s, and walks the space in
a fixed order by index (a grid). A candidate is a program (its schedule steps) plus a JSON
description of where in the space it came from, which goes to the tuning log, and its ``point``
in the space (a config index, a sketch program), which stays in memory.

Spaces that local search can walk are also an :class:`EvolvableSpace`: ``mutate`` gives a
neighbour of a candidate (one knob changed, one annotation mutated) and ``crossover`` a child of
two. Both accept candidates read back from a log (no ``point``: it is decoded from ``program``).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..model.feature_workers import sketch_steps
from ..records import steps_key
from ..schedule import ScheduleError
from ..schedule.steps import Step
from ..space.annotate import Annotation
from ..space.generated import SketchProgram
from ..space.gpu_space import sketch_space
from ..space.templates import has_template, instantiate, template_space
from ..space.templates.handwritten import hand_written_config
from ..task import Task


class SpaceError(ValueError):
    """A space cannot be built for a task (for example: no template for the workload)."""


@dataclass(frozen=True)
class Candidate:
    """A program to measure: its steps and where it came from (``program``, JSON)."""

    steps: tuple[Step, ...]
    program: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    point: Any = field(default=None, compare=False, hash=False, repr=False)

    @functools.cached_property
    def key(self) -> str:
        """:func:`~autosched.records.steps_key` of the steps (computed once)."""
        return steps_key(self.steps)


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


@runtime_checkable
class EvolvableSpace(TuningSpace, Protocol):
    """A space with neighbours and children, for simulated annealing and evolutionary search."""

    def mutate(self, candidate: Candidate, rng: random.Random) -> Candidate:
        """A neighbour of ``candidate`` (may be ``candidate``'s program when nothing applies)."""
        ...

    def crossover(self, a: Candidate, b: Candidate, rng: random.Random) -> Candidate:
        """A child of ``a`` and ``b`` (``a``'s program when they cannot be crossed)."""
        ...


def sample(space: TuningSpace, rng: random.Random, attempts: int = 64) -> Candidate:
    """``space.sample(rng)``, drawn again (up to ``attempts`` times) when the point drawn is not a
    program (a template config whose schedule is illegal)."""
    for _ in range(attempts - 1):
        try:
            return space.sample(rng)
        except ScheduleError:
            continue
    return space.sample(rng)


def mutate(space: TuningSpace, candidate: Candidate, rng: random.Random) -> Candidate:
    """``space.mutate(candidate)``; a fresh sample where the space cannot mutate (or the mutant is
    not a program)."""
    if hasattr(space, "mutate"):  # an EvolvableSpace (isinstance on a Protocol is slow)
        try:
            return space.mutate(candidate, rng)
        except (ScheduleError, ValueError):
            pass
    return sample(space, rng)


def crossover(space: TuningSpace, a: Candidate, b: Candidate, rng: random.Random) -> Candidate:
    """``space.crossover(a, b)``; ``a`` where the space cannot cross programs."""
    if hasattr(space, "crossover"):
        try:
            return space.crossover(a, b, rng)
        except (ScheduleError, ValueError):
            pass
    return a


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
        self.radices = list(self.space.knobs.values())  # knob sizes, the first varies fastest

    def _candidate(self, index: int) -> Candidate:
        config = self.space.get(index)
        sched = self._instantiate(self.task.workload, self.task.target, config)
        return Candidate(tuple(sched.steps), {"space": "template", **config.to_json()}, index)

    def _digits(self, candidate: Candidate) -> list[int]:
        """The knob positions of ``candidate`` (its config index in mixed radix)."""
        index = candidate.point if candidate.point is not None else candidate.program.get("index")
        if not isinstance(index, int) or not 0 <= index < len(self.space):
            raise ValueError(f"not a config of this template: {candidate.program!r}")
        digits = []
        for radix in self.radices:
            index, digit = divmod(index, radix)
            digits.append(digit)
        return digits

    def _index(self, digits: list[int]) -> int:
        index = 0
        for radix, digit in zip(reversed(self.radices), reversed(digits), strict=True):
            index = index * radix + digit
        return index

    def mutate(self, candidate: Candidate, rng: random.Random) -> Candidate:
        """One knob set to another of its values."""
        digits = self._digits(candidate)
        knobs = [i for i, radix in enumerate(self.radices) if radix > 1]
        if knobs:
            k = rng.choice(knobs)
            digits[k] = rng.choice([d for d in range(self.radices[k]) if d != digits[k]])
        return self._candidate(self._index(digits))

    def crossover(self, a: Candidate, b: Candidate, rng: random.Random) -> Candidate:
        """Each knob from one parent or the other (uniform crossover)."""
        pairs = zip(self._digits(a), self._digits(b), strict=True)
        return self._candidate(self._index([x if rng.random() < 0.5 else y for x, y in pairs]))

    def sample(self, rng: random.Random) -> Candidate:
        return self._candidate(rng.randrange(len(self.space)))

    def default_candidate(self) -> Candidate | None:
        """The point that is the task's hand-written schedule, if the template has it."""
        config = hand_written_config(self.task.workload, self.task.target)
        return self._candidate(config.index) if config is not None else None

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
        self.space = sketch_space(task.workload, task.target)

    def _candidate(
        self, program: Any, steps: tuple[Step, ...] | None = None, annotation: dict[str, Any] | None = None
    ) -> Candidate:
        if steps is None:  # built here: its first lowering (features, most often) takes this schedule
            sched = self.space.schedule(program)
            steps = tuple(sched.steps)
            self.task.keep_schedule(steps, sched)
        return Candidate(
            steps,
            {"space": "sketch", "sketch": program.sketch,
             "annotation": annotation if annotation is not None else program.annotation.to_json()},
            program,
        )

    # -- points (sketch programs) made one by one, their candidates made together: see
    # -- EvolutionaryTuner (a batch of children can be replayed, lowered and described elsewhere)
    def point(self, candidate: Candidate) -> SketchProgram:
        """``candidate``'s sketch program (ValueError if it is not one of this space)."""
        return self._program(candidate)

    def sample_point(self, rng: random.Random) -> SketchProgram:
        """A random sketch program."""
        return self.space.sample(rng)

    def mutate_point(self, point: SketchProgram, rng: random.Random) -> SketchProgram:
        """A neighbour of ``point`` (see :meth:`mutate`)."""
        return self.space.mutate(point, rng)

    def crossover_point(self, a: SketchProgram, b: SketchProgram, rng: random.Random) -> SketchProgram:
        """A child of ``a`` and ``b`` (``a`` itself when their sketches differ)."""
        return self.space.crossover(a, b, rng)

    def candidates(self, points: Sequence[SketchProgram]) -> list[Candidate | None]:
        """The candidates of ``points``, None where a point is no program; during a tuning run with
        feature helpers (``AUTOSCHED_FEATURE_WORKERS``) a large batch is made by them, and each
        program described for the cost model on the way
        (:func:`~autosched.model.feature_workers.sketch_steps`)."""
        annotations = [p.annotation.to_json() for p in points]
        made = sketch_steps(self.task, [(p.sketch, a) for p, a in zip(points, annotations, strict=True)])
        out: list[Candidate | None] = []
        for i, point in enumerate(points):
            steps = made[i] if made is not None else None
            try:
                out.append(self._candidate(point, steps, annotations[i]))
            except (ScheduleError, ValueError):
                out.append(None)
        return out

    def _program(self, candidate: Candidate) -> Any:
        """The sketch program of ``candidate`` (decoded from its ``program`` if it came from a log)."""
        if candidate.point is not None:
            return candidate.point
        data = candidate.program
        sketch = data.get("sketch")
        if data.get("space") != "sketch" or not isinstance(sketch, int) or not 0 <= sketch < len(
            self.space.sketches
        ):
            raise ValueError(f"not a program of this sketch space: {data!r}")
        try:
            return SketchProgram(sketch, Annotation.from_json(data["annotation"]))
        except (KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"not a program of this sketch space: {err}") from None

    def mutate(self, candidate: Candidate, rng: random.Random) -> Candidate:
        """One mutation of the annotation (tile sizes, parallel granularity, unroll, location)."""
        return self._candidate(self.space.mutate(self._program(candidate), rng))

    def crossover(self, a: Candidate, b: Candidate, rng: random.Random) -> Candidate:
        """Per stage, the choices of one parent or the other (same sketch; else ``a``)."""
        return self._candidate(self.space.crossover(self._program(a), self._program(b), rng))

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


#: space kinds by name, as ``--space`` and ``asc.tune(space=...)`` take them (and ``auto``)
SPACES: dict[str, Callable[[Task], TuningSpace]] = {
    "sketch": SketchTuningSpace,
    "template": TemplateTuningSpace,
}
#: the space name that picks, per task, its template where one is registered, else the sketches
AUTO = "auto"


def space_kind(task: Task, kind: str) -> str:
    """The space ``kind`` names for ``task``: itself, or for ``auto`` ``template`` where the
    workload has a template on the task's target (packed convolutions, the built-in matmul and
    convolutions on CPU), else ``sketch``."""
    if kind == AUTO:
        return "template" if has_template(task.workload, task.target) else "sketch"
    if kind not in SPACES:
        raise SpaceError(f"unknown space {kind!r}; spaces: {', '.join([*SPACES, AUTO])}")
    return kind


def make_space(task: Task, kind: str) -> TuningSpace:
    """The ``kind`` space (``sketch``, ``template`` or ``auto``: :func:`space_kind`) of ``task``."""
    return SPACES[space_kind(task, kind)](task)
