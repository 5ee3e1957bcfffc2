"""The backend registry: what each target kind parses, emits, builds, measures and exports with.

A :class:`Backend` subclass names its kind's :class:`~autosched.target.TargetKind` (the options a
target string takes, its defaults, its compiler flags) and is registered once with
:func:`register_backend`, which registers the target kind too (and, for GPU kinds, the loader the
measurement worker uses). :func:`backend_for` finds the backend of a target; :func:`backends` lists
them. Nothing outside ``autosched/backends/`` lists kinds or branches on a kind's name: it asks the
backend (``gpu``), or the target (:attr:`~autosched.target.Target.is_cpu`, ``is_native``, ``like``).
A kind from outside the package registers the same way, from a module named by a
``autosched.backends`` entry point (see :mod:`.plugins`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, TypeVar

from ..lower.ir import PrimFunc
from ..ops import Workload
from ..ops.schedules import KIND_DEFAULTS
from ..runner.gpu_load import ProgramLoader, register_program_loader
from ..runner.gpu_program import GpuCallable
from ..runner.kernel import ArgSpec, Kernel, ScalarArg
from ..runner.measure import Builder, MeasureOption, Runner
from ..schedule import Schedule
from ..target import Target, TargetKind, register_kind

#: what a backend builds: a callable over numpy arrays that checks them first
Built = Kernel | GpuCallable


class Backend:
    """How programs for one target kind become source, a callable, and measurements.

    ``gpu`` says whether programs may bind loops to GPU threads (lowering checks it).
    """

    kind: ClassVar[str]
    #: the target kind: options, defaults, compiler flags (registered with the backend)
    target_kind: ClassVar[type[TargetKind]]
    gpu: ClassVar[bool] = False

    def source(
        self, func: PrimFunc, target: Target, portable: bool = False, timing: bool | None = None
    ) -> str:
        """The source text of ``func`` for ``target`` (pure: nothing is compiled)."""
        raise NotImplementedError

    def build(
        self,
        func: PrimFunc,
        target: Target,
        specs: Sequence[ArgSpec],
        sizes: Sequence[str] = (),
        cache_dir: Path | None = None,
        scalars: Sequence[ScalarArg] = (),
    ) -> Built:
        """``func`` compiled (into ``cache_dir``, by default the kernel cache) and loaded: a
        callable over numpy arrays (inputs, then outputs; ``scalars`` at their places)."""
        raise NotImplementedError

    def builder(self, option: MeasureOption) -> Builder:
        """The builder that tuning uses for this kind."""
        raise NotImplementedError(f"no builder for {self.kind} targets")

    def runner(self, option: MeasureOption) -> Runner:
        """The runner that tuning uses for this kind."""
        raise NotImplementedError(f"no runner for {self.kind} targets")

    def default_schedule(self, wl: Workload, target: Target) -> tuple[Schedule, str] | None:
        """The schedule ``wl`` gets on ``target`` before tuning, with its name, where this kind
        has its own (None: the hand-written CPU schedules, else the naive one; see
        :func:`~autosched.ops.schedules.default_schedule`)."""
        return None

    def program_loader(self) -> ProgramLoader | None:
        """How the measurement worker loads a GPU program of this kind (None: C libraries only)."""
        return None


_BACKENDS: dict[str, Backend] = {}
B = TypeVar("B", bound=type[Backend])


def register_backend(cls: B) -> B:
    """Class decorator: register a :class:`Backend` and its target kind for ``cls.kind`` (a kind
    registered again replaces the earlier one)."""
    if cls.target_kind.name != cls.kind:
        named = cls.target_kind.name
        raise ValueError(f"backend {cls.__name__} of kind {cls.kind!r} names target kind {named!r}")
    register_kind(cls.target_kind)
    backend = _BACKENDS[cls.kind] = cls()
    KIND_DEFAULTS[cls.kind] = backend.default_schedule
    loader = backend.program_loader()
    if loader is not None:
        register_program_loader(cls.kind, loader)
    return cls


def backends() -> list[Backend]:
    """The registered backends, by kind name."""
    return [_BACKENDS[k] for k in sorted(_BACKENDS)]


def gpu_kinds() -> list[str]:
    """The names of the registered GPU kinds."""
    return [b.kind for b in backends() if b.gpu]


def backend_for(target: Target | str) -> Backend:
    """The backend of ``target``'s kind; a kind without one is a one-line ``NotImplementedError``."""
    kind = Target.parse(target).kind
    try:
        return _BACKENDS[kind]
    except KeyError:
        known = ", ".join(sorted(_BACKENDS))
        raise NotImplementedError(f"no backend for {kind!r} targets; backends exist for: {known}") from None
