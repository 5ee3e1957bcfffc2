"""``random``: the baseline cost model; it learns nothing and scores each program with seeded noise.

A program's score is a hash of its steps and the seed mapped to [0, 1), so a program keeps its
score from call to call (a tuner driven by it is a random search without repeats) and runs with
the same seed score alike.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..records.io import steps_text
from .base import SavedModel, register_model

if TYPE_CHECKING:
    from typing import Self

    from ..runner.measure import MeasureInput


@register_model("random")
class RandomModel(SavedModel):
    """Scores are seeded noise, stable per program (see the module doc)."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def get_params(self) -> dict[str, Any]:
        """The constructor's parameters."""
        return {"seed": self.seed}

    def fit(self, programs: Sequence[MeasureInput], costs: Sequence[float]) -> Self:
        """Learns nothing (the lengths are checked)."""
        if len(programs) != len(costs):
            raise ValueError(f"{len(costs)} costs for {len(programs)} programs")
        return self

    def predict(self, programs: Sequence[MeasureInput]) -> np.ndarray:
        """A score in [0, 1) per program."""
        out = np.empty(len(programs))
        for i, p in enumerate(programs):
            digest = hashlib.blake2b(f"{self.seed}|{steps_text(p.steps)}".encode(), digest_size=8).digest()
            out[i] = int.from_bytes(digest, "little") / 2.0**64
        return out

    def _arrays(self) -> dict[str, np.ndarray]:
        return {}

    def _restore(self, arrays: dict[str, np.ndarray]) -> None:
        pass
