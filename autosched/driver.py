"""The user-facing pipeline: ``lower`` -> ``emit`` -> ``build`` (compile, load, check arguments)."""

from __future__ import annotations

from collections.abc import Sequence

from .emit_c import emit_c, function_name
from .expr import Operation, Tensor, as_tensors, shape_vars
from .lower import lower as _lower
from .lower.ir import PrimFunc
from .runner.compile import compile_shared
from .runner.kernel import ArgSpec, Kernel, size_sources
from .runner.load import load_kernel
from .schedule import Schedule
from .target import Target

TargetLike = str | Target


def lower(
    sched: Schedule,
    args: Sequence[Tensor | Operation],
    name: str = "default_function",
    simple_mode: bool = True,
) -> PrimFunc:
    """The loop-nest IR of ``sched`` over ``args`` (inputs, then outputs); print it to read it.

    ``simple_mode`` is accepted for te's signature: the IR always prints in its one, simple form.
    """
    return _lower(sched, as_tensors(list(args)), name)


def emit(
    sched: Schedule,
    args: Sequence[Tensor | Operation],
    target: TargetLike = "c",
    name: str = "default_function",
    portable: bool = False,
) -> str:
    """Source text of the kernel for ``target`` (C today; ``portable`` gives strict C99)."""
    return _emit(_lower(sched, as_tensors(list(args)), name), Target.parse(target), portable)


def _emit(func: PrimFunc, tgt: Target, portable: bool = False) -> str:
    if tgt.kind != "c":
        raise NotImplementedError(f"emitting for {tgt.kind!r} targets is not available yet; use 'c'")
    return emit_c(
        func, num_threads=tgt.num_threads or 1, vector_bytes=tgt.vector_bytes or 16, portable=portable
    )


def arg_specs(sched: Schedule, args: Sequence[Tensor]) -> list[ArgSpec]:
    """Argument descriptions for the kernel: every computed (non-placeholder) tensor is written."""
    return [ArgSpec(t.name, tuple(t.shape), t.dtype, not sched[t].is_placeholder) for t in args]


def build(
    sched: Schedule,
    args: Sequence[Tensor | Operation],
    target: TargetLike = "c",
    name: str = "default_function",
) -> Kernel:
    """Compile ``sched`` for ``target`` (cached by content) and return a callable over numpy arrays.

    The callable checks every array's shape, dtype and layout before any C code runs. Over
    tensors with symbolic shapes (``asc.size_var``) it builds once for every size: each call reads
    the variables' values from its arrays (all arrays must agree on each) and passes them to C.
    """
    tensors = as_tensors(list(args))
    tgt = Target.parse(target)
    specs = arg_specs(sched, tensors)
    sizes = [v.name for v in shape_vars(tensors)]
    size_sources(specs, sizes)  # each shape variable must be read from some array: checked first
    func = _lower(sched, tensors, name)
    lib = compile_shared(_emit(func, tgt), tgt, code=func.code)
    return load_kernel(lib, function_name(name), specs, sizes)
