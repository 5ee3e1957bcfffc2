"""``mlp``: a small neural network on per-program features (the AutoTVM paper's neural alternative).

A program's stores are aggregated into one vector (the sum and the maximum of each feature over
the stores, and the store count), standardized, and a scikit-learn ``MLPRegressor`` learns the
logarithm of the task-normalized throughput (``log2(0.01 + min cost / cost)``; failed programs
have throughput 0). The logarithm spreads out the many slow programs that a plain throughput
squeezes near 0 (held-out pairwise accuracy 0.74 instead of 0.66 on a matmul log). Prediction
runs the learned layers in numpy, so a saved model predicts without scikit-learn.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .base import SavedModel, normalized_throughput, register_model, require, task_groups
from .features import extract_features

if TYPE_CHECKING:
    from typing import Self

    from ..runner.measure import MeasureInput


def aggregate(features: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per program: [sum over stores, max over stores, store count] (zeros without stores), and a
    mask of the programs that have stores."""
    widths = {f.shape[1] for f in features}
    if len(widths) > 1:
        raise ValueError(f"programs with different feature widths {sorted(widths)} "
                         "(templates of different tasks?)")
    width = widths.pop() if widths else 0
    out = np.zeros((len(features), 2 * width + 1))
    has = np.zeros(len(features), dtype=bool)
    for i, f in enumerate(features):
        if f.shape[0]:
            has[i] = True
            rows = f.astype(np.float64)
            out[i, :width] = rows.sum(axis=0)
            out[i, width : 2 * width] = rows.max(axis=0)
            out[i, -1] = f.shape[0]
    return out, has


LABEL_FLOOR = 0.01  # added to throughputs before the logarithm (a failed program: log2(0.01))


@register_model("mlp")
class MLPModel(SavedModel):
    """A multi-layer perceptron (ReLU) on aggregated features (see the module doc)."""

    def __init__(
        self,
        hidden: Sequence[int] = (64, 32),
        alpha: float = 1e-3,
        learning_rate: float = 1e-3,
        max_iter: int = 300,
        seed: int = 0,
    ) -> None:
        self.hidden = tuple(int(h) for h in hidden)
        self.alpha = alpha
        self.learning_rate = learning_rate
        self.max_iter = max_iter
        self.seed = seed
        self._layers: list[tuple[np.ndarray, np.ndarray]] = []
        self._mean = np.zeros(0)
        self._scale = np.ones(0)

    def get_params(self) -> dict[str, Any]:
        """The constructor's parameters."""
        return {"hidden": list(self.hidden), "alpha": self.alpha, "learning_rate": self.learning_rate,
                "max_iter": self.max_iter, "seed": self.seed}

    def fit(self, programs: Sequence[MeasureInput], costs: Sequence[float]) -> Self:
        """Train on ``programs`` with measured ``costs`` (seconds; ``inf`` for failures)."""
        if len(programs) != len(costs):
            raise ValueError(f"{len(costs)} costs for {len(programs)} programs")
        neural = require("sklearn.neural_network")
        labels = normalized_throughput(costs, task_groups(programs))
        x, has = aggregate(extract_features(programs))
        x, y = x[has], np.log2(LABEL_FLOOR + labels[has])
        self._layers = []
        if len(y) < 2 or np.ptp(y) == 0:
            return self  # nothing to learn
        self._mean = x.mean(axis=0)
        self._scale = np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
        net = neural.MLPRegressor(
            hidden_layer_sizes=self.hidden, alpha=self.alpha, learning_rate_init=self.learning_rate,
            max_iter=self.max_iter, random_state=self.seed,
        )
        limits = require("threadpoolctl").threadpool_limits
        # small data rarely converges to tolerance, which is fine; one BLAS thread: on such small
        # matrices more threads only spin, on busy cores for long
        with warnings.catch_warnings(), limits(limits=1):
            warnings.simplefilter("ignore")
            net.fit((x - self._mean) / self._scale, y)
        pairs = zip(net.coefs_, net.intercepts_, strict=True)
        self._layers = [(np.asarray(w), np.asarray(b)) for w, b in pairs]
        return self

    def predict(self, programs: Sequence[MeasureInput]) -> np.ndarray:
        """One score per program, higher for faster (``-inf`` for a program that does not lower;
        zeros before a fit that had something to learn)."""
        x, has = aggregate(extract_features(programs))
        out = np.zeros(len(programs))
        if self._layers and has.any():
            if x.shape[1] != len(self._mean):
                raise ValueError(f"programs have {x.shape[1]} inputs; the model was fit on {len(self._mean)}")
            h = (x[has] - self._mean) / self._scale
            for i, (w, b) in enumerate(self._layers):
                h = h @ w + b
                if i < len(self._layers) - 1:
                    h = np.maximum(h, 0.0)
            out[has] = h.ravel()
        out[~has] = -np.inf
        return out

    def _arrays(self) -> dict[str, np.ndarray]:
        out = {"mean": self._mean, "scale": self._scale}
        for i, (w, b) in enumerate(self._layers):
            out[f"w{i}"], out[f"b{i}"] = w, b
        return out

    def _restore(self, arrays: dict[str, np.ndarray]) -> None:
        self._mean, self._scale = arrays["mean"], arrays["scale"]
        count = sum(1 for k in arrays if k.startswith("w"))
        self._layers = [(arrays[f"w{i}"], arrays[f"b{i}"]) for i in range(count)]
