"""The generated search space of a workload: its sketches, random programs, mutation, replay."""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..ops import Workload
from ..schedule import Schedule
from ..steps import Step
from ..target import Target
from .annotate import Annotation, apply_sketch, sample_annotation
from .mutate import crossover, mutate
from .sketch import Sketch, generate_sketches


@dataclass(frozen=True)
class SketchProgram:
    """One program of a generated space: a sketch (by index) and its annotation."""

    sketch: int
    annotation: Annotation


class SketchSpace:
    """Programs generated from a workload's compute DAG alone (no template)."""

    def __init__(self, workload: Workload, target: Target | str = "c") -> None:
        self.workload = workload
        self.target = Target.parse(target)
        self.outputs = workload.outputs
        self.sketches: list[Sketch] = generate_sketches(self.outputs, self.target.cores or 1)

    def sample(self, rng: random.Random) -> SketchProgram:
        """A random program: a random sketch, randomly annotated."""
        index = rng.randrange(len(self.sketches))
        return SketchProgram(index, sample_annotation(self.sketches[index], self.outputs, self.target, rng))

    def schedule(self, program: SketchProgram) -> Schedule:
        """The program's schedule, built on the workload's tensors."""
        return apply_sketch(self.sketches[program.sketch], program.annotation, self.outputs, self.target)

    def steps(self, program: SketchProgram) -> tuple[Step, ...]:
        """The program as replayable schedule steps."""
        return tuple(self.schedule(program).steps)

    def mutate(self, program: SketchProgram, rng: random.Random) -> SketchProgram:
        """A neighbour of ``program`` (same sketch)."""
        return SketchProgram(program.sketch, mutate(program.annotation, rng))

    def crossover(self, a: SketchProgram, b: SketchProgram, rng: random.Random) -> SketchProgram:
        """A child of two programs of the same sketch (``a`` itself when the sketches differ)."""
        if a.sketch != b.sketch:
            return a
        return SketchProgram(a.sketch, crossover(a.annotation, b.annotation, rng))

    def describe(self) -> str:
        """The sketches, one per line, for people."""
        lines = [f"{self.workload} on {self.target.kind}: {len(self.sketches)} sketch(es)"]
        lines += [f"  [{i}] {sk}" for i, sk in enumerate(self.sketches)]
        return "\n".join(lines)
