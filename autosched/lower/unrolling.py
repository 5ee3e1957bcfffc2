"""Explicit unrolling: loops of kind ``unrolled`` become copies of their body.

Lowering spends most of its time here when a sampled program unrolls a lot, so the copies are
made cheaply. The pass walks top-down; under a nest of expanded loops each statement is copied
once per point of the nest with all of the nest's variables fixed at once. For each expression
it first compiles a *builder* (once per nest) that makes the copy for the current values: an
affine index becomes a shared part plus a constant offset, a comparison is decided from the
bounds of its shared part, and parts that use no expanded variable are shared, not copied.
"""

from __future__ import annotations

from collections.abc import Callable

from ..expr import (
    BinOp,
    Call,
    Cast,
    Cmp,
    Const,
    Expr,
    Extent,
    Logic,
    Not,
    Select,
    Var,
    children,
    rewrite,
    substitute,
)
from .ir import EMPTY, BufLoad, CallStmt, For, IfThenElse, Seq, Stmt, Store, map_children, seq
from .simplify import FALSE, TRUE, Ranges, bounds, decide, is_int, linear, rebuild, simplify, span

MAX_UNROLL_COPIES = 512  # statements an expanded loop may produce; larger ones stay loops

Builder = Callable[[], Expr]  # the copy of one expression for the current values of the nest
Affine = tuple[Expr | None, dict[Expr, int], int, tuple[tuple[str, int], ...]]


def unroll(s: Stmt, ranges: Ranges) -> Stmt:
    """Replace unrolled loops by copies of their body (up to a size limit; larger stay pragmas)."""
    return _Unroller(ranges).stmt(s)


def expanded_size(s: Stmt, memo: dict[int, tuple[Stmt, int]] | None = None) -> int:
    """Leaf statements of ``s`` once its unrolled loops are expanded (those within the limit);
    ``memo`` maps node ids to (node, size), the node kept so that its id stays its own."""
    got = None if memo is None else memo.get(id(s))
    if got is not None:
        return got[1]
    if isinstance(s, For):
        size = expanded_size(s.body, memo)
        if s.kind == "unrolled" and isinstance(s.extent, int) and s.extent * size <= MAX_UNROLL_COPIES:
            size *= s.extent
    elif isinstance(s, IfThenElse):
        size = 1 + expanded_size(s.then, memo) + (expanded_size(s.otherwise, memo) if s.otherwise else 0)
    elif isinstance(s, Seq):
        size = sum(expanded_size(x, memo) for x in s.stmts)
    else:
        size = 1
    if memo is not None:
        memo[id(s)] = (s, size)
    return size


def with_offset(terms: Expr | None, k: int, dtype: str) -> Expr:
    """``terms + k`` built on the shared ``terms`` node (as ``rebuild`` would print it)."""
    if terms is None:
        return Const(k, dtype)
    if k == 0:
        return terms
    return BinOp("add" if k > 0 else "sub", terms, Const(abs(k), dtype), dtype)


class _Unroller:
    """One run of the pass. Memo tables are keyed by ``id`` of nodes of the input tree, which
    stays alive while this runs; builders also by the nest they were made for."""

    def __init__(self, ranges: Ranges) -> None:
        self.ranges = ranges
        self.env: dict[str, int] = {}  # names of the expanded loops' variables around -> values
        self.nest = 0  # the set of expanded loops around, numbered
        self.nests: dict[tuple[str, ...], int] = {(): 0}
        self.builders: dict[tuple[int, int], Builder | None] = {}
        self.var_of: dict[str, Var] = {}
        self.sizes: dict[int, tuple[Stmt, int]] = {}

    # -- statements
    def stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, For):
            begin, extent = self.bound(s.begin), self.bound(s.extent)
            full = span(begin, extent)
            if (
                s.kind == "unrolled"
                and isinstance(extent, int)
                and extent * expanded_size(s.body, self.sizes) <= MAX_UNROLL_COPIES
            ):
                return self.expand(For(s.var, begin, extent, s.kind, s.body, s.thread, s.auto_unroll), full)
            self.ranges[s.var] = full
            body = self.stmt(s.body)
            if body == EMPTY:
                return EMPTY
            if body is s.body and begin is s.begin and extent is s.extent:
                return s
            return For(s.var, begin, extent, s.kind, body, s.thread, s.auto_unroll)
        if not self.env:
            return map_children(s, self.stmt)
        if isinstance(s, Store):
            return Store(s.buffer, self.copy(s.index), self.copy(s.value))
        if isinstance(s, CallStmt):
            return CallStmt(s.func, s.part, tuple(self.copy(a) for a in s.args))
        if isinstance(s, IfThenElse):
            cond = self.copy(s.cond)
            other = None if s.otherwise is None or cond == TRUE else self.stmt(s.otherwise)
            if cond == FALSE:
                return EMPTY if other is None else other
            then = self.stmt(s.then)
            return then if cond == TRUE else IfThenElse(cond, then, other)
        if isinstance(s, Seq):
            return seq(x for x in (self.stmt(x) for x in s.stmts) if x != EMPTY)
        return s

    def expand(self, loop: For, full: tuple[float, float]) -> Stmt:
        """The copies of ``loop``'s body, one per iteration."""
        outer = self.nest
        self.nest = self.nests.setdefault((*self.env, loop.var.name), len(self.nests))
        self.var_of[loop.var.name] = loop.var
        copies = []
        assert isinstance(loop.begin, int) and isinstance(loop.extent, int)
        for i in range(loop.begin, loop.begin + loop.extent):
            self.env[loop.var.name] = i
            self.ranges[loop.var] = (i, i)
            copies.append(self.stmt(loop.body))
        del self.env[loop.var.name]
        self.nest = outer
        self.ranges[loop.var] = full
        return seq(c for c in copies if c != EMPTY)

    # -- expressions
    def bound(self, b: Extent) -> Extent:
        """A loop's begin or extent under the expanded loops: it may name their variables (a
        vector loop cut to the positions left in a partial tile)."""
        if isinstance(b, int) or not self.env:
            return b
        copied = self.copy(b)
        return int(copied.value) if isinstance(copied, Const) and copied.dtype.startswith("int") else copied

    def copy(self, e: Expr) -> Expr:
        """``e`` with the expanded loops' variables fixed to their current values."""
        key = (id(e), self.nest)
        if key in self.builders:
            build = self.builders[key]
        else:
            build = self.builders[key] = self.builder(e)
        return e if build is None else build()

    def builder(self, e: Expr) -> Builder | None:
        """How to copy ``e`` for any values of the current nest (``None``: it uses none of them)."""
        if is_int(e) or isinstance(e, Cmp):
            if self.free_of_env(e):
                return None
            if isinstance(e, Cmp):
                return self.comparison(e)
            form = self.affine(e)
            if form is None:
                return lambda: self.substituted(e)
            shared, _, k, coefs = form
            env, dtype = self.env, e.dtype
            return lambda: with_offset(shared, k + sum(c * env[v] for v, c in coefs), dtype)
        built = [self.builder(c) for c in children(e)]
        if all(b is None for b in built):
            return None
        sub = [(lambda c=c: c) if b is None else b for c, b in zip(children(e), built, strict=True)]
        if isinstance(e, BinOp):
            a, b = sub
            return lambda: BinOp(e.op, a(), b(), e.type)
        if isinstance(e, BufLoad):
            (index,) = sub
            return lambda: BufLoad(e.buffer, index())
        if isinstance(e, Select):
            c, t, f = sub
            return lambda: _select(c(), t, f)
        if isinstance(e, Logic):
            a, b = sub
            return lambda: _logic(e.op, a(), b())
        if isinstance(e, Not):
            (a,) = sub
            return lambda: _negate(a())
        if isinstance(e, Cast):
            (v,) = sub
            return lambda: Cast(e.type, v())
        if isinstance(e, Call):
            return lambda: Call(e.name, tuple(b() for b in sub), e.type)
        return lambda: rewrite(e, lambda n: None if n is e else self.copy(n))

    def comparison(self, e: Cmp) -> Builder:
        """Integer comparisons as ``shared + offset <op> 0``, decided by bounds where they can be."""
        form = self.affine(BinOp("sub", e.a, e.b, "int32")) if is_int(e.a) and is_int(e.b) else None
        if form is None:
            return lambda: self.substituted(e)
        shared, terms, k, coefs = form
        env, ranges = self.env, self.ranges

        def build() -> Expr:
            offset = k + sum(c * env[v] for v, c in coefs)
            lo, hi = bounds((terms, offset), ranges)
            verdict = decide(e.op, lo, hi)
            if verdict is not None:
                return TRUE if verdict else FALSE
            return Cmp(e.op, with_offset(shared, offset, "int32"), Const(0, "int32"))

        return build

    def affine(self, e: Expr) -> Affine | None:
        """``e`` as shared terms + constant + a coefficient per expanded variable (``None`` where
        an expanded variable sits inside a non-linear term)."""
        terms, k = linear(e, {})
        coefs = tuple(
            (t.name, terms.pop(t)) for t in list(terms) if isinstance(t, Var) and t.name in self.env
        )
        if any(not self.free_of_env(t) for t in terms):
            return None
        return (rebuild(terms, 0, e.dtype) if terms else None), terms, k, coefs

    def free_of_env(self, e: Expr) -> bool:
        """Whether ``e`` uses no expanded variable."""
        if isinstance(e, Var):
            return e.name not in self.env
        return all(self.free_of_env(c) for c in children(e))

    def substituted(self, e: Expr) -> Expr:
        """``e`` with the current values substituted and simplified (non-affine parts)."""
        values: dict[Var, Expr] = {self.var_of[v]: Const(x) for v, x in self.env.items()}
        return simplify(substitute(e, values), self.ranges)


def _select(cond: Expr, true_value: Builder, false_value: Builder) -> Expr:
    if cond == TRUE:
        return true_value()
    if cond == FALSE:
        return false_value()
    return Select(cond, true_value(), false_value())


def _logic(op: str, a: Expr, b: Expr) -> Expr:
    absorbing, neutral = (FALSE, TRUE) if op == "and" else (TRUE, FALSE)
    if a == absorbing or b == absorbing:
        return absorbing
    return b if a == neutral else a if b == neutral else Logic(op, a, b)


def _negate(a: Expr) -> Expr:
    return FALSE if a == TRUE else TRUE if a == FALSE else Not(a)
