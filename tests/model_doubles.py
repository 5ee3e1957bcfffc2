"""Test doubles of cost models, for the search tests (the real models live in autosched.model).

:class:`StepKNNModel` is a small honest model: k-nearest neighbours over trivial features of a
program's steps (log2 of each split factor and pragma value, keyed by stage and axis; one indicator
per other step), predicting ``-log(cost)`` (higher = faster). It knows nothing of loops or
hardware; it is here so that the tuners can be tested without the model package.
:class:`SpyModel` wraps a model and records what it was fitted on and asked about.
:func:`install_doubles` puts the doubles in place of the model registry the tuners resolve names
in, for one test of name resolution and fallbacks.
"""

from __future__ import annotations

import functools
import json
import math
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import autosched.search.learning
from autosched.runner.measure import MeasureInput
from autosched.schedule.steps import Step


@functools.lru_cache(maxsize=1 << 16)
def _step_feature(step: Step) -> tuple[str, float]:
    data = step.to_json()
    kind = data["kind"]
    if kind == "split":
        return f"split/{data['stage']}/{data['axis']}", math.log2(data["factor"] or data["nparts"] or 1)
    if kind == "pragma":
        return f"pragma/{data['stage']}/{data['key']}", math.log2(1 + data["value"])
    return json.dumps(data, sort_keys=True), 1.0


def step_features(inp: MeasureInput) -> dict[str, float]:
    """Trivial features of a program: split factors and pragma values (log2), other steps as 1."""
    return dict(_step_feature(step) for step in inp.steps)


class StepKNNModel:
    """k-nearest neighbours on :func:`step_features` (a test double of a cost model)."""

    name = "knn-double"

    def __init__(self, k: int = 5) -> None:
        self.k = k
        self.vocabulary: dict[str, int] = {}
        self.x = np.zeros((0, 0))
        self.y = np.zeros(0)

    def _matrix(self, programs: Sequence[MeasureInput]) -> np.ndarray:
        x = np.zeros((len(programs), len(self.vocabulary)))
        for i, inp in enumerate(programs):
            for key, value in step_features(inp).items():
                j = self.vocabulary.get(key)
                if j is not None:
                    x[i, j] = value
        return x

    def fit(self, programs: Sequence[MeasureInput], costs: Sequence[float]) -> StepKNNModel:
        self.vocabulary = {}
        for inp in programs:
            for key in step_features(inp):
                self.vocabulary.setdefault(key, len(self.vocabulary))
        self.x = self._matrix(programs)
        c = np.asarray(costs, dtype=float)
        ok = np.isfinite(c)
        y = np.zeros(len(c))
        y[ok] = -np.log(c[ok])
        y[~ok] = (y[ok].min() - 1.0) if ok.any() else 0.0  # a failed program: worse than any valid one
        self.y = y
        return self

    def predict(self, programs: Sequence[MeasureInput]) -> np.ndarray:
        if not len(self.y):
            return np.zeros(len(programs))
        x = self._matrix(programs)
        d = (x * x).sum(1)[:, None] + (self.x * self.x).sum(1)[None, :] - 2 * x @ self.x.T
        k = min(self.k, len(self.y))
        near = np.argsort(d, axis=1, kind="stable")[:, :k]
        return self.y[near].mean(axis=1)

    def save(self, path: str | Path) -> None:
        Path(path).write_bytes(pickle.dumps(self))

    @classmethod
    def load(cls, path: str | Path) -> StepKNNModel:
        model = pickle.loads(Path(path).read_bytes())
        assert isinstance(model, cls)
        return model


class SpyModel:
    """Wraps a model; records the sizes and tasks of every fit and predict call."""

    name = "spy"

    def __init__(self, inner: Any | None = None) -> None:
        self.inner = inner or StepKNNModel()
        self.fits: list[tuple[list[MeasureInput], list[float]]] = []
        self.predicts = 0

    def fit(self, programs: Sequence[MeasureInput], costs: Sequence[float]) -> SpyModel:
        self.fits.append((list(programs), list(costs)))
        self.inner.fit(programs, costs)
        return self

    def predict(self, programs: Sequence[MeasureInput]) -> np.ndarray:
        self.predicts += 1
        return np.asarray(self.inner.predict(programs))


class RandomScores:
    """Scores at random (a test double of the ``random`` model)."""

    name = "random-double"

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def fit(self, programs: Sequence[MeasureInput], costs: Sequence[float]) -> RandomScores:
        return self

    def predict(self, programs: Sequence[MeasureInput]) -> np.ndarray:
        return self.rng.random(len(programs))


#: the registry :func:`install_doubles` installs; "xgb" is the k-NN double standing in for it
DOUBLES: dict[str, type] = {"knn": StepKNNModel, "random": RandomScores, "xgb": StepKNNModel}


def install_doubles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the tuners' model registry (``autosched.search.learning``) serve :data:`DOUBLES`."""

    def make_model(name: str, **params: Any) -> Any:
        return DOUBLES[name](**params)

    monkeypatch.setattr(autosched.search.learning, "MODELS", DOUBLES)
    monkeypatch.setattr(autosched.search.learning, "make_model", make_model)
