"""The measurement contract (AutoTVM's shape): inputs, build results, measure results, error kinds.

A builder turns :class:`MeasureInput` s into :class:`BuildResult` s, a runner turns those into
:class:`MeasureResult` s. Failures are values (an :class:`MeasureErrorNo` and the message), never
exceptions that end a tuning run: a kernel that crashes, hangs or computes a wrong answer costs one
trial.
"""

from __future__ import annotations

import enum
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..schedule.steps import Step
from .kernel import ArgSpec

if TYPE_CHECKING:
    from ..task import Task


class MeasureErrorNo(enum.IntEnum):
    """Why a measurement has no valid time (``NO_ERROR``: it has one)."""

    NO_ERROR = 0
    INSTANTIATION_ERROR = 1  # the steps do not replay, lower or emit
    COMPILE_ERROR = 2
    BUILD_TIMEOUT = 3
    RUNTIME_ERROR = 4  # the kernel crashed, aborted or failed to load
    RUN_TIMEOUT = 5
    WRONG_ANSWER = 6  # the output differs from the reference
    UNKNOWN_ERROR = 7


@dataclass(frozen=True)
class MeasureOption:
    """How candidates are built and timed.

    Each repeat runs the kernel ``number`` times (raised until a repeat lasts ``min_repeat_ms``);
    ``repeat`` repeats are kept. ``flush_cache`` writes a buffer larger than the last-level cache
    before each repeat; ``cooldown_ms`` sleeps between repeats.
    """

    number: int = 1
    repeat: int = 3
    min_repeat_ms: float = 20.0
    flush_cache: bool = False
    cooldown_ms: float = 0.0
    build_timeout: float = 60.0
    run_timeout: float = 20.0
    n_parallel: int | None = None  # build processes; None: one per core
    check: bool = True  # compare each candidate's first run with the reference


@dataclass(frozen=True)
class MeasureInput:
    """One candidate: a task and a program (its schedule steps).

    ``program`` optionally says which point of which space the steps came from (it goes to the log).
    """

    task: Task
    steps: tuple[Step, ...]
    program: dict[str, Any] | None = field(default=None, compare=False, hash=False)


@dataclass(frozen=True)
class BuildResult:
    """A built candidate: its library (None on error), the kernel symbol and arguments."""

    lib_path: str | None
    func_name: str
    arg_specs: tuple[ArgSpec, ...]
    error_no: MeasureErrorNo = MeasureErrorNo.NO_ERROR
    error_msg: str = ""
    time_cost: float = 0.0  # seconds spent building


class Costs:
    """``ok`` and ``median`` for a measurement with ``costs`` and ``error_no`` (results, records)."""

    costs: tuple[float, ...]
    error_no: MeasureErrorNo

    @property
    def ok(self) -> bool:
        """Whether the measurement is valid (no error, at least one cost)."""
        return self.error_no == MeasureErrorNo.NO_ERROR and bool(self.costs)

    @property
    def median(self) -> float:
        """The median of the repeats, seconds (``inf`` when invalid)."""
        return statistics.median(self.costs) if self.ok else float("inf")


_C = TypeVar("_C", bound="Closing")


class Closing:
    """``with`` support for builders and runners that hold processes: leaving calls ``close()``."""

    def close(self) -> None:
        """Release the processes (a later call starts new ones)."""

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


@dataclass(frozen=True)
class MeasureResult(Costs):
    """The outcome of one candidate: seconds per run for every repeat (empty on error)."""

    costs: tuple[float, ...]
    error_no: MeasureErrorNo = MeasureErrorNo.NO_ERROR
    error_msg: str = ""
    all_cost: float = 0.0  # wall seconds to build and run this candidate
    timestamp: float = field(default=0.0)
    #: seconds per call of the calibration kernel around this measurement (0: not calibrated; see
    #: :mod:`autosched.runner.calibration`)
    calibration: float = 0.0


class Builder(Protocol):
    """Builds a batch of candidates."""

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]: ...


class Runner(Protocol):
    """Times a batch of built candidates (and checks them against the reference)."""

    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]: ...
