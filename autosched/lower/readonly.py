"""Which arguments of a lowered function it only reads: the C printer declares them ``const``."""

from __future__ import annotations

from ..te.traverse import walk
from .ir import BufAddress, BufPtr, CallStmt, Evaluate, PrimFunc, Stmt, Store, stmt_children
from .vector_ir import VecStore


def read_only_args(func: PrimFunc, body: Stmt | None = None) -> frozenset[str]:
    """Names of ``func``'s argument buffers that ``body`` (``func.body`` by default) never stores
    to nor passes by address to a call. None where the function calls user C: its prototypes take
    plain pointers, which a ``const`` array would not convert to without a warning."""
    if func.code.symbols:
        return frozenset()
    touched: set[str] = set()
    stack = [func.body if body is None else body]
    while stack:
        s = stack.pop()
        if isinstance(s, (Store, VecStore)):
            touched.add(s.buffer.name)
        elif isinstance(s, (CallStmt, Evaluate)):
            exprs = s.args if isinstance(s, CallStmt) else (s.value,)
            addressed = (n for e in exprs for n in walk(e) if isinstance(n, (BufAddress, BufPtr)))
            touched.update(n.buffer.name for n in addressed)
        else:
            stack.extend(stmt_children(s))
    return frozenset(b.name for b in func.args) - touched
