"""One object composes a tuning run: :class:`TuneContext` (task, space, tuner, model, builder,
runner, executor, log, callbacks and the run's settings).

``asc.tune(task, ...)`` builds one from its keyword arguments and tunes through it. A service that
tunes many tasks builds a context once and tunes each task through it
(:func:`~autosched.search.tune.tune_with`): the builders, runners and the executor it made are
kept for the next task of the same target and closed when the context is::

    with TuneContext(task, trials=64, log="ops.jsonl", option=fast) as context:
        tune_with(context)                     # its own task
        tune_with(context, other_task)         # the same space, tuner, model and settings
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..backends import backend_for
from ..cluster import Executor, executor_for
from ..database import TuningStore
from ..runner.measure import Builder, MeasureOption, Runner
from ..task import Task
from .learning import CostModel
from .tuner import Callback, Tuner, make_tuner
from .tuning_space import make_space

#: the tuner used when none is named, per space kind (both with the default ``xgb`` model)
DEFAULT_TUNERS = {"sketch": "evolutionary", "template": "sa"}


def check_arguments(trials: object, log: Path | None) -> None:
    """Reject bad arguments before any work is done."""
    if isinstance(trials, bool) or not isinstance(trials, numbers.Integral):
        raise TypeError(f"trials must be an integer, got {trials!r}")
    if trials < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    if log is None:
        return
    folder = log.parent
    if not folder.is_dir():
        raise FileNotFoundError(f"cannot write the tuning log {log}: no directory {folder}")
    if log.is_dir():
        raise IsADirectoryError(f"the tuning log {log} is a directory")
    if not os.access(log if log.exists() else folder, os.W_OK):
        raise PermissionError(f"cannot write the tuning log {log}: permission denied")


@dataclass
class TuneContext:
    """What a tuning run is made of; the arguments of ``asc.tune`` (see there) by the same names.

    ``cluster`` (an address, a ``distributed.Client`` or an :class:`~autosched.cluster.Executor`;
    None: this machine's pools) gives the :meth:`executor`, made at the first run. Builders and
    runners the context makes (``builder`` and ``runner`` left None) serve every run of one target
    and are closed by :meth:`close`; those given are the caller's to close.
    """

    task: Task
    trials: int = 100
    log: str | Path | TuningStore | Literal[False] | None = None
    tuner: str | Tuner | None = None
    space: str = "sketch"
    model: str | CostModel | None = None
    builder: Builder | None = None
    runner: Runner | None = None
    cluster: Any = None
    security: Any = None
    callbacks: Sequence[Callback] = ()
    transfer: Sequence[str | os.PathLike[str]] = ()
    seed: int | None = None
    early_stopping: int | None = None
    timeout: float | None = None
    option: MeasureOption | None = None
    batch_size: int | None = None
    progress: bool | None = None
    remeasure: int = 3
    remeasure_repeat: int | None = None
    save_model: str | os.PathLike[str] | None = None
    measure_default: bool | None = None
    _made: Executor | None = field(default=None, init=False, repr=False)
    _parts: dict[str, tuple[Builder, Runner]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        check_arguments(self.trials, self.log_path())

    def log_path(self) -> Path | None:
        """The log named (None: a tuning store's, the database's by default, or no log with
        ``log=False``)."""
        if self.log is None or self.log is False or isinstance(self.log, TuningStore):
            return None
        return Path(self.log)

    def make_tuner(self, task: Task) -> Tuner:
        """The tuner of a run of ``task``: the one given (for the context's task alone), else one
        made by name on ``task``'s space."""
        if isinstance(self.tuner, Tuner):
            if self.model is not None:
                raise ValueError("pass model= to the Tuner you give, not to tune()")
            if task is not self.task:
                raise ValueError("a Tuner object tunes the task it was made for: name a tuner to tune others")
            return self.tuner
        made = make_space(task, self.space)
        name = self.tuner or DEFAULT_TUNERS.get(made.kind, "random")
        return make_tuner(name, task, made, self.seed, self.model)

    def measure_option(self) -> MeasureOption:
        """Timing and timeouts of the runs (``option``, else the defaults)."""
        return self.option or MeasureOption()

    def executor(self) -> Executor:
        """Where the runs build and measure (made once, from ``cluster`` and ``security``)."""
        if self._made is None:
            self._made = executor_for(self.cluster, self.security)
        return self._made

    def parts(self, task: Task) -> tuple[Builder, Runner]:
        """The builder and runner of a run of ``task``: those given, else made once per target."""
        key = str(task.target)
        if self.builder is not None and self.runner is not None:
            return self.builder, self.runner
        if key not in self._parts:
            opt, executor = self.measure_option(), self.executor()
            backend = backend_for(task.target)
            runner = self.runner or executor.runner(backend, opt, task.target)
            builder = self.builder
            make_builder = getattr(runner, "make_builder", None)  # a runner that needs its own builds
            if builder is None and make_builder is not None:
                builder = make_builder(opt)
            self._parts[key] = (builder or executor.builder(backend, opt), runner)
        return self._parts[key]

    def close(self) -> None:
        """Close the builders, runners and executor this context made (not those it was given)."""
        parts, self._parts = self._parts, {}
        for builder, runner in parts.values():
            for part, given in ((builder, self.builder), (runner, self.runner)):
                close = getattr(part, "close", None)
                if part is not given and close is not None:
                    close()
        made, self._made = self._made, None
        if made is not None and not isinstance(self.cluster, Executor):
            made.close()

    def __enter__(self) -> TuneContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
