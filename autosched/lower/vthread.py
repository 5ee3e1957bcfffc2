"""Virtual threads: ``vthread`` loops injected into the thread's work, as TVM's InjectVirtualThread.

A loop bound to ``vthread`` says that its iterations are threads of their own which one hardware
thread runs. Run as a serial loop, a thread would finish one virtual thread's outputs before the
next; injected, the thread computes all of them at once: every statement of the loop's body that
depends on the virtual thread is emitted once per virtual thread with the variable replaced by a
constant, the copies side by side at the innermost level (inside the reduction loops), and the
statements that do not depend on it (a cooperative fetch into shared memory, which bound inference
sizes for all virtual threads of the block) are emitted once. So a thread's register tile covers
outputs strided by ``block extent / vthreads``: its shared-memory reads of one step are a block
apart, which spreads them over the banks instead of stacking them on a few.

The buffers declared inside the loop that a virtual thread writes (the register accumulator) get
one copy per virtual thread: the declaration grows by the extent and each access is offset by
``vthread * size``. Nested vthread loops are injected inner first, each multiplying the copies.

A schedule that cannot run this way is a :class:`ScheduleError` naming the loop: a vthread loop
inside a ``threadIdx`` or a serial loop (virtual threads divide the block's outputs at the launch
level), or more than :data:`MAX_VTHREADS` virtual threads in one nest (each is an unrolled copy of
the thread's registers). (Binding a reduction axis to ``vthread``, where virtual threads would
write one element, is refused by ``bind``.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..expr import BinOp, Const, Expr, Extent, Var, rewrite, substitute, walk
from ..schedule import ScheduleError
from .ir import (
    EMPTY,
    Allocate,
    Buffer,
    BufLoad,
    CallStmt,
    Evaluate,
    For,
    IfThenElse,
    Seq,
    Stmt,
    Store,
    map_children,
    seq,
    stmt_children,
)
from .passes import fold
from .simplify import conjoin, conjuncts, is_int, linear, rebuild, simplify

#: the most virtual threads of one nest (the product of nested vthread extents); TVM unrolls
#: below 16 and Ansor samples at most 8 per stage
MAX_VTHREADS = 16


def inject_vthreads(s: Stmt) -> Stmt:
    """``s`` (a kernel's body) with every ``vthread`` loop injected (see the module docstring)."""
    _check_nesting(s, None, 1)
    return _inject_all(s)


def _check_nesting(s: Stmt, outer: For | None, vthreads: int) -> None:
    """Reject vthread loops under a thread or serial loop, and nests of too many virtual threads."""
    if isinstance(s, For):
        if s.thread == "vthread":
            if not isinstance(s.extent, int) or not isinstance(s.begin, int):
                raise ScheduleError(f"vthread loop {s.var.name} has a symbolic extent: GPU shapes are fixed")
            if outer is not None:
                raise ScheduleError(
                    f"vthread loop {s.var.name} is inside loop {outer.var.name} "
                    f"({outer.thread or outer.kind}): virtual threads divide the block's outputs, so "
                    "their loops go outside the threadIdx loops and every serial loop (bind a loop "
                    "between blockIdx and threadIdx)"
                )
            vthreads *= s.extent
            if vthreads > MAX_VTHREADS:
                raise ScheduleError(
                    f"vthread loop {s.var.name} makes {vthreads} virtual threads in one nest, over the "
                    f"limit of {MAX_VTHREADS}: each is an unrolled copy of the thread's registers"
                )
        elif not (s.kind == "thread" and (s.thread or "").startswith("blockIdx")):
            outer = s
    for x in stmt_children(s):
        _check_nesting(x, outer, vthreads)


def _inject_all(s: Stmt) -> Stmt:
    if isinstance(s, For) and s.thread == "vthread":
        assert isinstance(s.begin, int) and isinstance(s.extent, int)
        return _inject(s.var, range(s.begin, s.begin + s.extent), _inject_all(s.body))
    return map_children(s, _inject_all)


def _inject(v: Var, values: range, body: Stmt) -> Stmt:
    """The body of the vthread loop ``v`` over ``values`` with its virtual threads injected."""
    private = _private(v, body)
    body = _expand(body, v, values, {b.name: b for b in private})
    return _replicate(body, v, values, {})


def _reads(e: Expr, v: Var, bufs: set[str]) -> bool:
    """Whether ``e`` reads ``v`` or an element of one of ``bufs``."""
    return any(x == v or (isinstance(x, BufLoad) and x.buffer.name in bufs) for x in walk(e))


def _stmts(s: Stmt) -> list[Stmt]:
    return [s, *(y for x in stmt_children(s) for y in _stmts(x))]


def _private(v: Var, body: Stmt) -> list[Buffer]:
    """The buffers declared in ``body`` whose values depend on the virtual thread ``v``: a
    store of them reads ``v`` or another such buffer (to a fixed point)."""
    declared = {x.buffer.name: x.buffer for x in _stmts(body) if isinstance(x, Allocate)}
    stores = [x for x in _stmts(body) if isinstance(x, Store) and x.buffer.name in declared]
    touched: set[str] = set()
    while True:
        more = {x.buffer.name for x in stores if _reads(x.index, v, touched) or _reads(x.value, v, touched)}
        if more <= touched:
            return [declared[name] for name in declared if name in touched]
        touched |= more


def _grown(b: Buffer, n: int) -> Buffer:
    """``b`` with ``n`` copies: a leading dimension of ``n`` (the stride of a padded one is its size)."""
    assert isinstance(b.size, int)
    strides = None if b.strides is None else (b.size, *b.strides)
    return replace(b, shape=(n, *b.shape), strides=strides)


def _expand(s: Stmt, v: Var, values: range, private: dict[str, Buffer]) -> Stmt:
    """``s`` with each ``private`` buffer declared once per virtual thread, virtual thread
    ``v``'s copy at offset ``(v - first) * size``."""
    if not private:
        return s
    n = len(values)

    def offset(b: Buffer, index: Expr) -> Expr:
        assert isinstance(b.size, int)
        k = BinOp("sub", v, Const(values.start, "int32"), "int32")
        return simplify(BinOp("add", index, BinOp("mul", k, Const(b.size, "int32"), "int32"), "int32"))

    def expr(e: Expr) -> Expr:
        def fn(x: Expr) -> Expr | None:
            if isinstance(x, BufLoad) and x.buffer.name in private:
                return BufLoad(_grown(private[x.buffer.name], n), offset(x.buffer, expr(x.index)))
            return None

        return rewrite(e, fn)

    return _map_stmt(s, expr, lambda b, i: (_grown(b, n), offset(b, i)) if b.name in private else (b, i))


ExprFn = Callable[[Expr], Expr]
StoreFn = Callable[[Buffer, Expr], tuple[Buffer, Expr]]


def _map_stmt(s: Stmt, expr: ExprFn, store: StoreFn) -> Stmt:
    """``s`` with ``expr`` applied to every expression and ``store(buffer, index)`` to every
    store's (and declaration's) buffer."""
    if isinstance(s, Store):
        buf, index = store(s.buffer, expr(s.index))
        return Store(buf, index, expr(s.value))
    if isinstance(s, Allocate):
        return Allocate(store(s.buffer, Const(0, "int32"))[0])
    if isinstance(s, IfThenElse):
        other = None if s.otherwise is None else _map_stmt(s.otherwise, expr, store)
        return IfThenElse(expr(s.cond), _map_stmt(s.then, expr, store), other)
    if isinstance(s, For):
        return replace(s, begin=_extent(s.begin, expr), extent=_extent(s.extent, expr),
                       body=_map_stmt(s.body, expr, store))
    if isinstance(s, Seq):
        return seq(_map_stmt(x, expr, store) for x in s.stmts)
    if isinstance(s, CallStmt):
        return CallStmt(s.func, s.part, tuple(expr(a) for a in s.args))
    if isinstance(s, Evaluate):
        return Evaluate(expr(s.value))
    return s


def _extent(e: Extent, expr: ExprFn) -> Extent:
    return e if isinstance(e, int) else expr(e)


def _uses(s: Stmt, v: Var) -> bool:
    for x in _stmts(s):
        exprs: list[object] = []
        if isinstance(x, Store):
            exprs = [x.index, x.value]
        elif isinstance(x, IfThenElse):
            exprs = [x.cond]
        elif isinstance(x, For):
            exprs = [x.begin, x.extent]
        elif isinstance(x, CallStmt):
            exprs = list(x.args)
        elif isinstance(x, Evaluate):
            exprs = [x.value]
        if any(isinstance(e, Expr) and v in walk(e) for e in exprs):
            return True
    return False


def _replicate(s: Stmt, v: Var, values: range, memo: Memo) -> Stmt:
    """Push the copies down: a statement that does not use ``v`` stays once; loops and
    sequences are entered; a guard that uses ``v`` goes inside the loops and guards it encloses
    (it reads loop variables and sizes only, so moving it is exact); what is left (a store, a
    guarded store, a loop whose range uses ``v``) is emitted once per virtual thread."""
    if not _uses(s, v):
        return s
    if isinstance(s, Seq):
        return seq(_replicate(x, v, values, memo) for x in s.stmts)
    if isinstance(s, For) and not _uses(replace(s, body=EMPTY), v):
        return replace(s, body=_replicate(s.body, v, values, memo))
    if isinstance(s, IfThenElse) and v not in walk(s.cond):
        other = None if s.otherwise is None else _replicate(s.otherwise, v, values, memo)
        return IfThenElse(s.cond, _replicate(s.then, v, values, memo), other)
    if isinstance(s, IfThenElse) and s.otherwise is None:
        inner = s.then
        free = [c for c in conjuncts(s.cond) if v not in walk(c)]
        if free and len(free) < len(conjuncts(s.cond)):  # the parts that do not use v stay out here
            rest = conjoin([c for c in conjuncts(s.cond) if v in walk(c)])
            return IfThenElse(conjoin(free), _replicate(IfThenElse(rest, inner), v, values, memo))
        if not _uses(inner, v) and _shared_only(inner):
            # a cooperative fetch serves all virtual threads (its own guards keep its reads in
            # bounds): it runs once, whether or not this virtual thread's outputs are in range
            return inner
        if isinstance(inner, Seq):
            return seq(  # a declaration stays unguarded, in the block of its users
                x if isinstance(x, Allocate) else _replicate(IfThenElse(s.cond, x), v, values, memo)
                for x in inner.stmts
            )
        if isinstance(inner, For) and not _uses(replace(inner, body=EMPTY), v):
            return replace(inner, body=_replicate(IfThenElse(s.cond, inner.body), v, values, memo))
        if isinstance(inner, IfThenElse) and inner.otherwise is None:
            return _replicate(IfThenElse(conjoin([s.cond, inner.cond]), inner.then), v, values, memo)
    return seq(_fix(s, v, values, i, memo) for i in values)


def _shared_only(s: Stmt) -> bool:
    """Whether ``s`` stores, and stores to shared buffers only."""
    stored = [x.buffer for x in _stmts(s) if isinstance(x, Store)]
    return bool(stored) and all(b.scope == "shared" for b in stored) and not any(
        isinstance(x, (CallStmt, Evaluate)) for x in _stmts(s)
    )


#: id of an integer expression -> (the expression, kept alive; its copy for each virtual thread,
#: or None where it does not read the virtual thread)
Memo = dict[int, tuple[Expr, list[Expr] | None]]


def _fix(s: Stmt, v: Var, values: range, i: int, memo: Memo) -> Stmt:
    """``s`` for virtual thread ``i`` of ``values``: ``v`` replaced by ``i``, the integer parts
    that read it (indices, the sides of guards) simplified, decided guards dropped."""

    def part(x: Expr) -> Expr | None:  # None: look inside (a float value, a comparison)
        if not is_int(x):
            return None
        got = memo.get(id(x))
        if got is None:  # statements share index nodes: each is copied once
            got = memo[id(x)] = (x, _copies(x, v, values) if v in walk(x) else None)
        return x if got[1] is None else got[1][i - values.start]

    return fold(_map_stmt(s, lambda e: rewrite(e, part), lambda b, idx: (b, idx)), {})


def _copies(x: Expr, v: Var, values: range) -> list[Expr]:
    """``x`` with ``v`` at each of ``values``, simplified: where ``v`` is a term of its own (not
    under a division), the canonical form is computed once and only its constant changes."""
    terms, k = linear(x, {})
    c = terms.pop(v, 0)
    if c and not any(v in walk(t) for t in terms):
        return [rebuild(terms, k + c * i, x.dtype) for i in values]
    return [simplify(substitute(x, {v: Const(i, v.dtype)})) for i in values]
