"""The backend registry: what each target kind emits, builds and measures with, in one registry.

A :class:`Backend` is registered for a target kind name (``c``, ``opencl``, ``cuda``) with
:func:`register_backend`; :func:`backend_for` finds the one of a target. The driver (``asc.emit``,
``asc.build``), :class:`~autosched.task.Task` and ``asc.tune`` ask the backend and never branch on
the kind's name, so a new kind (a remote board, another GPU API) plugs in by registering one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, TypeVar

from ..lower.ir import PrimFunc
from ..runner.gpu_program import GpuCallable
from ..runner.kernel import ArgSpec, Kernel, ScalarArg
from ..runner.measure import Builder, MeasureOption, Runner
from ..target import Target

#: what a backend builds: a callable over numpy arrays that checks them first
Built = Kernel | GpuCallable


class Backend:
    """How programs for one target kind become source, a callable, and measurements.

    ``gpu`` says whether programs may bind loops to GPU threads (lowering checks it).
    """

    kind: ClassVar[str]
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


_BACKENDS: dict[str, Backend] = {}
B = TypeVar("B", bound=type[Backend])


def register_backend(cls: B) -> B:
    """Class decorator: register a :class:`Backend` for the target kind ``cls.kind``."""
    _BACKENDS[cls.kind] = cls()
    return cls


def backend_for(target: Target | str) -> Backend:
    """The backend of ``target``'s kind; a kind without one is a one-line ``NotImplementedError``."""
    kind = Target.parse(target).kind
    try:
        return _BACKENDS[kind]
    except KeyError:
        known = ", ".join(sorted(_BACKENDS))
        raise NotImplementedError(f"no backend for {kind!r} targets; backends exist for: {known}") from None
