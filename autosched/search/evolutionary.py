"""Ansor's evolutionary search on the cost model's predictions (the default for sketch spaces).

Each plan starts a population of ``population`` programs: the best measured programs (a share
``measured_ratio`` of it), the best predicted of the previous plan's last generation not measured
since (a share ``carry_ratio``: the population keeps evolving from one plan to the next, so a plan
needs fewer new generations, and each new program costs a lowering and its features) and fresh
random samples. For ``generations`` generations the model scores
the population; every program never measured enters a pool of the best predicted; parents are
chosen by tournament on the predicted score, and children are made by crossover (probability
``crossover_prob``, :func:`~autosched.search.tuning_space.crossover`) and mutation (probability
``mutation_prob``: tile sizes, parallel granularity, unroll depth, compute location). The plan is
the ``plan_size`` best predicted programs of the pool, made again every ``replan_after``
measurements with the model refitted since (Ansor's search round); a share ``epsilon`` of the
measured programs is still drawn at random (:class:`~autosched.search.guided.ModelTuner`).
"""

from __future__ import annotations

import contextlib

import numpy as np

from ..schedule import ScheduleError
from ..space.generated import SketchProgram
from ..task import Task
from .guided import ModelTuner
from .learning import CostModel
from .tuner import register_tuner
from .tuning_space import Candidate, SketchTuningSpace, TuningSpace, crossover, mutate, sample

__all__ = ["EvolutionaryTuner", "tournament"]


def tournament(scores: np.ndarray, size: int, rng: np.random.Generator) -> int:
    """The index of the best of ``size`` members drawn at random (with replacement)."""
    drawn = rng.integers(len(scores), size=size)
    return int(drawn[np.argmax(scores[drawn])])


@register_tuner("evolutionary")
class EvolutionaryTuner(ModelTuner):
    """Evolutionary search guided by the cost model (see the module docstring)."""

    def __init__(
        self,
        task: Task,
        space: TuningSpace,
        seed: int | None = None,
        model: CostModel | str | None = None,
        *,
        plan_size: int = 32,
        epsilon: float = 0.05,
        replan_after: int = 16,
        population: int = 128,
        generations: int = 1,
        measured_ratio: float = 0.2,
        carry_ratio: float = 0.5,
        crossover_prob: float = 0.15,
        mutation_prob: float = 0.85,
        tournament_size: int = 3,
    ) -> None:
        super().__init__(task, space, seed, model, plan_size=plan_size, epsilon=epsilon,
                         replan_after=replan_after)
        self.population = population
        self.generations = generations
        self.measured_ratio = measured_ratio
        self.carry_ratio = carry_ratio
        self.survivors: list[Candidate] = []  # the last plan's last generation, best predicted first
        self.crossover_prob = crossover_prob
        self.mutation_prob = mutation_prob
        self.tournament_size = tournament_size
        self.np_rng = np.random.default_rng(self.rng.randrange(2**32))

    def initial_population(self) -> list[Candidate]:
        """The best measured programs, the previous plan's survivors, then random samples."""
        members = self.best_measured(int(self.population * self.measured_ratio))
        keys = {c.key for c in members}

        def add(cand: Candidate | None) -> None:
            if cand is not None and cand.key not in keys and len(members) < self.population:
                keys.add(cand.key)
                members.append(cand)

        carried = len(members) + int(self.population * self.carry_ratio)
        for survivor in self.survivors:
            if len(members) >= carried:
                break
            if self.is_unseen(survivor):
                add(survivor)

        space = self.space
        if isinstance(space, SketchTuningSpace):  # made together (see _children)
            for _ in range(4):
                if len(members) >= self.population:
                    break
                points = [space.sample_point(self.rng) for _ in range(self.population - len(members))]
                for cand in space.candidates(points):
                    add(cand)
            return members
        for _ in range(4 * self.population):
            if len(members) >= self.population:
                break
            add(sample(self.space, self.rng))
        return members

    def _child(self, parents: list[Candidate], scores: np.ndarray) -> Candidate:
        first = parents[tournament(scores, self.tournament_size, self.np_rng)]
        child = first
        if self.rng.random() < self.crossover_prob:
            second = parents[tournament(scores, self.tournament_size, self.np_rng)]
            child = crossover(self.space, first, second, self.rng)
        if child is first or self.rng.random() < self.mutation_prob:
            child = mutate(self.space, child, self.rng)
        return child

    def _children(self, parents: list[Candidate], scores: np.ndarray) -> list[Candidate]:
        """The next generation: in a sketch space, each child's sketch program is made here and
        their steps together (by helper processes where a tuning run has them); elsewhere child by
        child."""
        space = self.space
        try:
            points = [space.point(p) for p in parents] if isinstance(space, SketchTuningSpace) else None
        except ValueError:  # a parent from outside the space
            points = None
        if points is None or not isinstance(space, SketchTuningSpace):
            return [self._child(parents, scores) for _ in range(self.population)]
        kids: list[SketchProgram | None] = []
        for _ in range(self.population):
            first = points[tournament(scores, self.tournament_size, self.np_rng)]
            child = first
            if self.rng.random() < self.crossover_prob:
                second = points[tournament(scores, self.tournament_size, self.np_rng)]
                with contextlib.suppress(ScheduleError, ValueError):  # as crossover(): ``first``
                    child = space.crossover_point(first, second, self.rng)
            kid: SketchProgram | None = child
            if child is first or self.rng.random() < self.mutation_prob:
                try:
                    kid = space.mutate_point(child, self.rng)
                except (ScheduleError, ValueError):  # as mutate(): a fresh sample instead
                    kid = None
            kids.append(kid)
        made = iter(space.candidates([k for k in kids if k is not None]))
        out = [next(made) if k is not None else None for k in kids]
        return [c if c is not None else sample(space, self.rng) for c in out]

    def search(self, n: int) -> list[Candidate]:
        pool: dict[str, tuple[float, Candidate]] = {}
        population = self.initial_population()
        for generation in range(self.generations + 1):
            scores = self.score(population)
            for cand, score in zip(population, scores.tolist(), strict=True):
                key = cand.key
                if key not in self.seen and key not in pool:
                    pool[key] = (score, cand)
            if generation == self.generations:
                break
            population = self._children(population, scores)
        order = np.argsort(-scores, kind="stable")
        self.survivors = [population[i] for i in order.tolist()]
        ranked = sorted(pool.values(), key=lambda sc: -sc[0])
        return [cand for _, cand in ranked[:n]]
