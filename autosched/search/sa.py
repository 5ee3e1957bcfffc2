"""AutoTVM's model-based tuner: parallel simulated annealing on the cost model's predictions.

``parallel_size`` chains walk the space at once (one batch prediction per step): each chain moves
to a neighbour (:func:`~autosched.search.tuning_space.mutate`: one knob of a template config, one
annotation of a sketch program) and accepts it with probability ``exp((new - old) / T)`` (scores
scaled by their spread), the temperature falling linearly from ``temperature`` to 0 over
``n_iter`` steps. The chains persist from one plan to the next (AutoTVM's persistent points), a
quarter of them restarted from the best measured programs. Every program visited that was never
measured enters a pool of the best ``diversity * plan_size`` predicted; the annealing stops early
when that pool has not changed for ``early_stop`` steps. The plan is picked from the pool by
:func:`~autosched.search.guided.diverse_pick`.

Registered as ``sa``, and as ``xgb`` (AutoTVM's name for this tuner with the XGBoost model).
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from ..task import Task
from .guided import ModelTuner, diverse_pick
from .learning import CostModel
from .tuner import register_tuner
from .tuning_space import Candidate, TuningSpace, mutate, sample

__all__ = ["SATuner"]


@register_tuner("xgb")
@register_tuner("sa")
class SATuner(ModelTuner):
    """Simulated annealing over the space's points on the model's predictions (module docstring)."""

    def __init__(
        self,
        task: Task,
        space: TuningSpace,
        seed: int | None = None,
        model: CostModel | str | None = None,
        *,
        plan_size: int = 16,
        epsilon: float = 0.05,
        parallel_size: int = 64,
        n_iter: int = 100,
        early_stop: int = 15,
        temperature: float = 1.0,
        diversity: float = 2.0,
        diversity_weight: float = 0.5,
    ) -> None:
        super().__init__(task, space, seed, model, plan_size=plan_size, epsilon=epsilon)
        self.parallel_size = parallel_size
        self.n_iter = n_iter
        self.early_stop = early_stop
        self.temperature = temperature
        self.diversity = diversity
        self.diversity_weight = diversity_weight
        self.points: list[Candidate] = []
        self.last_iterations = 0  # annealing steps of the last plan (early stop shows here)

    def _start_points(self) -> list[Candidate]:
        """The chains' positions: last plan's, a quarter restarted at the best measured programs,
        topped up with random programs."""
        restart = self.best_measured(max(1, self.parallel_size // 4))
        kept = self.points[: self.parallel_size - len(restart)]
        points = restart + kept
        while len(points) < self.parallel_size:
            points.append(sample(self.space, self.rng))
        return points

    def search(self, n: int) -> list[Candidate]:
        pool_size = max(n, int(math.ceil(self.diversity * n)))
        pool: list[tuple[float, int, str]] = []  # min-heap of (score, tie, key)
        members: dict[str, Candidate] = {}
        tie = 0

        def offer(cands: list[Candidate], scores: np.ndarray) -> bool:
            nonlocal tie
            changed = False
            for cand, score in zip(cands, scores.tolist(), strict=True):
                key = cand.key
                if key in members or key in self.seen:
                    continue
                if len(pool) < pool_size:
                    heapq.heappush(pool, (score, tie, key))
                elif score > pool[0][0]:
                    _, _, gone = heapq.heapreplace(pool, (score, tie, key))
                    del members[gone]
                else:
                    continue
                members[key] = cand
                tie += 1
                changed = True
            return changed

        points = self._start_points()
        scores = self.score(points)
        offer(points, scores)
        still, step = 0, 0
        for step in range(self.n_iter):  # noqa: B007  (the count is kept for last_iterations)
            temp = self.temperature * (1 - step / self.n_iter)
            moved = [mutate(self.space, p, self.rng) for p in points]
            new_scores = self.score(moved)
            spread = float(np.std(np.concatenate([scores, new_scores]))) or 1.0
            gain = (new_scores - scores) / spread
            accept = np.array(
                [g >= 0 or (temp > 0 and self.rng.random() < math.exp(g / temp)) for g in gain.tolist()]
            )
            points = [m if a else p for p, m, a in zip(points, moved, accept.tolist(), strict=True)]
            scores = np.where(accept, new_scores, scores)
            still = 0 if offer(moved, new_scores) else still + 1
            if still >= self.early_stop:
                break
        self.last_iterations = step + 1
        self.points = points
        ranked = sorted(pool, reverse=True)
        cands = [members[key] for _, _, key in ranked]
        return diverse_pick(cands, [s for s, _, _ in ranked], n, self.diversity_weight)
