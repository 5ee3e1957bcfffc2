"""Load a GPU program written by a GPU builder (a ``.json`` file in the kernel cache) as a callable,
with the loader of its kind: the measurement worker's counterpart of :func:`load_kernel` for C."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from .gpu_program import GpuCallable, GpuProgram
from .kernel import ArgSpec
from .load import LoadError

#: how this machine builds and loads a program of one GPU kind
ProgramLoader = Callable[[GpuProgram, Sequence[ArgSpec]], GpuCallable]

#: program kind -> its loader; filled by :func:`~autosched.backends.register_backend`
_LOADERS: dict[str, ProgramLoader] = {}


def register_program_loader(kind: str, loader: ProgramLoader) -> None:
    """Load programs of GPU kind ``kind`` with ``loader`` (the backend registry calls this)."""
    _LOADERS[kind] = loader


def is_gpu_program(path: str | Path) -> bool:
    """Whether ``path`` names a GPU program rather than a C library."""
    return str(path).endswith(".json")


def load_program(path: str | Path, specs: Sequence[ArgSpec]) -> GpuCallable:
    """The program at ``path`` compiled and loaded on this machine's device; a source the device's
    compiler rejects raises :class:`~autosched.runner.CompileError`."""
    try:
        program = GpuProgram.from_json(Path(path).read_text())
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise LoadError(f"cannot read the GPU program {path}: {e}") from None
    loader = _LOADERS.get(program.kind)
    if loader is None:
        known = ", ".join(sorted(_LOADERS))
        raise LoadError(f"GPU program {path} is of unknown kind {program.kind!r}; known: {known}")
    return loader(program, specs)
