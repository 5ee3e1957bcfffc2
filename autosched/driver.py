"""The user-facing pipeline: ``lower`` -> ``emit`` -> ``build`` (compile, load, check arguments)."""

from __future__ import annotations

from collections.abc import Sequence

from .backends import backend_for
from .backends.base import Built
from .expr import Operation, Tensor, as_tensors, shape_vars
from .lower import lower as _lower
from .lower.gpu import GpuFunc, split_kernels
from .lower.ir import PrimFunc
from .runner.kernel import ArgSpec, size_sources
from .schedule import Schedule
from .target import Target

TargetLike = str | Target


def lower(
    sched: Schedule,
    args: Sequence[Tensor | Operation],
    name: str = "default_function",
    simple_mode: bool = True,
    target: TargetLike | None = None,
) -> PrimFunc | GpuFunc:
    """The loop-nest IR of ``sched`` over ``args`` (inputs, then outputs); print it to read it.

    A schedule that binds loops to ``blockIdx``/``threadIdx``/``vthread`` lowers for a GPU: its
    kernels, each with its launch (grid and block) and shared buffers, checked against the limits
    of ``target`` when one is given (else only the checks that need no device). ``simple_mode`` is
    accepted for te's signature: the IR always prints in its one, simple form.
    """
    tensors = as_tensors(list(args))
    if not _binds_threads(sched):
        return _lower(sched, tensors, name)
    func = _lower(sched, tensors, name, True)
    tgt = Target.parse(target) if target is not None else None
    threads = tgt.max_threads_per_block if tgt is not None else None
    shared = tgt.shared_memory_bytes if tgt is not None else None
    return split_kernels(func, threads or 1 << 31, shared or 1 << 62)


def _binds_threads(sched: Schedule) -> bool:
    tags = ("blockIdx.", "threadIdx.", "vthread")
    return any(tag.startswith(tags) for st in sched.stages.values() for tag in st.annotations.values())


def emit(
    sched: Schedule,
    args: Sequence[Tensor | Operation],
    target: TargetLike = "c",
    name: str = "default_function",
    portable: bool = False,
) -> str:
    """Source text of the kernel for ``target``: C (``portable`` gives strict C99), or the OpenCL /
    CUDA kernels of a GPU schedule (the host side that launches them lives in the runner)."""
    tgt = Target.parse(target)
    backend = backend_for(tgt)
    func = _lower(sched, as_tensors(list(args)), name, backend.gpu)
    return backend.source(func, tgt, portable=portable)


def arg_specs(sched: Schedule, args: Sequence[Tensor]) -> list[ArgSpec]:
    """Argument descriptions for the kernel: every computed (non-placeholder) tensor is written."""
    return [ArgSpec(t.name, tuple(t.shape), t.dtype, not sched[t].is_placeholder) for t in args]


def build(
    sched: Schedule,
    args: Sequence[Tensor | Operation],
    target: TargetLike = "c",
    name: str = "default_function",
) -> Built:
    """Compile ``sched`` for ``target`` and return a callable over numpy arrays: a C
    :class:`~autosched.runner.Kernel` (cached by content), or for ``opencl`` / ``cuda`` one that
    copies the arrays to the device, launches the kernels and copies the outputs back.

    The callable checks every array's shape, dtype and layout before any device code runs. Over
    tensors with symbolic shapes (``asc.size_var``) a C kernel is built once for every size: each
    call reads the variables' values from its arrays (all arrays must agree on each) and passes
    them to C.
    """
    tensors = as_tensors(list(args))
    tgt = Target.parse(target)
    backend = backend_for(tgt)
    specs = arg_specs(sched, tensors)
    sizes = [v.name for v in shape_vars(tensors)]
    size_sources(specs, sizes)  # each shape variable must be read from some array: checked first
    func = _lower(sched, tensors, name, backend.gpu)
    return backend.build(func, tgt, specs, sizes)
