"""What a model-guided tuner learns from: a cost model, the task's records, and the model's quality.

A :class:`Learner` holds a cost model (the protocol of :mod:`autosched.model`: ``fit(programs,
costs)``, ``predict(programs)``, higher score = faster) and every record of the task: its own
measurements (failed programs cost ``math.inf``), those loaded from the log on resume, and records
of other workloads from transfer logs, kept alongside as extra training data. After each measured
batch, :meth:`Learner.refit` first scores the batch the model has not seen yet (pairwise accuracy
and recall@k, a :class:`ModelQuality`), then fits the model on everything.

Models are named (``"xgb"``, ``"mlp"``, ``"random"``) and resolved by :func:`resolve_model`; the
libraries a model needs (xgboost, scikit-learn) are imported only when that model is made.
"""

from __future__ import annotations

import importlib
import math
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..diagnostics import printable, warn
from ..model import MODELS, CostModel, ModelLoadError, load_model, make_model, pairwise_accuracy, recall_at_k
from ..model.base import XGB_INSTALL
from ..records import steps_key
from ..runner.measure import MeasureInput

__all__ = [
    "SIDECAR_SUFFIX",
    "CostModel",
    "Learner",
    "ModelQuality",
    "ModelUnavailable",
    "load_saved_model",
    "model_name",
    "pairwise_accuracy",
    "recall_at_k",
    "resolve_model",
    "sidecar_path",
    "unavailable",
]

#: the model-quality file next to a tuning log LOG.jsonl is LOG.model.jsonl
SIDECAR_SUFFIX = ".model.jsonl"


def sidecar_path(log: str | os.PathLike[str]) -> Path:
    """The model-quality sidecar of tuning log ``log``: ``x.jsonl`` -> ``x.model.jsonl``."""
    path = Path(log)
    stem = path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.name
    return path.with_name(stem + SIDECAR_SUFFIX)


class ModelUnavailable(ImportError):
    """A cost model cannot be made here: the model package or the library it needs is missing."""


def _is_path(name: str) -> bool:
    """Whether a model given as text names a saved model file rather than a kind of model."""
    return name not in MODELS and (os.sep in name or "/" in name or "." in name or Path(name).is_file())


def check_model_name(name: str) -> None:
    """``ValueError`` if ``name`` is neither a model (the message lists them) nor a saved model file."""
    if _is_path(name):
        if not Path(name).is_file():
            raise ValueError(f"no saved cost model {printable(name, 200)!r}")
    elif name not in MODELS:
        raise ValueError(f"unknown model {printable(name, 60)!r}; models: {', '.join(sorted(MODELS))}")


def load_saved_model(path: str | os.PathLike[str]) -> CostModel:
    """A model saved with ``model.save(path)`` (already fitted: its first batch is guided).

    A file that is not a readable model (corrupt, truncated, another version) is reported with a
    warning, and a new ``xgb`` model is trained from the log instead.
    """
    try:
        loaded: CostModel = load_model(Path(path))
    except ModelLoadError as err:
        warn(f"cannot use the saved cost model: {err}; training a new xgb model from the log instead")
        return resolve_model("xgb")
    return loaded


def unavailable(model: object) -> str | None:
    """Why the cost model named ``model`` cannot be made here, or None: for ``xgb``, xgboost does
    not import (not installed, or broken: a missing OpenMP runtime, say); the reason says what to
    install."""
    if model != "xgb":
        return None
    try:
        importlib.import_module("xgboost")
    except Exception as err:  # ImportError, or what a broken native library raises while loading
        return (f"the xgb cost model needs xgboost, which does not import here ({printable(err)}): "
                f"{XGB_INSTALL}")
    return None


def resolve_model(model: CostModel | str) -> CostModel:
    """``model`` itself, the model registered as that name in :mod:`autosched.model`, or the
    model saved in that file (:func:`load_saved_model`).

    Raises ``ValueError`` (listing the names) for an unknown name or a missing file, and
    :class:`ModelUnavailable` when the model cannot be made here (xgboost missing).
    """
    if not isinstance(model, str):
        return model
    check_model_name(model)
    if _is_path(model):
        return load_saved_model(model)
    why = unavailable(model)
    if why is not None:
        raise ModelUnavailable(why)
    try:
        return make_model(model)
    except ImportError as err:
        raise ModelUnavailable(str(err)) from None


def model_name(model: object) -> str:
    """A short name of a model object for logs: its ``name`` attribute, else its class name."""
    name = getattr(model, "name", None)
    return name if isinstance(name, str) else type(model).__name__


def quality_k(n: int) -> int:
    """The ``k`` of recall@k for a batch of ``n`` programs: a quarter of it, 1 to 8."""
    return max(1, min(8, n // 4))


@dataclass(frozen=True)
class ModelQuality:
    """How well the model ranked one measured batch before it was trained on it, and the refit."""

    batch: int  # index of the measured batch in this run
    trials: int  # trials of the task once the batch is counted
    size: int  # programs in the batch
    pairwise_accuracy: float | None  # None: no model yet, or too few valid programs to compare
    recall_at_k: float | None
    k: int
    fit_seconds: float  # 0.0: the model was not refitted after this batch
    train_size: int  # records the model is fitted on after the batch (transfer records included)

    def to_json(self) -> dict[str, Any]:
        """A JSON object (NaN as null)."""
        out = asdict(self)
        for key in ("pairwise_accuracy", "recall_at_k"):
            if out[key] is not None and not math.isfinite(out[key]):
                out[key] = None
        return out


class Learner:
    """A cost model and the records it learns from (see the module docstring).

    ``min_records`` records of the task (or transfer records) with at least two valid costs are
    needed before the model is fitted; :attr:`ready` says whether it has been.
    """

    def __init__(self, model: CostModel, min_records: int = 8) -> None:
        self.model = model
        self.min_records = min_records
        self.inputs: list[MeasureInput] = []
        self.costs: list[float] = []
        self.transfer_inputs: list[MeasureInput] = []
        self.transfer_costs: list[float] = []
        self.pending = 0  # records of the task added since the last fit
        self.unscored = 0  # the latest of them, not scored yet (see ModelQuality)
        self.pending_transfer = 0
        self.fitted_on = 0  # records of the last fit
        self.ready = bool(getattr(model, "fitted", False))  # a saved model guides from the start
        self.generation = 0  # fits so far; predictions are cached per generation
        self._cache: dict[str, float] = {}

    def add(self, inputs: Sequence[MeasureInput], costs: Sequence[float]) -> None:
        """Records of the task (cost ``inf`` for failed programs)."""
        self.inputs += inputs
        self.costs += [float(c) for c in costs]
        self.pending += len(inputs)
        self.unscored += len(inputs)

    def add_transfer(self, inputs: Sequence[MeasureInput], costs: Sequence[float]) -> None:
        """Records of other workloads, to start from (they stay in every fit)."""
        self.transfer_inputs += inputs
        self.transfer_costs += [float(c) for c in costs]
        self.pending_transfer += len(inputs)

    def _enough(self) -> bool:
        costs = self.transfer_costs + self.costs
        return len(costs) >= self.min_records and sum(math.isfinite(c) for c in costs) >= 2

    def _score_unscored(self) -> tuple[int, float | None, float | None, int]:
        """(records, pairwise accuracy, recall@k, k) of the model on the records not scored yet."""
        fresh, self.unscored = self.unscored, 0
        new_inputs, new_costs = self.inputs[len(self.inputs) - fresh :], self.costs[len(self.costs) - fresh :]
        k = quality_k(fresh)
        accuracy = recall = None
        if self.ready and sum(math.isfinite(c) for c in new_costs) >= 2:
            scores = self.predict(new_inputs)
            accuracy = pairwise_accuracy(scores, new_costs)
            recall = recall_at_k(scores, new_costs, k)
        return fresh, accuracy, recall, k

    def assess(self, batch: int = -1, trials: int = 0) -> ModelQuality | None:
        """Score the records not scored yet with the model as it is, without refitting; None when
        there are none or the model was never fitted."""
        if not self.unscored or not self.ready:
            return None
        fresh, accuracy, recall, k = self._score_unscored()
        return ModelQuality(batch, trials, fresh, accuracy, recall, k, 0.0, self.fitted_on)

    def refit(self, batch: int = -1, trials: int = 0) -> ModelQuality | None:
        """Score the records not scored yet (when the model is fitted), then fit on all records.

        Returns the :class:`ModelQuality` of the unscored records (with the fit time), or None when
        nothing was new or there are still too few records to fit.
        """
        if not (self.pending or self.pending_transfer) or not self._enough():
            return None
        fresh, accuracy, recall, k = self._score_unscored()
        start = time.perf_counter()
        self.model.fit(self.transfer_inputs + self.inputs, self.transfer_costs + self.costs)
        seconds = time.perf_counter() - start
        self.ready, self.pending, self.pending_transfer = True, 0, 0
        self.generation += 1
        self._cache.clear()
        self.fitted_on = len(self.transfer_inputs) + len(self.inputs)
        return ModelQuality(batch, trials, fresh, accuracy, recall, k, seconds, self.fitted_on)

    def predict(self, inputs: Sequence[MeasureInput], keys: Sequence[str] | None = None) -> np.ndarray:
        """Scores of ``inputs`` (whose program keys are ``keys``, if known) by the current model,
        cached per program until the next fit."""
        keys = keys if keys is not None else [steps_key(i.steps) for i in inputs]
        todo = {k: i for k, i in zip(keys, inputs, strict=True) if k not in self._cache}
        if todo:
            scores = np.asarray(self.model.predict(list(todo.values())), dtype=float).reshape(-1)
            if len(scores) != len(todo):
                raise ValueError(f"the model gave {len(scores)} scores for {len(todo)} programs")
            scores = np.where(np.isfinite(scores), scores, -1e30)
            self._cache.update(zip(todo, scores.tolist(), strict=True))
        return np.array([self._cache[k] for k in keys], dtype=float)
