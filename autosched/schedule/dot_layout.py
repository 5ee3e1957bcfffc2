"""The DAG rewrite behind ``dot_layout``: a matmul-like reduction whose second operand is laid out in
the panels the dot-product intrinsics read (:mod:`autosched.intrin.dot`), so that a stage a user
wrote as ``sum(A[i, k].astype(acc) * B[k, j].astype(acc), k)`` can be tensorized.

The rewrite adds a stage ``<B>.packed`` of shape ``[N/lanes, K/group, lanes, group]`` holding
``B[ko*group + ki, jo*lanes + ji]`` (``B[j, k]`` for a transposed operand), and replaces the
stage's reduction over ``k`` by one over ``k.o`` (K/group) and ``k.i`` (group) reading
``A[i, k.o*group + k.i]`` and ``<B>.packed[j // lanes, k.o, j % lanes, k.i]``: the same sums in
the same types, in the form the intrinsics declare (TVM's auto-tensorization lays operands out
the same way, MetaSchedule with ``transform_layout``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..expr import BinOp, Cast, ComputeOp, Expr, IterVar, Load, Reduce, Tensor, Var, as_int
from ..te.tensor import compute


@dataclass(frozen=True, slots=True)
class DotOperands:
    """What :func:`match_dot` reads off a stage: ``a`` indexed ``[i, k]``, ``b`` indexed ``[k, j]``
    (``[j, k]`` when ``b_transposed``), the casts' type, and the extents M, N, K."""

    a: Tensor
    b: Tensor
    b_transposed: bool
    acc: str
    m: int
    n: int
    k: int


def match_dot(op: ComputeOp) -> DotOperands | None:
    """The operands of ``op`` if it is ``C[i, j] = sum(A[i, k].astype(acc) * B[k, j].astype(acc), k)``
    (either operand first; ``B[j, k]`` too) over fixed extents, else None."""
    body = op.body
    if len(op.axis) != 2 or op.others or not isinstance(body, Reduce) or body.where is not None:
        return None
    if body.combiner != "sum" or len(body.axis) != 1 or body.sources:
        return None
    src = body.source
    if not (isinstance(src, BinOp) and src.op == "mul"):
        return None
    if not (isinstance(src.a, Cast) and isinstance(src.b, Cast)):
        return None
    if src.a.type != src.b.type or src.type != src.a.type or not isinstance(src.a.value, Load):
        return None
    if not isinstance(src.b.value, Load):
        return None
    i, j = (iv.var for iv in op.axis)
    k = body.axis[0].var
    if body.axis[0].begin or any(iv.begin for iv in op.axis):
        return None
    loads = (src.a.value, src.b.value)
    a = next((x for x in loads if _indexed(x, (i, k))), None)
    b = next((x for x in loads if x is not a and (_indexed(x, (k, j)) or _indexed(x, (j, k)))), None)
    if a is None or b is None:
        return None
    try:
        m, n, kk = as_int(op.axis[0].extent), as_int(op.axis[1].extent), as_int(body.axis[0].extent)
    except (TypeError, ValueError):
        return None
    if tuple(a.tensor.shape) != (m, kk):
        return None
    transposed = _indexed(b, (j, k))
    if tuple(b.tensor.shape) != ((n, kk) if transposed else (kk, n)):
        return None
    return DotOperands(a.tensor, b.tensor, transposed, src.type, m, n, kk)


def _indexed(load: Load, vars_: tuple[Var, Var]) -> bool:
    return len(load.indices) == 2 and all(x is v or x == v for x, v in zip(load.indices, vars_, strict=True))


def make_dot_layout_ops(op: ComputeOp, group: int, lanes: int) -> tuple[ComputeOp, ComputeOp]:
    """(the packed operand's stage, the replacement of ``op`` reading it); ``ValueError`` (one line)
    if ``op`` is not a :func:`match_dot` reduction or N does not divide by ``lanes`` or K by
    ``group``."""
    found = match_dot(op)
    if found is None:
        raise ValueError(
            f"{op.name} is not sum(A[i, k].astype(t) * B[k, j].astype(t), k) over fixed extents"
        )
    if found.n % lanes or found.k % group:
        raise ValueError(f"{op.name}: N={found.n} must divide by {lanes} and K={found.k} by {group}")
    b, g = found.b, group

    def panel(jo: Expr, ko: Expr, ji: Expr, ki: Expr) -> Expr:
        row, col = ko * g + ki, jo * lanes + ji
        return b[col, row] if found.b_transposed else b[row, col]

    packed = compute((found.n // lanes, found.k // g, lanes, g), panel, name=f"{b.op.name}.packed").op
    assert isinstance(packed, ComputeOp)
    body = op.body
    assert isinstance(body, Reduce)
    k = body.axis[0].name
    ko = IterVar(Var(f"{k}.o"), found.k // g, "reduce")
    ki = IterVar(Var(f"{k}.i"), g, "reduce")
    i, j = (iv.var for iv in op.axis)
    a_load = Load(found.a, (i, ko.var * g + ki.var))
    b_load = Load(packed.output(0), (j // lanes, ko.var, j % lanes, ki.var))
    source = BinOp("mul", Cast(found.acc, a_load), Cast(found.acc, b_load), found.acc)
    new = ComputeOp(op.name, op.axis, Reduce("sum", source, (ko, ki)), op.tag, dict(op.attrs))
    return packed, new
