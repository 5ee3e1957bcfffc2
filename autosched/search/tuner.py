"""The tuner loop in AutoTVM's shape: ``next_batch`` -> measure -> ``update``, and two tuners.

    tuner = RandomTuner(task, space, seed=0)
    tuner.tune(n_trial=64, measure=measure, early_stopping=32, callbacks=[progress])

``measure(candidates)`` returns one :class:`~autosched.runner.measure.MeasureResult` per candidate
(None for one measured elsewhere); a ``measure`` with a ``reserve(n)`` method (a run sharing its
log with others, :class:`~autosched.search.measurer.Measurer`) is asked first how many of the
``n`` programs the batch may measure (0: the trials are done); callbacks are called as
``callback(tuner, candidates, results)`` after every batch. A tuner never
proposes a program it has already seen (measured in this run or loaded from a log by
:meth:`Tuner.load_history`), so a resumed run continues where the last one stopped.

A tuner with a cost model (``model=``: a model object or a name of :mod:`autosched.model`) keeps
every record of the task in a :class:`~autosched.search.learning.Learner`: after each measured
batch it scores the batch with the model (:attr:`Tuner.model_quality`), then refits on all records
(a model-guided tuner refits only when its next batch reads the model: before a new plan, so every
plan comes from a model fitted on everything measured, without fits nothing reads); records loaded by
:meth:`Tuner.load_history` or :meth:`Tuner.add_transfer` are fitted on before the next program is
proposed. Model-guided tuners (``sa``/``xgb``, ``evolutionary``) need a model;
the others only report its quality.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from ..diagnostics import warn
from ..records import Record
from ..runner.measure import MeasureInput, MeasureResult
from ..schedule import ScheduleError
from ..task import Task
from .baseline import is_default
from .learning import CostModel, Learner, ModelQuality, ModelUnavailable, resolve_model
from .tuning_space import Candidate, TuningSpace

#: measures a batch: one result per candidate, None for a candidate measured elsewhere (another run)
Measure = Callable[[list[Candidate]], Sequence[MeasureResult | None]]


class Callback(Protocol):
    """Called after each measured batch."""

    def __call__(self, tuner: Tuner, candidates: list[Candidate], results: list[MeasureResult]) -> None: ...


#: tuners by name, as ``--tuner`` and ``asc.tune(tuner=...)`` take them
TUNERS: dict[str, type[Tuner]] = {}


def register_tuner(name: str) -> Callable[[type[Tuner]], type[Tuner]]:
    """Class decorator: make a tuner available by ``name``."""

    def register(cls: type[Tuner]) -> type[Tuner]:
        if name in TUNERS:
            raise ValueError(f"a tuner named {name!r} is already registered")
        TUNERS[name] = cls
        return cls

    return register


class Tuner:
    """Base tuner: bookkeeping (trials, best, seen programs) and the tuning loop.

    Subclasses implement :meth:`next_batch` and may extend :meth:`update` and :meth:`has_next`.
    ``model`` is a cost model or its name (see the module docstring); tuners whose
    :attr:`default_model` is set use that model when none is given.
    """

    #: the model a model-guided tuner uses when none is given (None: the tuner needs none)
    default_model: str | None = None

    def __init__(
        self, task: Task, space: TuningSpace, seed: int | None = None, model: CostModel | str | None = None
    ) -> None:
        self.task = task
        self.space = space
        self.seed = seed
        self.rng = random.Random(seed)
        self.seen: set[str] = set()
        self.trials = 0  # measurements so far, including those loaded from a log
        self.best_cost = float("inf")
        self.best_candidate: Candidate | None = None
        self.best_trial = -1
        self.stop_reason = ""
        #: every measured program and its cost (``inf``: failed), history included, in order
        self.measured: list[tuple[Candidate, float]] = []
        chosen = model if model is not None else self.default_model
        self.learner = Learner(resolve_model(chosen)) if chosen is not None else None
        self.model_quality: list[ModelQuality] = []  # one entry per refit after measured batches
        self.loaded = False  # records loaded (history, transfer) that the model was not fitted on
        self.batches = 0  # measured batches of this run

    # -- to implement
    def next_batch(self, batch_size: int) -> list[Candidate]:
        """Up to ``batch_size`` new programs to measure (fewer, or none, when the space runs dry)."""
        raise NotImplementedError

    def has_next(self) -> bool:
        """Whether the tuner can still propose programs."""
        return True

    # -- bookkeeping
    def is_new(self, candidate: Candidate) -> bool:
        """Whether ``candidate``'s program has not been proposed or measured before; marks it seen."""
        key = candidate.key
        if key in self.seen:
            return False
        self.seen.add(key)
        return True

    def update(self, candidates: Sequence[Candidate], results: Sequence[MeasureResult]) -> None:
        """Learn from a measured batch: track the best, then (with a model) score the batch with the
        model and refit it (only score it, where :meth:`refit_after_batch` says not to refit)."""
        self._record(candidates, results)
        if self.refit_after_batch():
            self.refit(self.batches)
        elif self.learner is not None:
            quality = self.learner.assess(self.batches, self.trials)
            if quality is not None:
                self.model_quality.append(quality)
        self.batches += 1

    def refit_after_batch(self) -> bool:
        """Whether the model is refitted right after the measured batch (here: always; a
        model-guided tuner refits when its next batch reads the model)."""
        return True

    def refit(self, batch: int) -> None:
        """Score the records measured since the last fit (up to measured batch ``batch``; -1: loaded
        ones) with the model, then fit it on all records; nothing without a model or new records."""
        if self.learner is not None:
            quality = self.learner.refit(batch, self.trials)
            if quality is not None:
                self.model_quality.append(quality)

    def _record(self, candidates: Sequence[Candidate], results: Sequence[MeasureResult]) -> None:
        """Bookkeeping of measured candidates: seen programs, the best, the model's records."""
        for cand, res in zip(candidates, results, strict=True):
            self.seen.add(cand.key)
            if res.ok and res.median < self.best_cost:
                self.best_cost, self.best_candidate, self.best_trial = res.median, cand, self.trials
            self.trials += 1
            self.measured.append((cand, res.median))
        if self.learner is not None:
            # a template space's model reads knob values, which programs from elsewhere (the
            # default schedule measured first, sketches in a shared log) lack: it learns from its
            # own programs only
            learn = [(c, r) for c, r in zip(candidates, results, strict=True)
                     if self.space.kind != "template" or self.in_space(c)]
            self.learner.add([self.model_input(c) for c, _ in learn], [r.median for _, r in learn])

    def model_input(self, candidate: Candidate) -> MeasureInput:
        """``candidate`` as the model reads it: a template program's knob values only in a template
        space's own model (another space's model reads the loop features alone, so a log holding
        both kinds of programs trains and queries one model of one feature width)."""
        program = candidate.program
        if self.space.kind != "template" and _is_template(candidate):
            program = {k: v for k, v in (program or {}).items() if k != "knobs"}
        return MeasureInput(self.task, candidate.steps, program)

    def in_space(self, candidate: Candidate) -> bool:
        """Whether ``candidate`` is a program of this tuner's space: not the hand-written default
        schedule measured first, which the space cannot mutate, nor (in a template space) a program
        of another space found in a shared log."""
        if self.space.kind == "template":
            return _is_template(candidate)
        return not is_default(candidate)

    #: draws per requested program before :meth:`sample_new` gives up (the space looks exhausted)
    MAX_DRAWS = 64

    def sample_new(self, n: int) -> list[Candidate]:
        """Up to ``n`` random programs not seen before (marked seen); fewer when the space runs dry."""
        batch: list[Candidate] = []
        draws = 0
        while len(batch) < n and draws < self.MAX_DRAWS * max(1, n):
            draws += 1
            try:
                cand = self.space.sample(self.rng)
            except ScheduleError:  # a drawn point that is no program: draw again
                continue
            if self.is_new(cand):
                batch.append(cand)
        return batch

    def load_history(self, records: Iterable[Record]) -> int:
        """Take in earlier measurements of this task (a resumed run); returns how many. The model
        is refitted on them before the next program is proposed."""
        records = list(records)
        candidates = [Candidate(r.steps, r.program or {}) for r in records]
        results = [MeasureResult(r.costs, r.error_no, r.error_msg, r.all_cost, r.timestamp) for r in records]
        self._record(candidates, results)
        self.loaded = self.loaded or bool(records)
        return len(records)

    def add_transfer(self, inputs: Sequence[MeasureInput], costs: Sequence[float]) -> None:
        """Records of other workloads (transfer learning): the model is fitted on them (and later on
        the task's own records alongside) before the next program is proposed. Ignored without a
        model."""
        if self.learner is not None:
            self.learner.add_transfer(inputs, costs)
            self.loaded = True

    def refit_pending(self) -> None:
        """Fit the model on records loaded since the last fit (history, transfer), if any."""
        if self.loaded and self.learner is not None:
            self.learner.refit(-1, self.trials)
        self.loaded = False

    # -- the loop
    def tune(
        self,
        n_trial: int,
        measure: Measure,
        *,
        batch_size: int = 8,
        early_stopping: int | None = None,
        timeout: float | None = None,
        callbacks: Sequence[Callback] = (),
    ) -> None:
        """Measure programs until ``n_trial`` trials in all (those loaded by :meth:`load_history`
        count), ``early_stopping`` trials without a better program, ``timeout`` seconds of this
        call, or an exhausted space; :attr:`stop_reason` says which."""
        start = time.monotonic()
        reserve = getattr(measure, "reserve", None)
        while True:
            reason = self._stop(n_trial, early_stopping, timeout, start)
            if reason:
                self.stop_reason = reason
                return
            self.refit_pending()
            wanted = min(batch_size, n_trial - self.trials)
            if reserve is not None and (wanted := reserve(wanted)) == 0:
                for callback in callbacks:  # other runs measured the rest: take their records in
                    callback(self, [], [])
                self.stop_reason = f"{n_trial} trials done"
                return
            candidates = self.next_batch(wanted)
            if not candidates:
                if reserve is not None:
                    measure([])  # gives the reservation back
                self.stop_reason = "search space exhausted"
                return
            answers = measure(candidates)
            pairs = [(c, r) for c, r in zip(candidates, answers, strict=True) if r is not None]
            measured, results = [c for c, _ in pairs], [r for _, r in pairs]
            self.update(measured, results)
            for callback in callbacks:
                callback(self, measured, results)

    def _stop(self, n_trial: int, early_stopping: int | None, timeout: float | None, start: float) -> str:
        if self.trials >= n_trial:
            return f"{n_trial} trials done"
        stale = self.trials - self.best_trial
        if early_stopping is not None and self.best_trial >= 0 and stale > early_stopping:
            return f"no better program in {early_stopping} trials"
        if timeout is not None and time.monotonic() - start >= timeout:
            return f"time budget of {timeout:g} s spent"
        if not self.has_next():
            return "search space exhausted"
        return ""


@register_tuner("random")
class RandomTuner(Tuner):
    """Draws programs uniformly from the space's random sampler, never the same program twice."""

    def __init__(
        self, task: Task, space: TuningSpace, seed: int | None = None, model: CostModel | str | None = None
    ) -> None:
        super().__init__(task, space, seed, model)
        self.dry = False  # a whole batch of draws found nothing new

    def next_batch(self, batch_size: int) -> list[Candidate]:
        batch = self.sample_new(batch_size)
        self.dry = not batch
        return batch

    def has_next(self) -> bool:
        return not self.dry


@register_tuner("grid")
class GridTuner(Tuner):
    """Walks the space's enumeration in index order, skipping invalid and already seen points."""

    def __init__(
        self, task: Task, space: TuningSpace, seed: int | None = None, model: CostModel | str | None = None
    ) -> None:
        super().__init__(task, space, seed, model)
        self.cursor = 0
        self.size = space.grid_size()

    def next_batch(self, batch_size: int) -> list[Candidate]:
        batch: list[Candidate] = []
        while len(batch) < batch_size and self.cursor < self.size:
            cand = self.space.grid_point(self.cursor)
            self.cursor += 1
            if cand is not None and self.is_new(cand):
                batch.append(cand)
        return batch

    def has_next(self) -> bool:
        return self.cursor < self.size


def make_tuner(
    name: str,
    task: Task,
    space: TuningSpace,
    seed: int | None = None,
    model: CostModel | str | None = None,
    **options: Any,
) -> Tuner:
    """The tuner registered as ``name``, with cost model ``model`` (an object or a name; None: the
    tuner's default) and the tuner's own keyword ``options``. Where the model cannot be made here
    (xgboost missing), a warning says so and random search (without a model) is used instead.
    Raises ``ValueError`` listing the valid names for an unknown tuner or model name."""
    try:
        cls = TUNERS[name]
    except KeyError:
        raise ValueError(f"unknown tuner {name!r}; tuners: {', '.join(sorted(TUNERS))}") from None
    try:
        return cls(task, space, seed, model=model, **options)
    except ModelUnavailable as err:
        warn(f"{err}; tuning with random search instead of the {name} tuner")
        return RandomTuner(task, space, seed)


def _is_template(candidate: Candidate) -> bool:
    """Whether ``candidate`` is a knob configuration of a template (its program holds knob values)."""
    return bool(candidate.program) and candidate.program.get("space") == "template"
