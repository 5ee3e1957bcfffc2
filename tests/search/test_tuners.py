"""Model-guided tuners on a real tuning log served by the replay runner (no compiler, deterministic).

``tests/data/replay_matmul128.jsonl.gz`` holds thousands of real measurements of random programs
of matmul 128^3 on one thread (``benchmarks/make_replay_log.py``). :class:`ReplayRunner` answers
each program with its recorded result and :class:`LogSpace` keeps the tuners inside the log, so a
tuner's search is exactly reproducible. The cost model is the test double of model_doubles.py
(k-nearest neighbours over split factors), or the real ``xgb`` model where the model package has it.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable
from pathlib import Path

import pytest
from model_doubles import SpyModel, StepKNNModel

from autosched.records import steps_key
from autosched.runner.measure import MeasureErrorNo, MeasureResult
from autosched.search import (
    Candidate,
    EvolutionaryTuner,
    GATuner,
    LogSpace,
    ModelUnavailable,
    ReplayLog,
    ReplayRunner,
    SATuner,
    Tuner,
    make_tuner,
    resolve_model,
)
from autosched.search.replay import first_hit

DATA = Path(__file__).parents[1] / "data" / "replay_matmul128.jsonl.gz"
SEEDS = range(20)
CAP = 400  # trials per run at most (random search misses the top 1% in 400 trials 2% of the time)


@pytest.fixture(scope="module")
def replay() -> tuple[ReplayLog, LogSpace]:
    log = ReplayLog(DATA)
    return log, LogSpace(log)


class Found(Exception):
    """Raised by a callback to end a run once the target is measured."""


def trials_to_top(
    name: str, log: ReplayLog, space: LogSpace, seed: int, model: object | None = None, fraction: float = 0.01
) -> int:
    """The trial at which tuner ``name`` first measures a program of the log's top ``fraction``
    (``CAP + 1`` if it does not within ``CAP`` trials)."""
    top = log.top(fraction)
    device = ReplayRunner(log)
    tuner = make_tuner(name, log.task, space, seed=seed, model=model)  # type: ignore[arg-type]
    keys: list[str] = []

    def watch(t: Tuner, cands: list[Candidate], results: list[MeasureResult]) -> None:
        keys.extend(steps_key(c.steps) for c in cands)
        if first_hit(keys, top) is not None:
            raise Found

    with contextlib.suppress(Found):
        tuner.tune(CAP, device.measure, batch_size=8, callbacks=[watch])
    assert not device.misses, "a tuner proposed a program the log does not hold"
    return first_hit(keys, top) or CAP + 1


def test_the_replay_log_is_a_real_log_of_thousands_of_programs(replay: tuple[ReplayLog, LogSpace]) -> None:
    log, space = replay
    assert len(log) >= 2000 and log.task.workload.name == "matmul"
    assert space.grid_size() == len(log)
    valid = [r for r in log.programs if r.ok]
    assert len(valid) >= 0.9 * len(log) and len(log.top(0.01)) >= 20
    medians = sorted(r.median for r in valid)
    assert medians[-1] / medians[0] > 10  # programs differ a lot: there is something to find


@pytest.mark.parametrize("name", ["sa", "evolutionary"])
def test_model_guided_tuners_find_the_top_percent_in_far_fewer_trials_than_random(
    replay: tuple[ReplayLog, LogSpace], name: str
) -> None:
    log, space = replay
    guided = [trials_to_top(name, log, space, seed, StepKNNModel()) for seed in SEEDS]
    random = [trials_to_top("random", log, space, seed) for seed in SEEDS]
    print(f"\ntrials to the top 1%: {name} {guided} random {random}")
    # about half as many trials as random search (see benchmarks/RESULTS.md for the figures)
    assert sum(guided) <= 0.6 * sum(random), (guided, random)
    assert statistics.median(guided) <= 0.7 * statistics.median(random), (guided, random)


def test_with_the_real_xgb_model_too(replay: tuple[ReplayLog, LogSpace]) -> None:
    try:
        resolve_model("xgb")
    except ModelUnavailable as err:
        pytest.skip(str(err))
    log, space = replay
    seeds = range(10)
    random = [trials_to_top("random", log, space, seed) for seed in seeds]
    for name in ("sa", "evolutionary"):
        guided = [trials_to_top(name, log, space, seed, resolve_model("xgb")) for seed in seeds]
        print(f"\ntrials to the top 1% with xgb: {name} {guided} random {random}")
        assert sum(guided) <= 0.6 * sum(random), (name, guided, random)


def test_ga_runs_on_measured_speed_only(replay: tuple[ReplayLog, LogSpace]) -> None:
    log, space = replay
    tuner = GATuner(log.task, space, seed=0, population=8)
    device = ReplayRunner(log)
    tuner.tune(64, device.measure, batch_size=8)
    assert tuner.learner is None and tuner.trials == 64 and not device.misses
    cost = {steps_key(c.steps): v for c, v in tuner.measured}
    assert [cost[steps_key(p.steps)] for p in tuner.parents()] == sorted(cost.values())[:8]


@pytest.mark.parametrize("cls", [SATuner, EvolutionaryTuner])
def test_a_seed_replays_the_same_search(
    replay: tuple[ReplayLog, LogSpace], cls: type[SATuner] | type[EvolutionaryTuner]
) -> None:
    log, space = replay

    def run(seed: int) -> list[str]:
        tuner = cls(log.task, space, seed=seed, model=StepKNNModel(), plan_size=16)
        tuner.tune(48, ReplayRunner(log).measure, batch_size=8)
        return [steps_key(c.steps) for c, _ in tuner.measured]

    assert run(3) == run(3) and run(3) != run(4)


def _measure_with_failures(log: ReplayLog) -> Callable[[list[Candidate]], list[MeasureResult]]:
    device = ReplayRunner(log)

    def measure(cands: list[Candidate]) -> list[MeasureResult]:
        out = device.measure(cands)
        return [MeasureResult((), MeasureErrorNo.COMPILE_ERROR, "x") if i % 4 == 3 else r
                for i, r in enumerate(out)]

    return measure


@pytest.mark.parametrize("cls", [SATuner, EvolutionaryTuner])
def test_every_plan_comes_from_a_model_fitted_on_all_records_measured_before_it(
    replay: tuple[ReplayLog, LogSpace], cls: type[SATuner] | type[EvolutionaryTuner]
) -> None:
    log, space = replay
    spy = SpyModel()
    tuner = cls(log.task, space, seed=0, model=spy, plan_size=16)
    plans: list[tuple[int, int]] = []  # (records measured, records of the model's last fit) per plan
    search = tuner.search
    tuner.search = lambda n: plans.append((len(tuner.measured), len(spy.fits[-1][1]))) or search(n)  # type: ignore[method-assign]
    tuner.tune(64, _measure_with_failures(log), batch_size=8)
    assert len(plans) >= 3 and all(measured == fitted for measured, fitted in plans), plans
    # fitted as soon as there were records enough, then only before plans: not after every batch
    sizes = [len(costs) for _, costs in spy.fits]
    assert sizes[0] == 8 and sizes[: len(plans)] == [fitted for _, fitted in plans], (sizes, plans)
    assert len(sizes) <= len(plans) + 1 < 64 // 8, (sizes, plans)  # + a fit after the last batch
    programs, costs = spy.fits[-1]
    measured = tuner.measured[: len(programs)]
    assert [steps_key(p.steps) for p in programs] == [steps_key(c.steps) for c, _ in measured]
    assert costs.count(float("inf")) == len(programs) // 4  # failed programs are in the data, infinitely slow
    assert all(p.task == log.task for p in programs)
    # every batch was scored by the model before any fit on it; the refits are noted with their batch
    quality = tuner.model_quality
    assert [(q.batch, q.size) for q in quality] == [(b, 8) for b in range(8)]
    assert [q.train_size for q in quality if q.fit_seconds > 0] == sizes
    assert quality[0].pairwise_accuracy is None
    assert all(q.pairwise_accuracy is not None and 0 <= q.pairwise_accuracy <= 1 for q in quality[1:])
    assert all(q.recall_at_k is not None for q in quality[1:])


@pytest.mark.parametrize("cls", [SATuner, EvolutionaryTuner])
def test_refitting_only_before_plans_measures_what_refitting_after_every_batch_would(
    replay: tuple[ReplayLog, LogSpace], cls: type[SATuner] | type[EvolutionaryTuner]
) -> None:
    log, space = replay

    class Eager(cls):  # type: ignore[valid-type,misc]
        def refit_after_batch(self) -> bool:
            return True

    def run(kind: type[Tuner]) -> tuple[list[str], int]:
        spy = SpyModel()
        tuner = kind(log.task, space, seed=2, model=spy, plan_size=16)
        tuner.tune(96, _measure_with_failures(log), batch_size=8)
        return [steps_key(c.steps) for c, _ in tuner.measured], len(spy.fits)

    (lazy, lazy_fits), (eager, eager_fits) = run(cls), run(Eager)
    assert lazy == eager and len(lazy) == 96
    assert eager_fits == 12 and lazy_fits <= 7, (lazy_fits, eager_fits)


def test_history_and_transfer_records_are_fitted_before_anything_is_proposed(
    replay: tuple[ReplayLog, LogSpace],
) -> None:
    log, space = replay
    spy = SpyModel()
    tuner = SATuner(log.task, space, seed=0, model=spy, epsilon=0.0)
    history = log.programs[:30]
    tuner.load_history(history)
    assert not spy.fits  # nothing is fitted until a program is to be proposed
    batch = tuner.next_batch(8)
    assert len(spy.fits) == 1 and len(spy.fits[0][1]) == 30 and tuner.plans == 1
    assert not {steps_key(c.steps) for c in batch} & {r.program_key for r in history}

    fresh = SATuner(log.task, space, seed=0, model=SpyModel(), epsilon=0.0)
    others = ReplayLog(DATA).programs[100:140]
    from autosched.runner.measure import MeasureInput

    fresh.add_transfer([MeasureInput(log.task, r.steps) for r in others], [r.median for r in others])
    fresh.next_batch(8)  # the very first batch is already planned by the model
    assert fresh.plans == 1 and len(fresh.learner.model.fits[0][1]) == 40  # type: ignore[union-attr]


@pytest.mark.parametrize(("epsilon", "share"), [(0.0, 0.0), (0.25, 0.25), (1.0, 1.0)])
def test_epsilon_share_of_random_programs(
    replay: tuple[ReplayLog, LogSpace], epsilon: float, share: float
) -> None:
    log, space = replay
    tuner = EvolutionaryTuner(log.task, space, seed=0, model=StepKNNModel(), epsilon=epsilon, plan_size=16)
    tuner.tune(16, ReplayRunner(log).measure, batch_size=8)  # two batches: the model is fitted
    drawn: list[Candidate] = []
    sample_new = tuner.sample_new
    tuner.sample_new = lambda n: drawn.extend(sample_new(n)) or drawn[-n:]  # type: ignore[method-assign]
    proposed = [c for _ in range(8) for c in tuner.next_batch(8)]
    assert len(proposed) == 64 and tuner.plans >= (2 if epsilon < 1 else 1)  # plans used up: made again
    assert abs(len(drawn) / len(proposed) - share) <= 0.1, len(drawn)


def test_each_plan_starts_from_the_best_predicted_of_the_last_generation_before(
    replay: tuple[ReplayLog, LogSpace],
) -> None:
    log, space = replay
    tuner = EvolutionaryTuner(log.task, space, seed=0, model=StepKNNModel(), plan_size=8, replan_after=8,
                              population=32, carry_ratio=0.5)
    tuner.tune(24, ReplayRunner(log).measure, batch_size=8)
    assert tuner.plans >= 2 and len(tuner.survivors) == 32
    tuner.search(8)  # one more plan, with the model as it is now: the survivors best predicted first
    scores = tuner.score(tuner.survivors).tolist()
    assert scores == sorted(scores, reverse=True)
    population = tuner.initial_population()
    measured = tuner.best_measured(6)  # measured_ratio 0.2 of 32
    carried: list[Candidate] = []
    for cand in tuner.survivors:
        taken = {c.key for c in measured + carried}
        if tuner.is_unseen(cand) and cand.key not in taken and len(carried) < 16:
            carried.append(cand)
    assert [c.key for c in population[:6]] == [c.key for c in measured]
    assert [c.key for c in population[6:6 + len(carried)]] == [c.key for c in carried] and carried
    assert len(population) == 32 and len({c.key for c in population}) == 32
    assert all(tuner.is_unseen(c) for c in population[6:])


def test_annealing_stops_early_when_its_pool_stops_changing(replay: tuple[ReplayLog, LogSpace]) -> None:
    log, space = replay

    class Flat(StepKNNModel):
        def predict(self, programs):  # type: ignore[no-untyped-def]
            import numpy as np

            return np.zeros(len(programs))

    tuner = SATuner(log.task, space, seed=0, model=Flat(), n_iter=200, early_stop=5, plan_size=8)
    tuner.tune(16, ReplayRunner(log).measure, batch_size=8)
    assert tuner.plans >= 1 and tuner.last_iterations < 200


def test_unknown_tuner_names_list_the_valid_ones(replay: tuple[ReplayLog, LogSpace]) -> None:
    log, space = replay
    valid = "evolutionary, ga, grid, random, sa, xgb"
    with pytest.raises(ValueError, match=f"unknown tuner 'anneal'; tuners: {valid}"):
        make_tuner("anneal", log.task, space)
