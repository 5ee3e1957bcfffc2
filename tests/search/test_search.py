"""The tuner loop and the tuners, on real spaces with a fake measurement (no compiler needed).

``fake_measure`` stands in for a device only here, where the search logic is under test; the
end-to-end tests with the real builder and runner are in test_tune.py.
"""

from __future__ import annotations

import io
import random

import pytest

from autosched.records import steps_key
from autosched.runner.measure import MeasureErrorNo, MeasureResult
from autosched.schedule.steps import SplitStep
from autosched.search import (
    Candidate,
    GridTuner,
    ProgressBar,
    RandomTuner,
    TuneStats,
    make_space,
    make_tuner,
)
from autosched.search.tuning_space import SpaceError
from autosched.task import Task

TASK = Task("matmul", (16, 24, 8), target="c -num-threads=1")


def fake_measure(candidates: list[Candidate]) -> list[MeasureResult]:
    """A made-up cost per program (a hash of its steps); every 5th program "fails to compile"."""
    out = []
    for cand in candidates:
        h = int(steps_key(cand.steps)[:8], 16)
        if h % 5 == 0:
            out.append(MeasureResult((), MeasureErrorNo.COMPILE_ERROR, "fake"))
        else:
            out.append(MeasureResult((1e-6 * (1 + h % 1000),)))
    return out


class TinySpace:
    """A space of ``n`` programs (one split each), for exhaustion tests."""

    kind = "tiny"

    def __init__(self, n: int) -> None:
        self.n = n

    def grid_size(self) -> int:
        return self.n

    def grid_point(self, index: int) -> Candidate | None:
        if index % 3 == 2:  # some points are not programs
            return None
        return Candidate((SplitStep("C", "i", index + 1, None),), {"index": index})

    def sample(self, rng: random.Random) -> Candidate:
        cand = self.grid_point(rng.randrange(self.n))
        return cand if cand is not None else self.sample(rng)


@pytest.mark.parametrize("space", ["sketch", "template"])
def test_random_tuner_measures_distinct_programs_up_to_n_trial(space: str) -> None:
    tuner = RandomTuner(TASK, make_space(TASK, space), seed=1)
    seen: list[str] = []
    tuner.tune(
        20, fake_measure, batch_size=6, callbacks=[lambda t, c, r: seen.extend(steps_key(x.steps) for x in c)]
    )
    assert tuner.trials == 20 and len(seen) == 20 and len(set(seen)) == 20
    assert tuner.stop_reason == "20 trials done"
    assert tuner.best_candidate is not None and tuner.best_cost < float("inf")


def test_random_tuner_is_reproducible_with_a_seed() -> None:
    def run(seed: int) -> list[str]:
        keys: list[str] = []
        tuner = RandomTuner(TASK, make_space(TASK, "sketch"), seed=seed)
        tuner.tune(
            12,
            fake_measure,
            batch_size=4,
            callbacks=[lambda t, c, r: keys.extend(steps_key(x.steps) for x in c)],
        )
        return keys

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_best_is_the_lowest_valid_median() -> None:
    """Errors never become the best, not even a wrong answer whose costs are the fastest seen."""

    def measure(candidates: list[Candidate]) -> list[MeasureResult]:
        out = fake_measure(candidates)
        out[0] = MeasureResult((1e-9,), MeasureErrorNo.WRONG_ANSWER, "fake")  # first of each batch
        return out

    tuner = RandomTuner(TASK, make_space(TASK, "sketch"), seed=3)
    seen: list[tuple[Candidate, MeasureResult]] = []
    tuner.tune(16, measure, batch_size=8, callbacks=[lambda t, c, r: seen.extend(zip(c, r, strict=True))])
    valid = sorted((r.median, steps_key(c.steps)) for c, r in seen if r.ok)
    assert len(seen) == 16 and 2 <= 16 - len(valid) < 16  # both kinds, so the choice is tested
    assert tuner.best_cost == valid[0][0] and tuner.best_cost > 1e-9
    assert tuner.best_candidate is not None and steps_key(tuner.best_candidate.steps) == valid[0][1]


def test_grid_tuner_walks_in_index_order_and_skips_invalid_points() -> None:
    tuner = GridTuner(TASK, TinySpace(8), seed=0)
    order: list[int] = []
    tuner.tune(
        100,
        fake_measure,
        batch_size=3,
        callbacks=[lambda t, c, r: order.extend(x.program["index"] for x in c)],
    )
    assert order == [0, 1, 3, 4, 6, 7]
    assert tuner.stop_reason == "search space exhausted"


def test_grid_tuner_on_a_template_space_starts_at_index_zero() -> None:
    tuner = GridTuner(TASK, make_space(TASK, "template"))
    batch = tuner.next_batch(3)
    assert [c.program["index"] for c in batch] == [0, 1, 2]


def test_random_tuner_stops_when_a_small_space_is_exhausted() -> None:
    tuner = RandomTuner(TASK, TinySpace(9), seed=0)
    tuner.tune(100, fake_measure, batch_size=4)
    assert tuner.trials == 6 and tuner.stop_reason == "search space exhausted"


def test_history_is_skipped_and_counts_as_trials() -> None:
    first = RandomTuner(TASK, TinySpace(30), seed=0)
    measured: list[Candidate] = []
    first.tune(5, fake_measure, batch_size=5, callbacks=[lambda t, c, r: measured.extend(c)])
    second = GridTuner(TASK, TinySpace(30))
    second.seen.update(steps_key(c.steps) for c in measured)
    second.trials = 5
    proposed = second.next_batch(30)
    assert not {steps_key(c.steps) for c in proposed} & {steps_key(c.steps) for c in measured}
    assert len(proposed) == 20 - 5  # 20 valid points in all


def test_early_stopping_and_time_budget() -> None:
    def flat(candidates: list[Candidate]) -> list[MeasureResult]:
        return [MeasureResult((1.0,)) for _ in candidates]  # nothing ever beats the first

    tuner = RandomTuner(TASK, make_space(TASK, "sketch"), seed=0)
    tuner.tune(1000, flat, batch_size=4, early_stopping=10)
    assert tuner.stop_reason == "no better program in 10 trials" and tuner.trials <= 16
    tuner = RandomTuner(TASK, make_space(TASK, "sketch"), seed=0)
    tuner.tune(10**6, flat, batch_size=2, timeout=0.3)
    assert tuner.stop_reason.startswith("time budget") and tuner.trials < 10**6


def test_unknown_names_are_clear_errors() -> None:
    valid = "evolutionary, ga, grid, random, sa, xgb"
    with pytest.raises(ValueError, match=f"unknown tuner 'anneal'; tuners: {valid}"):
        make_tuner("anneal", TASK, make_space(TASK, "sketch"))
    with pytest.raises(SpaceError, match="unknown space 'magic'"):
        make_space(TASK, "magic")
    with pytest.raises(SpaceError, match="no template for workload 'softmax'"):
        make_space(Task("softmax", (4, 8)), "template")


def test_progress_bar_shows_trials_best_errors_and_eta() -> None:
    stream = io.StringIO()
    stats = TuneStats(TASK.flops())
    bar = ProgressBar(8, stats, stream)
    tuner = RandomTuner(TASK, make_space(TASK, "sketch"), seed=0)

    def count(t: object, c: list[Candidate], r: list[MeasureResult]) -> None:
        for res in r:
            stats.add(res.error_no)

    tuner.tune(8, fake_measure, batch_size=4, callbacks=[count, bar])
    bar.finish(tuner.stop_reason)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("[############............] 4/8  best ") and "ETA" in lines[0]
    assert lines[1].startswith("[########################] 8/8") and "GFLOP/s" in lines[1]
    assert f"errors {sum(stats.errors.values())}" in lines[1]
    assert lines[-1] == "stopped: 8 trials done"
