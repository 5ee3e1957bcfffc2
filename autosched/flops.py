"""A generic floating-point operation counter for compute DAGs.

For each compute stage, the arithmetic operations of its body (``+ - * /``, ``min``, ``max`` and
math calls; a multiply-add counts 2) are multiplied by the size of its iteration space (spatial
extents times reduce extents), and a reduction adds one combining operation per reduced element.
Index arithmetic (inside tensor indices, ``Select`` conditions and reduction ``where`` clauses),
comparisons, logic and casts are not counted: they are addressing and control, not the work.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .expr import (
    BinOp,
    Call,
    Cast,
    Cmp,
    ComputeOp,
    Expr,
    Load,
    Logic,
    Not,
    Reduce,
    Select,
    Tensor,
    as_int,
    as_tensors,
    static_shape,
    topo_order,
)

COUNTED_BINARY = ("add", "sub", "mul", "div", "min", "max")
"""Binary operations that count as one arithmetic operation each."""


def expr_ops(e: Expr) -> int:
    """Arithmetic operations evaluated once per element for the value of ``e``."""
    if isinstance(e, Load):
        return 0
    if isinstance(e, Select):
        return expr_ops(e.true_value) + expr_ops(e.false_value)
    if isinstance(e, Reduce):
        return expr_ops(e.source)
    if isinstance(e, BinOp):
        own = 1 if e.op in COUNTED_BINARY else 0
        return own + expr_ops(e.a) + expr_ops(e.b)
    if isinstance(e, Call):
        return 1 + sum(expr_ops(a) for a in e.args)
    if isinstance(e, Cast):
        return expr_ops(e.value)
    if isinstance(e, (Cmp, Logic)):
        return expr_ops(e.a) + expr_ops(e.b)
    if isinstance(e, Not):
        return expr_ops(e.a)
    return 0


def stage_flops(op: ComputeOp) -> int:
    """Operations of one compute stage over its whole iteration space."""
    points = math.prod(static_shape(op.shape))
    if isinstance(op.body, Reduce):
        points *= math.prod(as_int(iv.extent) for iv in op.body.axis)
        return points * (expr_ops(op.body.source) + 1)
    return points * expr_ops(op.body)


def count_flops(outputs: Tensor | Sequence[Tensor]) -> int:
    """Total arithmetic operations of every compute stage behind ``outputs``."""
    return sum(stage_flops(op) for op in topo_order(as_tensors(outputs)) if isinstance(op, ComputeOp))
