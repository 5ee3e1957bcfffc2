"""The task scheduler: shares a trial budget among the tasks of a network (Ansor, section 6).

The objective is the estimated end-to-end latency f = sum_i w_i * s_i * g_i + o, where g_i is task
i's best latency so far (its kernel timed alone), w_i its weight (how often it occurs), s_i how much
slower its kernels run inside the network than alone, and o the network's time outside its tasks'
kernels (s_i = 1 and o = 0 until the network is measured: :meth:`TaskScheduler.calibrate`). Every
task first gets ``warmup`` trials (default one round; fewer when the budget is too small for a full
round per task, so that each gets at least one trial), the tasks with fewest trials first; after
that each round goes to the task whose next round is expected to cut f most. For task i after t_i
trials that expected slope is

    df/dt_i ~ w_i * s_i * (alpha * backward_i + (1 - alpha) * min(-g_i / t_i, beta * C_i / V_i - g_i))

with ``backward_i`` the slope of g_i over its last rounds (its recent improvement curve),
``-g_i / t_i`` the optimistic guess that g keeps falling as fast as it did on average, and
``beta * C_i / V_i - g_i`` the distance to the latency task i would have at the best speed V_i
(FLOP/s) reached by a similar task (same operator) with C_i its FLOPs. With probability
``epsilon`` a round goes to a random task instead (epsilon-greedy). ``round-robin`` gives rounds in
turn, the baseline.

The scheduler knows nothing of measuring: :meth:`TaskScheduler.run` calls ``tune_round(i, n)``,
which tunes task i for n more trials and returns (its trials in all, its best latency in seconds).

**Several tasks at once.** With ``slots`` > 1 (one per device that can measure at the same time),
up to ``slots`` rounds of *different* tasks run at once, each ``tune_round`` in a thread of its own;
everything else (choosing a task, recording a round, the callback) happens in the calling thread.
Whenever a round ends, the freed slot goes to the next task as above, chosen among the tasks that
are not in flight (warm-up rounds first). A round is given at most the trials not yet spent nor
handed to rounds in flight, so the trials given out never exceed the budget; a round that ends with
fewer trials than it was given leaves the rest to later rounds. If a round fails (or the caller is
interrupted), no new round starts, ``halt()`` asks the rounds in flight to stop early, they are
waited for, and the first error is raised.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

#: scheduling strategies by name
STRATEGIES = ("gradient", "round-robin")


@dataclass(slots=True)
class TaskState:
    """What the scheduler knows of one task: its FLOPs, weight, kind (similar tasks share it),
    trials so far, the best latency after each round (as (trials, seconds) points), and how much
    slower its kernels run in the network than alone (``scale``, 1 until measured)."""

    flops: int
    weight: int
    kind: str
    trials: int = 0
    history: list[tuple[int, float]] = field(default_factory=list)
    scale: float = 1.0

    @property
    def best(self) -> float:
        """The best latency in seconds so far (inf: no valid program yet)."""
        return self.history[-1][1] if self.history else math.inf


@dataclass(frozen=True, slots=True)
class Round:
    """One round given out: the task, its trials in all after it, the trials of all tasks and the
    estimated latency after it, and how many trials the round was given."""

    task: int
    trials: int
    total_trials: int
    latency: float
    given: int = 0


TuneRound = Callable[[int, int], tuple[int, float]]


class TaskScheduler:
    """Chooses which task gets the next round of ``round_trials`` trials (see the module docstring)."""

    def __init__(
        self,
        tasks: Sequence[TaskState],
        strategy: str = "gradient",
        round_trials: int = 16,
        *,
        alpha: float = 0.2,
        beta: float = 2.0,
        window: int = 3,
        epsilon: float = 0.05,
        seed: int = 0,
        warmup: int | None = None,
    ) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown task scheduler {strategy!r}; schedulers: {', '.join(STRATEGIES)}")
        if not tasks:
            raise ValueError("the task scheduler needs at least one task")
        if round_trials < 1:
            raise ValueError(f"round_trials must be >= 1, got {round_trials}")
        self.tasks = list(tasks)
        self.strategy = strategy
        self.round_trials = round_trials
        self.warmup = max(1, warmup if warmup is not None else round_trials)
        self.overhead = 0.0  # seconds per network call outside the tasks' kernels (calibrate())
        self.alpha, self.beta, self.window, self.epsilon = alpha, beta, window, epsilon
        self.rng = random.Random(seed)
        self.rounds: list[Round] = []
        self._turn = 0

    def latency(self) -> float:
        """The estimated end-to-end latency: the sum of weight x scale x best latency, plus the
        overhead (inf while a task has no valid program)."""
        return sum(t.weight * t.scale * t.best for t in self.tasks) + self.overhead

    def kernels_latency(self) -> float:
        """The sum of weight x best latency: the tasks' kernels timed alone, uncalibrated."""
        return sum(t.weight * t.best for t in self.tasks)

    def calibrate(self, in_network: Sequence[float], total: float) -> None:
        """Take a measurement of the whole network: ``in_network[i]`` seconds per call spent in task
        i's kernels, ``total`` seconds per call. Each task's ``scale`` becomes its in-network time
        over weight x best, and the overhead the time outside every kernel, so :meth:`latency`
        equals ``total`` now and follows the tasks' improvements from here."""
        if len(in_network) != len(self.tasks):
            raise ValueError(f"{len(in_network)} in-network times for {len(self.tasks)} tasks")
        for t, spent in zip(self.tasks, in_network, strict=True):
            alone = t.weight * t.best
            if math.isfinite(alone) and alone > 0 and spent > 0:
                t.scale = spent / alone
        self.overhead = max(0.0, total - sum(in_network))

    def total_trials(self) -> int:
        """Trials given to all tasks so far."""
        return sum(t.trials for t in self.tasks)

    def _best_speed(self, kind: str) -> float:
        speeds = [
            t.flops / t.best for t in self.tasks if t.kind == kind and math.isfinite(t.best) and t.best > 0
        ]
        return max(speeds, default=0.0)

    def gradient(self, i: int) -> float:
        """The expected change of the end-to-end latency per trial given to task i (negative: it falls)."""
        t = self.tasks[i]
        if not math.isfinite(t.best):
            return -math.inf  # no valid program yet: the latency is unknown, any program helps most
        points = t.history[-(self.window + 1) :]
        done = points[-1][0] - points[0][0]
        backward = (points[-1][1] - points[0][1]) / done if done > 0 else 0.0
        forward = -t.best / max(t.trials, 1)
        speed = self._best_speed(t.kind)
        if speed > 0:
            forward = min(forward, self.beta * t.flops / speed - t.best)
        return t.weight * t.scale * (self.alpha * backward + (1 - self.alpha) * forward)

    def next_task(self, exclude: frozenset[int] = frozenset()) -> int:
        """The task that gets the next round (never one of ``exclude``, which must leave one)."""
        live = [i for i in range(len(self.tasks)) if i not in exclude]
        warm = [i for i in live if self.tasks[i].trials < self.warmup]
        if warm:
            return min(warm, key=lambda i: (self.tasks[i].trials, i))
        if self.strategy == "round-robin":
            while self._turn % len(self.tasks) in exclude:
                self._turn += 1
            self._turn += 1
            return (self._turn - 1) % len(self.tasks)
        if self.rng.random() < self.epsilon:
            return self.rng.choice(live)
        return min(live, key=lambda i: (self.gradient(i), i))

    def round_size(self, i: int, free: int, exclude: frozenset[int] = frozenset()) -> int:
        """Trials for task i's next round out of ``free`` trials not yet given out: ``round_trials``;
        a warm-up round at most what the task still lacks of ``warmup``, and a first round leaves
        at least one trial to each other task still waiting for its first (not in ``exclude``), so a
        budget smaller than a round per task still measures every task's first program."""
        t = self.tasks[i]
        n = min(self.round_trials, free)
        if t.trials < self.warmup:
            n = min(n, self.warmup - t.trials)
        if t.trials == 0:
            waiting = sum(1 for j, u in enumerate(self.tasks) if u.trials == 0 and j not in exclude | {i})
            n = min(n, max(1, free // (waiting + 1)))
        return n

    def record(self, i: int, trials: int, best: float, given: int = 0) -> Round:
        """Note that task i now has ``trials`` trials and best latency ``best`` (seconds), after a
        round that was given ``given`` trials."""
        t = self.tasks[i]
        t.trials = trials
        if math.isfinite(best) or t.history:
            t.history.append((trials, min(best, t.best)))
        r = Round(i, trials, self.total_trials(), self.latency(), given)
        self.rounds.append(r)
        return r

    def run(
        self,
        budget: int,
        tune_round: TuneRound,
        callback: Callable[[Round], None] | None = None,
        *,
        slots: int = 1,
        halt: Callable[[], None] | None = None,
    ) -> None:
        """Give out rounds until ``budget`` trials in all (counting those already done) are spent,
        or no task can take more trials (a round that adds none retires its task). ``slots`` > 1:
        up to that many rounds of different tasks at once, ``halt`` stopping them early on an error
        (see the module docstring)."""
        if slots > 1:
            self._run_parallel(budget, tune_round, callback, slots, halt)
            return
        retired: frozenset[int] = frozenset()
        while self.total_trials() < budget and len(retired) < len(self.tasks):
            i = self.next_task(retired)
            n = self.round_size(i, budget - self.total_trials(), retired)
            trials, best = tune_round(i, n)
            retired |= self._finish(i, n, trials, best, callback)

    def _finish(
        self, i: int, given: int, trials: int, best: float, callback: Callable[[Round], None] | None
    ) -> frozenset[int]:
        """Record the end of task i's round; the task, to retire, if the round added no trial."""
        t = self.tasks[i]
        retire = frozenset({i}) if trials <= t.trials else frozenset()
        r = self.record(i, max(trials, t.trials), best, given)
        if callback is not None:
            callback(r)
        return retire

    def _run_parallel(
        self,
        budget: int,
        tune_round: TuneRound,
        callback: Callable[[Round], None] | None,
        slots: int,
        halt: Callable[[], None] | None,
    ) -> None:
        retired: frozenset[int] = frozenset()
        running: dict[Future[tuple[int, float]], tuple[int, int]] = {}  # round -> (task, trials given)
        with ThreadPoolExecutor(slots, thread_name_prefix="asc-round") as pool:
            try:
                while True:
                    while len(running) < slots:
                        busy = retired | {i for i, _ in running.values()}
                        free = budget - self.total_trials() - sum(n for _, n in running.values())
                        if free <= 0 or len(busy) >= len(self.tasks):
                            break
                        i = self.next_task(busy)
                        n = self.round_size(i, free, busy)
                        running[pool.submit(tune_round, i, n)] = (i, n)
                    if not running:
                        return
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in sorted(done, key=lambda f: running[f]):
                        i, n = running.pop(future)
                        trials, best = future.result()
                        retired |= self._finish(i, n, trials, best, callback)
            except BaseException:
                if halt is not None:
                    halt()
                wait(running)  # the rounds in flight stop after their current batch
                raise
