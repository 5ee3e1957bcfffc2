"""The user-facing pipeline: ``lower`` -> ``emit`` -> ``build`` (compile, load, check arguments)."""

from __future__ import annotations

from collections.abc import Sequence

from .backends import backend_for
from .backends.base import Built
from .expr import Operation, Tensor, Var, as_tensors, dag_free_vars, shape_vars
from .lower import lower as _lower
from .lower.gpu import GpuFunc, split_kernels
from .lower.ir import PrimFunc
from .runner.kernel import ArgSpec, ScalarArg, size_sources
from .schedule import Schedule
from .target import Target

TargetLike = str | Target
ArgLike = Tensor | Operation | Var


def lower(
    sched: Schedule,
    args: Sequence[ArgLike],
    name: str = "default_function",
    simple_mode: bool = True,
    target: TargetLike | None = None,
) -> PrimFunc | GpuFunc:
    """The loop-nest IR of ``sched`` over ``args`` (inputs, then outputs); print it to read it.

    A schedule that binds loops to ``blockIdx``/``threadIdx``/``vthread`` lowers for a GPU: its
    kernels, each with its launch (grid and block) and shared buffers, checked against the limits
    of ``target`` when one is given (else only the checks that need no device). ``simple_mode`` is
    accepted for te's signature: the IR always prints in its one, simple form.

    A var among ``args`` (``asc.var("bias", "float32")``) is a scalar argument (see :func:`build`).
    """
    tensors, scalars = split_args(sched, args)
    if not _binds_threads(sched):
        return _lower(sched, tensors, name, scalars=_params(scalars))
    _c_only(scalars, "GPU schedules")
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
    args: Sequence[ArgLike],
    target: TargetLike = "c",
    name: str = "default_function",
    portable: bool = False,
) -> str:
    """Source text of the kernel for ``target``: C (``portable`` gives strict C99), or the OpenCL /
    CUDA kernels of a GPU schedule (the host side that launches them lives in the runner)."""
    tgt = Target.parse(target)
    backend = backend_for(tgt)
    tensors, scalars = split_args(sched, args)
    if backend.gpu:
        _c_only(scalars, f"{tgt.kind} targets")
    func = _lower(sched, tensors, name, backend.gpu, _params(scalars))
    return backend.source(func, tgt, portable=portable)


def split_args(sched: Schedule, args: Sequence[ArgLike]) -> tuple[list[Tensor], list[ScalarArg]]:
    """The tensors among ``args`` and the vars, as scalar arguments at their places in the call.

    A var must be used by the computation or be a shape variable of the tensors (then the caller's
    value is checked against the arrays), else a one-line ValueError; lowering checks that every
    var the computation uses and no loop or shape binds is listed.
    """
    items = list(args)
    for i, a in enumerate(items):
        if not isinstance(a, Var):
            _check_owned(sched, i, as_tensors(a))
    tensors = as_tensors([a for a in items if not isinstance(a, Var)])
    sizes, used = shape_vars(tensors), dag_free_vars(list(sched.source_outputs))
    scalars: list[ScalarArg] = []
    for i, v in enumerate(items):
        if not isinstance(v, Var):
            continue
        if any(sc.name == v.name for sc in scalars):
            raise ValueError(f"var {v.name!r} is listed twice among the arguments")
        if v not in sizes and v not in used:
            raise ValueError(
                f"var {v.name!r} is among the arguments but the computation does not use it "
                "(and it is no shape variable of the tensors)"
            )
        scalars.append(ScalarArg(v.name, v.dtype, i, v in sizes))
    return tensors, scalars


def _check_owned(sched: Schedule, index: int, tensors: Sequence[Tensor]) -> None:
    """A one-line ValueError for argument ``index`` when it is no tensor of ``sched`` (a tensor
    made elsewhere that only shares a name with one of the schedule's would otherwise be taken for
    it, and fail later on its shape)."""
    for t in tensors:
        if sched.owns(t):
            continue
        same = " (another tensor named {0!r})" if t.op.name in sched.stages else ""
        raise ValueError(
            f"argument {index} {t.name!r} is not a tensor of this schedule{same.format(t.name)}: pass the "
            "tensors the schedule was created from (or those its cache_read/cache_write/rfactor returned)"
        )


def _params(scalars: Sequence[ScalarArg]) -> list[Var]:
    """The vars a kernel takes as parameters after its sizes (listed shape variables are not)."""
    return [Var(sc.name, sc.dtype) for sc in scalars if not sc.is_size]


def _c_only(scalars: Sequence[ScalarArg], what: str) -> None:
    if scalars:
        names = ", ".join(sc.name for sc in scalars)
        raise NotImplementedError(f"scalar arguments ({names}) are C-target only: {what} cannot take them")


def arg_specs(sched: Schedule, args: Sequence[Tensor]) -> list[ArgSpec]:
    """Argument descriptions for the kernel: every computed (non-placeholder) tensor is written."""
    return [ArgSpec(t.name, tuple(t.shape), t.dtype, not sched[t].is_placeholder) for t in args]


def build(
    sched: Schedule,
    args: Sequence[ArgLike],
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

    A var among ``args`` is a scalar argument: the callable takes its value at that place
    (``build(s, [A, B, D, bias])`` is called ``f(a, b, d, 10.0)``) and passes it to C as a
    parameter of the var's dtype (C targets only). A shape variable listed among ``args``
    (``build(s, [A, n])``) is checked against the arrays.
    """
    tgt = Target.parse(target)
    backend = backend_for(tgt)
    tensors, scalars = split_args(sched, args)
    if backend.gpu:
        _c_only(scalars, f"{tgt.kind} targets")
    specs = arg_specs(sched, tensors)
    sizes = [v.name for v in shape_vars(tensors)]
    size_sources(specs, sizes)  # each shape variable must be read from some array: checked first
    func = _lower(sched, tensors, name, backend.gpu, _params(scalars))
    return backend.build(func, tgt, specs, sizes, scalars=scalars)
