"""``xgb``: gradient-boosted trees on the per-store features, summed per program (Ansor's model).

Every store of a program is one training row; the model scores each row and a program's score is
the sum over its stores, so a program with more work in more statements can score higher or lower
than its parts suggest. Labels are throughput normalized per task (``min cost / cost``, 0 for a
failed program). The objective is defined on the *program* scores (the per-row sums), whose
gradients are spread over the program's rows:

- ``rank`` (default): pairwise logistic loss (RankNet, what XGBoost's ``rank:pairwise`` is) over
  pairs of programs of one task with different labels, each pair weighted by their label gap;
- ``reg``: squared error between the program score and its label, weighted towards fast programs.

Both are custom objectives because the loss is on the sum: XGBoost's own ``rank:pairwise`` on the
rows, each row labelled with its program's throughput, then summed, ordered held-out programs of a
64x64x64 matmul log right in 68 % of pairs, this one in 78 %. A row's hessian is scaled by its
program's row count, so that a leaf holding all of a program's rows does not overshoot its sum.

Tuned for the small data of a tuning run (64 to a few thousand programs): a fixed number of
rounds of ``hist`` trees on one thread by default (``nthread``). More threads gain little on such
data and lose much when the cores are busy (the builder's compilers, other processes): OpenMP
workers spin-wait for each other, and on two loaded cores a 2-thread fit took ten times the wall
time of a 1-thread one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .base import SavedModel, normalized_throughput, register_model, require, task_groups
from .features import extract_features, pack_features

if TYPE_CHECKING:
    from typing import Self

    from ..runner.measure import MeasureInput

OBJECTIVES = ("rank", "reg")


def sample_pairs(labels: np.ndarray, groups: np.ndarray, per_program: int, seed: int) -> np.ndarray:
    """Up to ``per_program`` random partners for each program, within its group, with a different
    label: an ``(n, 2)`` array of (better, worse) program indices, deterministic for ``seed``."""
    rng = np.random.default_rng(seed)
    out = []
    for g in np.unique(groups):
        mine = np.flatnonzero(groups == g)
        if len(mine) < 2:
            continue
        a = np.repeat(mine, per_program)
        b = mine[rng.integers(0, len(mine), size=len(a))]
        keep = labels[a] != labels[b]
        a, b = a[keep], b[keep]
        better = labels[a] > labels[b]
        out.append(np.stack([np.where(better, a, b), np.where(better, b, a)], axis=1))
    return np.concatenate(out) if out else np.zeros((0, 2), dtype=np.int64)


@register_model("xgb")
class XGBModel(SavedModel):
    """XGBoost on per-store rows with per-program sums (see the module doc)."""

    def __init__(
        self,
        objective: str = "rank",
        rounds: int = 60,
        max_depth: int = 6,
        eta: float = 0.3,
        min_child_weight: float = 1.0,
        subsample: float = 1.0,
        colsample_bytree: float = 1.0,
        pairs_per_program: int = 16,
        nthread: int = 1,
        seed: int = 0,
    ) -> None:
        if objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {objective!r}; objectives: {', '.join(OBJECTIVES)}")
        self.objective = objective
        self.rounds = rounds
        self.max_depth = max_depth
        self.eta = eta
        self.min_child_weight = min_child_weight
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.pairs_per_program = pairs_per_program
        self.nthread = nthread
        self.seed = seed
        self._booster: Any = None
        self._width: int | None = None

    def get_params(self) -> dict[str, Any]:
        """The constructor's parameters."""
        return {
            "objective": self.objective, "rounds": self.rounds, "max_depth": self.max_depth,
            "eta": self.eta, "min_child_weight": self.min_child_weight, "subsample": self.subsample,
            "colsample_bytree": self.colsample_bytree, "pairs_per_program": self.pairs_per_program,
            "nthread": self.nthread, "seed": self.seed,
        }

    def _xgb_params(self) -> dict[str, Any]:
        return {
            "tree_method": "hist", "max_depth": self.max_depth, "eta": self.eta,
            "min_child_weight": self.min_child_weight, "subsample": self.subsample,
            "colsample_bytree": self.colsample_bytree, "lambda": 1.0, "base_score": 0.0,
            "nthread": self.nthread, "seed": self.seed, "verbosity": 0, "disable_default_eval_metric": 1,
        }

    def fit(self, programs: Sequence[MeasureInput], costs: Sequence[float]) -> Self:
        """Train on ``programs`` with measured ``costs`` (seconds; ``inf`` for failures)."""
        if len(programs) != len(costs):
            raise ValueError(f"{len(costs)} costs for {len(programs)} programs")
        groups = task_groups(programs)
        rows, pid = pack_features(extract_features(programs))
        return self.fit_rows(rows, pid, normalized_throughput(costs, groups), groups)

    def fit_rows(self, rows: np.ndarray, pid: np.ndarray, labels: np.ndarray, groups: np.ndarray) -> Self:
        """Train on feature rows (``pack_features``' stacked rows and the program of each row)
        with one label per program (higher is faster) and one group per program: pairs are only
        formed within a group. :meth:`fit` calls it with per-task throughput labels; studies of
        other features or labels call it directly."""
        xgb = require("xgboost")
        n = len(labels)
        programs = int(pid.max()) + 1 if len(pid) else 0
        if len(groups) != n or programs > n:
            raise ValueError(f"{n} labels and {len(groups)} groups for the rows of {programs} programs")
        self._booster, self._width = None, rows.shape[1] if len(rows) else None
        if len(rows) == 0 or np.ptp(labels) == 0:
            return self  # nothing to learn: every program scores the same
        rows_of = np.bincount(pid, minlength=n).astype(np.float64)
        if self.objective == "rank":
            pairs = sample_pairs(labels, groups, self.pairs_per_program, self.seed)
            gap: np.ndarray = labels[pairs[:, 0]] - labels[pairs[:, 1]]
            scale = n / max(1, len(pairs))
        else:
            weight = 0.1 + labels  # fast programs matter most
            scale = 1.0

        def objective(preds: np.ndarray, _: Any) -> tuple[np.ndarray, np.ndarray]:
            score = np.bincount(pid, weights=preds, minlength=n)
            grad: np.ndarray
            hess: np.ndarray
            if self.objective == "rank":
                p = 1.0 / (1.0 + np.exp(score[pairs[:, 0]] - score[pairs[:, 1]]))  # P(wrong order)
                g, h = -gap * p, gap * p * (1.0 - p)
                grad = np.bincount(pairs[:, 0], g, n) - np.bincount(pairs[:, 1], g, n)
                hess = np.bincount(pairs[:, 0], h, n) + np.bincount(pairs[:, 1], h, n)
            else:
                grad, hess = weight * (score - labels), weight
            # a leaf moves a program's score by its value times the program's rows in the leaf:
            # the hessian of a row counts them all (exact when they share the leaf), or boosting
            # overshoots programs with many stores
            return grad[pid] * scale, np.maximum(hess[pid] * rows_of[pid] * scale, 1e-6)

        data = xgb.DMatrix(rows, nthread=self.nthread)
        self._booster = xgb.train(self._xgb_params(), data, self.rounds, obj=objective)
        return self

    def predict(self, programs: Sequence[MeasureInput]) -> np.ndarray:
        """One score per program, higher for faster (``-inf`` for a program that does not lower;
        all zeros before a fit that had something to learn)."""
        feats = extract_features(programs)
        empty = np.array([f.shape[0] == 0 for f in feats], dtype=bool)
        out: np.ndarray = np.zeros(len(programs))
        if not empty.all():
            out = self.predict_rows(*pack_features(feats), len(programs))
        out[empty] = -np.inf
        return out

    def predict_rows(self, rows: np.ndarray, pid: np.ndarray, n: int) -> np.ndarray:
        """The scores of ``n`` programs from their stacked feature rows (see :meth:`fit_rows`):
        the sum of each program's row predictions (0 for a program without rows)."""
        if self._booster is None or len(rows) == 0:
            return np.zeros(n)
        if rows.shape[1] != self._width:
            raise ValueError(f"programs have {rows.shape[1]} features; the model was fit on {self._width}")
        xgb = require("xgboost")
        preds = self._booster.predict(xgb.DMatrix(rows, nthread=self.nthread))
        out: np.ndarray = np.bincount(pid, weights=preds.astype(np.float64), minlength=n)
        return out

    def _arrays(self) -> dict[str, np.ndarray]:
        if self._booster is None:
            return {}
        raw = self._booster.save_raw(raw_format="ubj")
        return {"booster": np.frombuffer(bytes(raw), dtype=np.uint8), "width": np.array(self._width)}

    def _restore(self, arrays: dict[str, np.ndarray]) -> None:
        if "booster" not in arrays:
            return
        xgb = require("xgboost")
        booster = xgb.Booster(params={"nthread": self.nthread})
        booster.load_model(bytearray(arrays["booster"].tobytes()))
        self._booster, self._width = booster, int(arrays["width"])
