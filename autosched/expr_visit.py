"""Traversal and printing of tensor expressions: children, walk, rewrite, substitute, to_str, and
the DAG helpers (topological order, one-line op definitions, structural keys).

Its public names are also importable from :mod:`autosched.expr`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence

from .expr import (
    BinOp,
    Call,
    Cast,
    Cmp,
    ComputeOp,
    Const,
    Expr,
    Load,
    Logic,
    Not,
    Operation,
    PlaceholderOp,
    Reduce,
    Select,
    Tensor,
    Var,
)

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
        return (e.source, *(iv.var for iv in e.axis)) + ((e.where,) if e.where is not None else ())
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


# ---------------------------------------------------------------------------- printing, DAG keys

# Operators written infix, with the same symbol here and in C (the C printer uses this table).
INFIX = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "eq": "==",
    "ne": "!=",
    "and": "&&",
    "or": "||",
}
_SYM = INFIX | {"floordiv": "//", "floormod": "%"}


def to_str(e: Expr) -> str:
    """A readable, deterministic rendering of an expression."""
    if isinstance(e, Const):
        return repr(e.value) if e.type in ("int32", "float32", "bool") else f"{e.type}({e.value!r})"
    if isinstance(e, Var):
        return e.name
    if isinstance(e, BinOp) and e.op in ("min", "max"):
        return f"{e.op}({to_str(e.a)}, {to_str(e.b)})"
    if isinstance(e, (BinOp, Cmp, Logic)):
        return f"({to_str(e.a)} {_SYM[e.op]} {to_str(e.b)})"
    if isinstance(e, Not):
        return f"!{to_str(e.a)}"
    if isinstance(e, Select):
        return f"select({to_str(e.cond)}, {to_str(e.true_value)}, {to_str(e.false_value)})"
    if isinstance(e, Cast):
        return f"{e.type}({to_str(e.value)})"
    if isinstance(e, Call):
        return f"{e.name}({', '.join(to_str(a) for a in e.args)})"
    if isinstance(e, Load):
        return f"{e.tensor.name}[{', '.join(to_str(i) for i in e.indices)}]"
    if isinstance(e, Reduce):
        axes = ", ".join(f"{iv.name}:[{iv.begin},{iv.begin + iv.extent})" for iv in e.axis)
        where = "" if e.where is None else f", where={to_str(e.where)}"
        return f"{e.combiner}({to_str(e.source)}, axis=[{axes}]{where})"
    if hasattr(e, "render"):
        return str(e.render(to_str))
    raise TypeError(f"not an expression: {e!r}")


def as_tensors(items: Tensor | Operation | Sequence[Tensor | Operation]) -> list[Tensor]:
    """Accept tensors or operations (one or a list), as te's functions do."""
    seq = items if isinstance(items, (list, tuple)) else [items]
    out = []
    for t in seq:
        if isinstance(t, Tensor):
            out.append(t)
        elif isinstance(t, (PlaceholderOp, ComputeOp)):
            out.append(t.output(0))
        else:
            raise TypeError(f"expected a Tensor or an operation, got {type(t).__name__}")
    return out


def topo_order(outputs: Sequence[Tensor]) -> list[Operation]:
    """All operations the outputs depend on, producers before consumers; names must be unique."""
    order: list[Operation] = []
    seen: dict[str, Operation] = {}
    visiting: set[str] = set()

    def visit(op: Operation) -> None:
        if op.name in seen:
            if seen[op.name] is not op:
                raise ValueError(f"two different tensors are both named {op.name!r}; names must be unique")
            return
        if op.name in visiting:
            raise ValueError(f"cycle through tensor {op.name!r}")
        visiting.add(op.name)
        for t in op.input_tensors:
            visit(t.op)
        visiting.discard(op.name)
        seen[op.name] = op
        order.append(op)

    for t in outputs:
        visit(t.op)
    return order


def op_to_str(op: Operation) -> str:
    """One line that defines an operation."""
    if isinstance(op, PlaceholderOp):
        return f"{op.name} = placeholder({list(op.shape)}, {op.dtype})"
    axes = ", ".join(f"{iv.name}:{iv.extent}" for iv in op.axis)
    return f"{op.name}[{axes}] = {to_str(op.body)}" + (f"  # tag={op.tag}" if op.tag else "")


def dag_key(outputs: Sequence[Tensor]) -> str:
    """A structural hash of the DAG behind ``outputs``: stable across runs and processes."""
    text = "\n".join(op_to_str(op) for op in topo_order(outputs))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
