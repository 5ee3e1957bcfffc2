"""IR passes after loop-nest construction: guard folding, auto-unroll marking, loop partitioning,
checks (explicit unrolling is in ``unrolling.py``)."""

from __future__ import annotations

from ..expr import BinOp, Cmp, Const, Expr, Var, walk
from ..schedule import ScheduleError
from .ir import (
    EMPTY,
    Allocate,
    Barrier,
    BufLoad,
    For,
    IfThenElse,
    Seq,
    Stmt,
    Store,
    map_children,
    seq,
    stmt_children,
)
from .simplify import FALSE, TRUE, Ranges, bounds, conjoin, conjuncts, linear, simplify
from .unrolling import MAX_UNROLL_COPIES, expanded_size

AUTO_EXPAND = 32  # auto-unrolled nests up to this many steps are expanded here
_VECTOR_NODES = (BufLoad, BinOp, Var, Const)  # what a vector statement is made of


def fold(s: Stmt, ranges: Ranges) -> Stmt:
    """Simplify guards under the loop ranges; drop the ones that are decided. (Indices were
    simplified when lowering built them, so stores are left as they are.)"""
    if isinstance(s, Store):
        return s
    if isinstance(s, For):
        ranges[s.var] = (s.begin, s.begin + s.extent - 1)
        body = fold(s.body, ranges)
        if body == EMPTY:
            return EMPTY
        if body is s.body:
            return s
        return For(s.var, s.begin, s.extent, s.kind, body, s.thread, s.auto_unroll)
    if isinstance(s, IfThenElse):
        cond = conjoin([c for c in (simplify(c, ranges) for c in conjuncts(s.cond)) if c != TRUE])
        if any(c == FALSE for c in conjuncts(cond)):
            return EMPTY if s.otherwise is None else fold(s.otherwise, ranges)
        then = fold(s.then, ranges)
        if cond == TRUE:
            return then
        other = None if s.otherwise is None else fold(s.otherwise, ranges)
        return IfThenElse(cond, then, other)
    if isinstance(s, Seq):
        return seq(x for x in (fold(x, ranges) for x in s.stmts) if x != EMPTY)
    return s


def loop_ranges(s: Stmt, out: Ranges) -> Ranges:
    """Ranges of every loop variable inside ``s``."""
    if isinstance(s, For):
        out[s.var] = (s.begin, s.begin + s.extent - 1)
    for x in stmt_children(s):
        loop_ranges(x, out)
    return out


def guards(s: Stmt) -> list[Expr]:
    """Every guard condition part inside ``s``."""
    own = conjuncts(s.cond) if isinstance(s, IfThenElse) else []
    return own + [g for x in stmt_children(s) for g in guards(x)]


def _main_end(loop: For, ranges: Ranges) -> int:
    """The largest ``m`` such that every guard in ``loop`` that tightens with its variable holds
    for ``var < m`` (guards of the form ``a*var + rest < 0`` with ``a > 0``)."""
    end = loop.begin + loop.extent
    tails = [
        g
        for g in guards(loop.body)
        if isinstance(g, Cmp) and g.op == "lt" and g.b == Const(0) and loop.var in walk(g.a)
    ]
    inner = loop_ranges(loop.body, dict(ranges)) if tails else ranges
    for g in tails:
        terms, k = linear(g.a, inner)
        a = terms.pop(loop.var, 0)
        if a <= 0:
            continue
        _, rest_hi = bounds((terms, k), inner)
        if rest_hi != float("inf"):
            end = min(end, -(int(rest_hi) // a))  # var < ceil(-rest_hi / a)
    return end


def partition(s: Stmt, ranges: Ranges, memo: dict[int, tuple[Stmt, bool]] | None = None) -> Stmt:
    """Split loops with tail guards into a guard-free main part and a guarded tail."""
    memo = {} if memo is None else memo
    if not has_guards(s, memo):
        return s
    if isinstance(s, For):
        if s.kind in ("serial", "unrolled", "unroll_hint"):
            m = _main_end(s, ranges)
            if s.begin < m < s.begin + s.extent:
                main = For(s.var, s.begin, m - s.begin, s.kind, s.body, s.thread, s.auto_unroll)
                tail = For(s.var, m, s.begin + s.extent - m, s.kind, s.body, s.thread, s.auto_unroll)
                parts = [fold(main, dict(ranges)), fold(tail, dict(ranges))]
                return seq(partition(p, ranges, memo) for p in parts if p != EMPTY)
        ranges[s.var] = (s.begin, s.begin + s.extent - 1)
    return map_children(s, lambda x: partition(x, ranges, memo))


def has_guards(s: Stmt, memo: dict[int, tuple[Stmt, bool]] | None = None) -> bool:
    """Whether ``s`` contains a guard; ``memo`` maps node ids to (node, answer), the node kept so
    that its id stays its own."""
    got = None if memo is None else memo.get(id(s))
    if got is not None:
        return got[1]
    out = isinstance(s, IfThenElse) or any(has_guards(x, memo) for x in stmt_children(s))
    if memo is not None:
        memo[id(s)] = (s, out)
    return out


def auto_unroll(s: Stmt, limit: int | None = None) -> Stmt:
    """Mark serial loops under an ``auto_unroll_max_step`` pragma whose nest has at most that many
    steps. Nests of up to :data:`AUTO_EXPAND` steps are expanded here (a register tile becomes
    straight-line code); a larger one gets a hint for the C compiler's unroller, but only where
    nothing but vector loops is left inside it once inner loops are expanded (hints on outer
    levels blow up gcc's time)."""
    return _mark(s, limit, {})[0]


def _mark(s: Stmt, limit: int | None, sizes: dict[int, tuple[Stmt, int]]) -> tuple[Stmt, int]:
    """``s`` with its loops marked, and its steps: iterations of its innermost statements (max
    over branches), a vectorized loop counting one step per 16 lanes (about the vector statements
    it becomes)."""
    if isinstance(s, For):
        lim = s.auto_unroll if s.auto_unroll is not None else limit
        body, steps = _mark(s.body, lim, sizes)
        steps *= max(1, s.extent // 16) if _whole_vectors(s) else s.extent
        kind = s.kind
        if lim is not None and kind == "serial":
            if steps <= min(lim, AUTO_EXPAND):
                kind = "unrolled"
            elif steps <= lim and not _loops_left(body, sizes):
                kind = "unroll_hint"
        return For(s.var, s.begin, s.extent, kind, body, s.thread, None), steps
    if isinstance(s, IfThenElse):
        then, steps = _mark(s.then, limit, sizes)
        if s.otherwise is None:
            return IfThenElse(s.cond, then), steps
        other, other_steps = _mark(s.otherwise, limit, sizes)
        return IfThenElse(s.cond, then, other), max(steps, other_steps)
    if isinstance(s, Seq):
        marked = [_mark(x, limit, sizes) for x in s.stmts]
        return seq(m for m, _ in marked), max((n for _, n in marked), default=1)
    return s, 1


def _loops_left(s: Stmt, sizes: dict[int, tuple[Stmt, int]]) -> bool:
    """Whether ``s`` keeps a loop once unrolled loops are expanded (vector statements aside)."""
    if isinstance(s, For) and not _whole_vectors(s):
        expands = s.kind == "unrolled" and s.extent * expanded_size(s.body, sizes) <= MAX_UNROLL_COPIES
        if not expands:
            return True
    return any(_loops_left(x, sizes) for x in stmt_children(s))


def _whole_vectors(loop: For) -> bool:
    """Whether ``loop`` is vectorized over straight-line stores of loads and arithmetic, which
    emitters print as vector statements (anything else, a guard or a select, becomes a loop)."""
    if loop.kind != "vectorized":
        return False
    stores = loop.body.stmts if isinstance(loop.body, Seq) else (loop.body,)
    return all(
        isinstance(st, Store) and all(isinstance(n, _VECTOR_NODES) for n in walk(st.value)) for st in stores
    )


def check_loops(s: Stmt, gpu: bool, in_parallel: bool = False, in_vector: bool = False) -> None:
    """Reject nests the target cannot run: nested parallel loops, parallel inside vector loops,
    thread-bound loops on a CPU target."""
    if isinstance(s, For):
        if s.kind == "parallel" and (in_parallel or in_vector):
            raise ScheduleError(
                f"loop {s.var.name}: a parallel loop cannot be nested in a parallel or vector loop"
            )
        if s.kind == "thread" and not gpu:
            raise ScheduleError(
                f"loop {s.var.name} is bound to {s.thread}; bind needs a GPU target, and GPU targets come "
                "with the CUDA backend (on CPU use parallel / vectorize instead)"
            )
        check_loops(s.body, gpu, in_parallel or s.kind == "parallel", in_vector or s.kind == "vectorized")
    elif isinstance(s, (IfThenElse, Seq)):
        for x in stmt_children(s):
            check_loops(x, gpu, in_parallel, in_vector)
    elif not isinstance(s, (Store, Allocate, Barrier)):
        raise TypeError(f"unknown statement {s!r}")
