"""The features of programs seen lately, shared by the feature extractor and its helper processes.

A model refits on all of a task's records after every batch, and a search scores many programs
again from one generation to the next: :data:`FEATURE_CACHE` keeps each program's ``(stores x
dims)`` array (read-only) by :func:`feature_key`, whether this process computed it
(:mod:`.features`) or a helper did (:mod:`.feature_workers`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from ..lower.cache import LRUCache
from ..schedule.steps import Step
from ..task import Task

__all__ = ["FEATURE_CACHE", "feature_key", "remember"]

#: features of programs seen lately (read-only arrays), by :func:`feature_key`
FEATURE_CACHE: LRUCache[np.ndarray] = LRUCache(16384)


def feature_key(task: Task, steps: Sequence[Step]) -> Hashable:
    """The cache key of program ``steps`` of ``task``: the task's key and the steps."""
    return (*task.key, tuple(steps))


def remember(task: Task, steps: Sequence[Step], features: np.ndarray) -> None:
    """Keep ``features`` (made read-only) for program ``steps`` of ``task``."""
    features.flags.writeable = False
    FEATURE_CACHE.put(feature_key(task, steps), features)
