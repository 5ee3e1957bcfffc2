"""How a model-guided search spends its trials: every measured program is counted as planned (the
model's choice) or random (epsilon, or before the model's first fit), on the committed replay log
(real measurements served back, so the search is exactly reproducible)."""

from __future__ import annotations

from pathlib import Path

import pytest
from model_doubles import StepKNNModel

from autosched.search import EvolutionaryTuner, LogSpace, ReplayLog, ReplayRunner

DATA = Path(__file__).parents[1] / "data" / "replay_matmul128.jsonl.gz"


@pytest.fixture(scope="module")
def replay() -> tuple[ReplayLog, LogSpace]:
    log = ReplayLog(DATA)
    return log, LogSpace(log)


@pytest.mark.parametrize("epsilon", [0.0, 0.5])
def test_measured_programs_are_counted_as_planned_or_random(
    replay: tuple[ReplayLog, LogSpace], epsilon: float
) -> None:
    log, space = replay
    tuner = EvolutionaryTuner(log.task, space, seed=0, model=StepKNNModel(), epsilon=epsilon, plan_size=16)
    tuner.tune(64, ReplayRunner(log).measure, batch_size=8)
    counts = tuner.proposed
    assert counts["planned"] + counts["random"] == tuner.trials == 64
    assert counts["random"] >= 8  # the first batch comes before any fit: random
    if epsilon == 0.0:
        assert counts["random"] <= 16 and counts["planned"] >= 48  # once fitted, all planned
    else:
        assert 16 <= counts["planned"] <= 40
