"""A model-free genetic algorithm (as Kernel Tuner's): the baseline that shows what a model adds.

The population is the ``population`` fastest programs measured so far (elitist, steady state:
every measured child competes for a place). Each child of a batch has two parents chosen by
tournament on measured speed (failed programs never breed), is made by crossover with probability
``crossover_prob`` and mutated with probability ``mutation_prob`` (always, when it came out equal to
a program seen before). Until ``population`` programs have valid times, programs are random.
"""

from __future__ import annotations

import random

from ..task import Task
from .learning import CostModel
from .tuner import Tuner, register_tuner
from .tuning_space import Candidate, TuningSpace, crossover, mutate

__all__ = ["GATuner"]


@register_tuner("ga")
class GATuner(Tuner):
    """A genetic algorithm on measured speed (see the module docstring)."""

    #: attempts to breed a program never seen before, per child, before drawing a random one
    ATTEMPTS = 8

    def __init__(
        self,
        task: Task,
        space: TuningSpace,
        seed: int | None = None,
        model: CostModel | str | None = None,
        *,
        population: int = 16,
        crossover_prob: float = 0.7,
        mutation_prob: float = 0.5,
        tournament_size: int = 2,
    ) -> None:
        super().__init__(task, space, seed, model)
        self.population = population
        self.crossover_prob = crossover_prob
        self.mutation_prob = mutation_prob
        self.tournament_size = tournament_size
        self.dry = False

    def parents(self) -> list[Candidate]:
        """The current population: the fastest valid programs measured, fastest first."""
        valid = sorted((cost, i) for i, (_, cost) in enumerate(self.measured) if cost < float("inf"))
        return [self.measured[i][0] for _, i in valid[: self.population]]

    def _select(self, parents: list[Candidate], rng: random.Random) -> Candidate:
        # parents are sorted fastest first: the lowest index drawn wins the tournament
        return parents[min(rng.randrange(len(parents)) for _ in range(self.tournament_size))]

    def _breed(self, parents: list[Candidate]) -> Candidate | None:
        for _ in range(self.ATTEMPTS):
            child = self._select(parents, self.rng)
            if self.rng.random() < self.crossover_prob:
                child = crossover(self.space, child, self._select(parents, self.rng), self.rng)
            if self.rng.random() < self.mutation_prob or child.key in self.seen:
                child = mutate(self.space, child, self.rng)
            if self.is_new(child):
                return child
        return None

    def next_batch(self, batch_size: int) -> list[Candidate]:
        parents = self.parents()
        batch: list[Candidate] = []
        while len(batch) < batch_size:
            child = self._breed(parents) if len(parents) >= self.population else None
            if child is None:
                drawn = self.sample_new(1)
                if not drawn:
                    break
                child = drawn[0]
            batch.append(child)
        self.dry = not batch
        return batch

    def has_next(self) -> bool:
        return not self.dry
