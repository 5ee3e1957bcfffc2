"""Traversal of tensor expressions: children, walk, rewrite (bottom-up rebuilding), substitute.

Printing (``to_str``) is in :mod:`.nodes`, since ``str(e)`` needs it; the DAG helpers are in
:mod:`.dag`. The public names are also importable from :mod:`autosched.expr`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .nodes import BinOp, Call, Cast, Cmp, Const, Expr, Load, Logic, Not, Reduce, Select, Var

# ---------------------------------------------------------------------------- traversal


def children(e: Expr) -> tuple[Expr, ...]:
    """Direct sub-expressions of a node."""
    if isinstance(e, (BinOp, Cmp, Logic)):
        return (e.a, e.b)
    if isinstance(e, Not):
        return (e.a,)
    if isinstance(e, Select):
        return (e.cond, e.true_value, e.false_value)
    if isinstance(e, Cast):
        return (e.value,)
    if isinstance(e, Call):
        return e.args
    if isinstance(e, Load):
        return e.indices
    if isinstance(e, Reduce):
        return (*e.all_sources, *(iv.var for iv in e.axis)) + ((e.where,) if e.where is not None else ())
    return e.children() if hasattr(e, "children") else ()


def walk(e: Expr) -> Iterable[Expr]:
    """Every node of ``e``, parents before children."""
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(children(node))


def rewrite(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Rebuild ``e`` bottom-up where ``fn`` returns a replacement (``None`` keeps the node).

    Unchanged subtrees are returned as the same objects, so rewrites keep sharing.
    """
    out = fn(e)
    if out is not None:
        return out
    if isinstance(e, (BinOp, Cmp, Logic)):
        a, b = rewrite(e.a, fn), rewrite(e.b, fn)
        if a is e.a and b is e.b:
            return e
        return BinOp(e.op, a, b, e.type) if isinstance(e, BinOp) else type(e)(e.op, a, b)
    if isinstance(e, (Const, Var)):
        return e
    if isinstance(e, Load):
        idx = tuple(rewrite(i, fn) for i in e.indices)
        return e if _same(idx, e.indices) else Load(e.tensor, idx)
    if isinstance(e, Not):
        a = rewrite(e.a, fn)
        return e if a is e.a else Not(a)
    if isinstance(e, Select):
        parts = (rewrite(e.cond, fn), rewrite(e.true_value, fn), rewrite(e.false_value, fn))
        return e if _same(parts, (e.cond, e.true_value, e.false_value)) else Select(*parts)
    if isinstance(e, Cast):
        v = rewrite(e.value, fn)
        return e if v is e.value else Cast(e.type, v)
    if isinstance(e, Call):
        args = tuple(rewrite(a, fn) for a in e.args)
        return e if _same(args, e.args) else Call(e.name, args, e.type)
    if isinstance(e, Reduce):
        where = None if e.where is None else rewrite(e.where, fn)
        if e.sources:
            sources = tuple(rewrite(x, fn) for x in e.sources)
            return Reduce(e.combiner, sources[e.value_index], e.axis, where, e.value_index, sources)
        return Reduce(e.combiner, rewrite(e.source, fn), e.axis, where)
    if hasattr(e, "map_children"):  # nodes of later layers (lowered buffer loads)
        return e.map_children(lambda c: rewrite(c, fn))
    return e


def _same(new: tuple[Expr, ...], old: tuple[Expr, ...]) -> bool:
    return all(x is y for x, y in zip(new, old, strict=True))


def substitute(e: Expr, mapping: dict[Var, Expr]) -> Expr:
    """Replace variables by expressions."""
    if not mapping:
        return e
    return rewrite(e, lambda n: mapping.get(n) if isinstance(n, Var) else None)
