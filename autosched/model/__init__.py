"""Cost models: program features, learned models that rank programs, and their quality metrics.

    from autosched.model import make_model, pairwise_accuracy
    model = make_model("xgb").fit(programs, costs)      # programs: MeasureInputs; costs: seconds
    scores = model.predict(candidates)                   # higher = faster

Models (:data:`MODELS`): ``xgb`` (XGBoost, Ansor's per-store sum), ``mlp`` (scikit-learn neural
network), ``random`` (noise; the baseline). xgboost and scikit-learn are dependencies of
autosched, imported only when a model needs them.
"""

from __future__ import annotations

from . import mlp_model, random_model, xgb_model  # noqa: F401 - registers the models
from .base import (
    MODELS,
    CostModel,
    ModelLoadError,
    from_records,
    load_model,
    make_model,
    normalized_throughput,
    task_groups,
)
from .features import (
    extract_features,
    feature_names,
    knob_values,
    log_scaled_features,
    pack_features,
    shape_invariant_features,
)
from .metrics import pairwise_accuracy, recall_at_k

__all__ = [
    "MODELS",
    "CostModel",
    "ModelLoadError",
    "extract_features",
    "feature_names",
    "from_records",
    "knob_values",
    "load_model",
    "log_scaled_features",
    "make_model",
    "normalized_throughput",
    "pack_features",
    "pairwise_accuracy",
    "recall_at_k",
    "shape_invariant_features",
    "task_groups",
]
