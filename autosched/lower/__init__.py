"""Lowering: a schedule becomes a loop-nest :class:`~autosched.lower.ir.PrimFunc`."""

from __future__ import annotations

from collections.abc import Sequence

from ..expr import NO_CODE, CCode, Tensor, Var, dag_free_vars
from ..schedule import Schedule
from .ir import Buffer, PrimFunc, Stmt
from .lowering import Lowerer
from .passes import auto_unroll, check_loops, fold, partition
from .selects import split_selects
from .simplify import INF, Ranges
from .unrolling import unroll


class Lowered:
    """A program lowered up to explicit unrolling, and the final function made from it on demand.

    ``nest`` is the loop nest as the lowerer built it, with its ``auto_unroll`` pragmas; ``loops``
    is the nest after guard folding, auto-unroll marking and loop partitioning, with loops of kind
    ``unrolled`` still loops (what cost-model features read); :meth:`func` expands them into the
    :class:`PrimFunc` emitters print (made once, on the first call: the expansion is the costly
    pass, and feature extraction never needs it).
    """

    __slots__ = ("name", "args", "nest", "loops", "sizes", "code", "scalars", "_func")

    def __init__(
        self,
        name: str,
        args: tuple[Buffer, ...],
        nest: Stmt,
        loops: Stmt,
        sizes: tuple[Var, ...] = (),
        code: CCode = NO_CODE,
        scalars: tuple[Var, ...] = (),
    ) -> None:
        self.name = name
        self.scalars = scalars
        self.args = args
        self.sizes = sizes
        self.code = code
        self.nest = nest
        self.loops = loops
        self._func: PrimFunc | None = None

    def _ranges(self) -> Ranges:
        return {v: (0, INF) for v in self.sizes}

    def func(self) -> PrimFunc:
        """The lowered function with unrolled loops expanded (computed once; a race computes the
        same value twice, harmlessly)."""
        func = self._func
        if func is None:
            func = self._func = PrimFunc(
                self.name, self.args, unroll(self.loops, self._ranges()), self.sizes, self.code, self.scalars
            )
        return func


def lower_loops(
    sched: Schedule,
    args: Sequence[Tensor],
    name: str = "default_function",
    gpu: bool = False,
    scalars: Sequence[Var] = (),
) -> Lowered:
    """Lower ``sched`` over ``args`` up to explicit unrolling (see :class:`Lowered`); the kernel
    takes the vars ``scalars`` (which its bodies may use) as parameters after its sizes.

    Passes: guard folding under loop ranges, auto-unroll marking, loop partitioning (main part
    without tail guards) and target checks (``gpu`` allows thread binding); the expansion of
    unrolled loops is left to :meth:`Lowered.func`. The caller's tensors in ``args`` stand for
    the schedule's copies of them where the schedule renamed operations that shared a name.
    """
    for v, stage in dag_free_vars(list(sched.source_outputs)).items():
        if v not in scalars:
            raise ValueError(
                f"var {v.name!r} ({v.dtype}) of stage {stage!r} is bound by no loop or shape and is no "
                "argument: list it in the arguments of build/lower/emit, where the caller passes its value"
            )
    func = Lowerer(sched, [sched.tensor(t) for t in args], name).run()
    sizes: Ranges = {v: (0, INF) for v in func.sizes}  # shape variables are never negative
    body = fold(func.body, dict(sizes))
    body = auto_unroll(body)
    body = partition(body, dict(sizes), sizes=frozenset(func.sizes))
    if not gpu:  # vector loops free of per-lane selects (C targets)
        body = split_selects(body, dict(sizes))
    check_loops(body, gpu)  # unrolling only copies statements: the same loops are legal after it
    return Lowered(func.name, func.args, func.body, body, func.sizes, func.code, tuple(scalars))


def lower(
    sched: Schedule,
    args: Sequence[Tensor],
    name: str = "default_function",
    gpu: bool = False,
    scalars: Sequence[Var] = (),
) -> PrimFunc:
    """Lower ``sched`` over the arguments ``args`` (inputs, then outputs) to loop-nest IR.

    Passes: guard folding under loop ranges, auto-unroll marking, loop partitioning (main part
    without tail guards), explicit unrolling, and target checks (``gpu`` allows thread binding).
    """
    return lower_loops(sched, args, name, gpu, scalars).func()


__all__ = ["lower", "lower_loops", "Lowered", "PrimFunc"]
