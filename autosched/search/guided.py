"""The common part of model-guided tuners: a plan of programs the model likes, epsilon-greedy.

A :class:`ModelTuner` proposes programs from a *plan*: the ``plan_size`` best programs (by the
model's prediction) that a search over the space (:meth:`ModelTuner.search`, simulated annealing
or evolution) found and that were never measured. The plan is made again once it is used up, or
once ``replan_after`` trials were measured since it was made: a search round per that many
measurements, as Ansor's rounds. The model is read only to make a plan, so it is refitted on all
records only after a measured batch that a new plan follows (and after every batch until its first
fit); after the other batches it only scores them (:attr:`Tuner.model_quality`): fits in between
would change nothing the tuner does. A share
``epsilon`` of the programs is drawn at random instead, and until the model has been fitted at all
(too few records) every program is random.

:func:`diverse_pick` is AutoTVM's diversity-aware (submodular) batch selection: it greedily picks
programs with a high score whose steps are not yet covered by the programs already picked.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from ..task import Task
from .learning import CostModel
from .tuner import Tuner
from .tuning_space import Candidate, TuningSpace

__all__ = ["ModelTuner", "diverse_pick"]


def diverse_pick(
    candidates: Sequence[Candidate],
    scores: Sequence[float],
    n: int,
    weight: float = 0.5,
    units: Sequence[frozenset[Hashable]] | None = None,
) -> list[Candidate]:
    """Greedily pick ``n`` of ``candidates``: each time the one maximizing its score (scaled to
    [0, 1] over the candidates) plus ``weight`` times the share of its units (by default its
    steps) that no program picked before has. A submodular objective: programs too similar to
    ones already picked lose to slightly worse-scored ones that differ."""
    if n >= len(candidates):
        order = np.argsort(-np.asarray(scores, dtype=float), kind="stable")
        return [candidates[i] for i in order]
    s = np.asarray(scores, dtype=float)
    span = float(s.max() - s.min())
    norm = (s - s.min()) / span if span > 0 else np.zeros_like(s)
    sets = list(units) if units is not None else [frozenset(c.steps) for c in candidates]
    covered: set[Hashable] = set()
    remaining = list(range(len(candidates)))
    picked: list[Candidate] = []
    for _ in range(n):
        gains = [norm[i] + weight * len(sets[i] - covered) / max(1, len(sets[i])) for i in remaining]
        best = remaining.pop(int(np.argmax(gains)))
        picked.append(candidates[best])
        covered |= sets[best]
    return picked


class ModelTuner(Tuner):
    """A tuner that measures the programs its cost model predicts fastest (see the module docstring).

    Subclasses implement :meth:`search`. ``plan_size`` programs per plan, ``epsilon`` the share of
    random programs.
    """

    default_model = "xgb"

    def __init__(
        self,
        task: Task,
        space: TuningSpace,
        seed: int | None = None,
        model: CostModel | str | None = None,
        *,
        plan_size: int = 32,
        epsilon: float = 0.05,
        replan_after: int | None = None,
    ) -> None:
        super().__init__(task, space, seed, model)
        self.plan_size = plan_size
        self.epsilon = epsilon
        self.replan_after = replan_after or plan_size
        self.plan: list[Candidate] = []
        self.planned_at = -1  # trials when the plan was made
        self.planned_with = -1  # the model's fit generation the plan was made with
        self.plans = 0
        self.dry = False
        #: programs proposed from plans and drawn at random (epsilon, or before the model's fit)
        self.proposed = {"planned": 0, "random": 0}

    # -- to implement
    def search(self, n: int) -> list[Candidate]:
        """Up to ``n`` programs never measured nor proposed, best predicted first."""
        raise NotImplementedError

    # -- helpers for subclasses
    def score(self, candidates: Sequence[Candidate]) -> np.ndarray:
        """The model's scores of ``candidates`` (higher: faster)."""
        assert self.learner is not None
        return self.learner.predict([self.model_input(c) for c in candidates], [c.key for c in candidates])

    def best_measured(self, n: int) -> list[Candidate]:
        """The ``n`` fastest valid programs of the space measured so far (history included)."""
        valid = [(cost, i) for i, (cand, cost) in enumerate(self.measured)
                 if cost < float("inf") and self.in_space(cand)]
        return [self.measured[i][0] for _, i in sorted(valid)[:n]]

    def is_unseen(self, candidate: Candidate) -> bool:
        """Whether ``candidate`` was never measured nor proposed (does not mark it)."""

        return candidate.key not in self.seen

    # -- the plan
    @property
    def guided(self) -> bool:
        """Whether the model has been fitted (before that, programs are random)."""
        return self.learner is not None and self.learner.ready

    def refit_after_batch(self) -> bool:
        # until the model is fitted, each batch may be the one it waits for; then before a plan
        return not self.guided or not self.plan or self.trials - self.planned_at >= self.replan_after

    def _replan(self) -> None:
        if self.learner is not None and self.learner.pending:  # the plan ran out within a batch
            self.refit(self.batches - 1)
        self.plan = self.search(self.plan_size)
        self.planned_at = self.trials
        self.planned_with = self.learner.generation if self.learner is not None else -1
        self.plans += 1

    def next_batch(self, batch_size: int) -> list[Candidate]:
        self.refit_pending()
        stale = self.trials - self.planned_at >= self.replan_after
        if self.learner is not None:
            stale = stale and self.learner.generation != self.planned_with
        if self.guided and self.plan and stale:
            self._replan()
        batch: list[Candidate] = []
        replanned = False
        while len(batch) < batch_size:
            if self.guided and not self.plan and not replanned:
                self._replan()  # used up within this batch: search once more
                replanned = True
            if self.plan and self.rng.random() >= self.epsilon:
                cand = self.plan.pop(0)
                if self.is_new(cand):
                    batch.append(cand)
                    self.proposed["planned"] += 1
                continue
            drawn = self.sample_new(1)
            if not drawn:
                break
            batch += drawn
            self.proposed["random"] += len(drawn)
        self.dry = not batch
        return batch

    def has_next(self) -> bool:
        return not self.dry
