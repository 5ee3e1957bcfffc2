"""Lowering: a schedule becomes a loop-nest :class:`~autosched.lower.ir.PrimFunc`."""

from __future__ import annotations

from collections.abc import Sequence

from ..expr import Tensor
from ..schedule import Schedule
from .ir import PrimFunc
from .lowering import Lowerer
from .passes import auto_unroll, check_loops, fold, partition
from .unrolling import unroll


def lower(
    sched: Schedule, args: Sequence[Tensor], name: str = "default_function", gpu: bool = False
) -> PrimFunc:
    """Lower ``sched`` over the arguments ``args`` (inputs, then outputs) to loop-nest IR.

    Passes: guard folding under loop ranges, auto-unroll marking, loop partitioning (main part
    without tail guards), explicit unrolling, and target checks (``gpu`` allows thread binding).
    """
    func = Lowerer(sched, args, name).run()
    body = fold(func.body, {})
    body = auto_unroll(body)
    body = partition(body, {})
    body = unroll(body, {})
    check_loops(body, gpu)
    return PrimFunc(func.name, func.args, body)


__all__ = ["lower", "PrimFunc"]
