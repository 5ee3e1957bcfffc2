"""Cost-model quality: does the model order programs the way the measurements do?

Scores are the model's (higher = faster), costs are seconds (lower = faster; ``inf`` for failed
programs, which rank last).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np

Values: TypeAlias = Sequence[float] | np.ndarray


def _arrays(scores: Values, costs: Values) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64).ravel()
    c = np.asarray(costs, dtype=np.float64).ravel()
    if s.shape != c.shape:
        raise ValueError(f"{len(s)} scores for {len(c)} costs")
    c = np.where(np.isnan(c), np.inf, c)
    return s, c


def pairwise_accuracy(scores: Values, costs: Values) -> float:
    """The share of pairs with different costs that the scores order right (the faster program
    scores higher; a tie in scores counts half). 0.5 is chance; NaN with no such pair."""
    s, c = _arrays(scores, costs)
    faster = c[:, None] < c[None, :]  # faster[i, j]: program i is faster than j
    pairs = int(faster.sum())
    if not pairs:
        return float("nan")
    ds = s[:, None] - s[None, :]
    right = np.count_nonzero(faster & (ds > 0)) + 0.5 * np.count_nonzero(faster & (ds == 0))
    return float(right / pairs)


def recall_at_k(scores: Values, costs: Values, k: int) -> float:
    """The share of the ``k`` fastest programs (by cost) among the ``k`` best scored ones
    (ties broken by position, deterministically)."""
    s, c = _arrays(scores, costs)
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    k = min(k, len(s))
    if k == 0:
        return float("nan")
    true_top = np.argsort(c, kind="stable")[:k]
    predicted = np.argsort(-s, kind="stable")[:k]
    return float(len(np.intersect1d(true_top, predicted)) / k)
