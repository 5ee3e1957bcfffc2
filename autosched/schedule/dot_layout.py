"""The DAG rewrite behind ``dot_layout``: a product-sum stage whose weight operand is laid out in the
panels the dot-product intrinsics read (:mod:`autosched.intrin.dot`), so that a stage a user
wrote without them can be tensorized.

The stages it takes (:func:`match_dot`) compute ``C[..., i, j] = sum(A[..., k].astype(t) *
B[..., k, ..., j, ...].astype(t))`` over one or more reduce axes: ``j`` is the last axis of ``C``
and indexes ``B`` only, ``i`` the one before it and indexes ``A`` only (affinely: a convolution's
``x * stride + rx``), ``k`` is a reduce axis that is ``A``'s last index (unit stride) and one of
``B``'s; ``B``'s other indices are plain axes of the stage (a batch, a convolution's taps), not
``i``. A matmul (``B[k, j]`` or ``B[j, k]``), a batched matmul and an NHWC convolution with
weights ``[KH, KW, C, F]`` or ``[F, KH, KW, C]`` all have that form.

The rewrite adds a stage ``<B>.packed`` of shape ``[<B's other dims>, N/lanes, K/group, lanes,
group]`` holding ``B`` at ``k = ko*group + ki``, ``j = jo*lanes + ji``, and replaces the stage's
reduction over ``k`` by one over ``k.o`` (K/group) and ``k.i`` (group), placed last, reading
``A[..., k.o*group + k.i]`` and ``<B>.packed[..., j // lanes, k.o, j % lanes, k.i]``: the same
sums in the same types, in the form the intrinsics declare (TVM's auto-tensorization lays
operands out the same way; MetaSchedule with ``transform_layout``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..expr import BinOp, Cast, ComputeOp, Expr, IterVar, Load, Reduce, Var, as_int, substitute, walk
from ..te.tensor import compute


@dataclass(frozen=True, slots=True)
class DotOperands:
    """What :func:`match_dot` reads off a stage: the two loads (``a`` indexed by ``i`` and ``k``
    last, ``b`` by ``k`` and ``j``), the casts' type, the reduce axis ``k``, and N and K."""

    a: Load
    b: Load
    acc: str
    k: IterVar
    n: int
    kk: int


def _vars(e: Expr) -> set[Var]:
    return {v for v in walk(e) if isinstance(v, Var)}


def match_dot(op: ComputeOp) -> DotOperands | None:
    """The operands of ``op`` if it has the module docstring's form over fixed extents, else None."""
    body = op.body
    if len(op.axis) < 2 or op.others or not isinstance(body, Reduce) or body.where is not None:
        return None
    if body.combiner != "sum" or body.sources or any(iv.begin for iv in (*op.axis, *body.axis)):
        return None
    src = body.source
    if not (isinstance(src, BinOp) and src.op == "mul" and src.type == src.a.dtype == src.b.dtype):
        return None
    if not (isinstance(src.a, Cast) and isinstance(src.b, Cast)):
        return None
    if not (isinstance(src.a.value, Load) and isinstance(src.b.value, Load)):
        return None
    i, j = op.axis[-2].var, op.axis[-1].var
    for a, b in ((src.a.value, src.b.value), (src.b.value, src.a.value)):
        found = _match(op, body, a, b, i, j)
        if found is not None:
            return DotOperands(a, b, src.type, *found)
    return None


def _match(op: ComputeOp, body: Reduce, a: Load, b: Load, i: Var, j: Var) -> tuple[IterVar, int, int] | None:
    axes = {iv.var: iv for iv in (*op.axis, *body.axis)}
    last = a.indices[-1] if a.indices else None
    k = axes.get(last) if isinstance(last, Var) else None
    if k is None or k.kind != "reduce" or any(_vars(x) & {j, k.var} for x in a.indices[:-1]):
        return None
    if i not in set().union(*(_vars(x) for x in a.indices[:-1])):
        return None
    plain = [x for x in b.indices if isinstance(x, Var) and x in axes]
    if len(plain) != len(b.indices) or len(set(plain)) != len(plain) or {j, k.var} - set(plain) or i in plain:
        return None
    try:
        n, kk = as_int(op.axis[-1].extent), as_int(k.extent)
        sizes = [as_int(d) for d in b.tensor.shape]
    except (TypeError, ValueError):
        return None
    if sizes != [as_int(axes[v].extent) for v in plain]:  # B is read whole, one index per axis
        return None
    return k, n, kk


def make_dot_layout_ops(op: ComputeOp, group: int, lanes: int) -> tuple[ComputeOp, ComputeOp]:
    """(the packed operand's stage, the replacement of ``op`` reading it); ``ValueError`` (one line)
    if ``op`` does not have the module docstring's form or N does not divide by ``lanes`` or K by
    ``group``."""
    found = match_dot(op)
    if found is None:
        raise ValueError(
            f"{op.name} is not sum(A[..., k].astype(t) * B[..., k, ..., j].astype(t)) over fixed extents"
        )
    if found.n % lanes or found.kk % group:
        raise ValueError(f"{op.name}: N={found.n} must divide by {lanes} and K={found.kk} by {group}")
    b, g, k = found.b, group, found.k
    j = op.axis[-1].var
    others = [x for x in b.indices if x not in (j, k.var)]
    other_dims = [d for x, d in zip(b.indices, b.tensor.shape, strict=True) if x not in (j, k.var)]

    def panel(*idx: Expr) -> Expr:
        *outer, jo, ko, ji, ki = idx
        at = dict(zip(others, outer, strict=True)) | {k.var: ko * g + ki, j: jo * lanes + ji}
        return b.tensor[tuple(at[x] for x in b.indices)]

    shape = (*other_dims, found.n // lanes, found.kk // g, lanes, g)
    packed = compute(shape, panel, name=f"{b.tensor.op.name}.packed").op
    assert isinstance(packed, ComputeOp)
    body = op.body
    assert isinstance(body, Reduce)
    ko = IterVar(Var(f"{k.name}.o"), found.kk // g, "reduce")
    ki = IterVar(Var(f"{k.name}.i"), g, "reduce")
    a_load = substitute(found.a, {k.var: ko.var * g + ki.var})
    b_load = Load(packed.output(0), (*others, j // lanes, ko.var, j % lanes, ki.var))
    source = BinOp("mul", Cast(found.acc, a_load), Cast(found.acc, b_load), found.acc)
    axes = (*(iv for iv in body.axis if iv.var != k.var), ko, ki)
    new = ComputeOp(op.name, op.axis, Reduce("sum", source, axes), op.tag, dict(op.attrs))
    return packed, new
