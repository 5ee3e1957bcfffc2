"""IR passes after loop-nest construction: guard folding, loop partitioning, unrolling, checks."""

from __future__ import annotations

from ..expr import BinOp, Cmp, Const, Expr, Var, children, rewrite, substitute
from ..schedule import ScheduleError
from .ir import EMPTY, Allocate, Barrier, For, IfThenElse, Seq, Stmt, Store, map_children, seq, stmt_children
from .simplify import FALSE, TRUE, Ranges, bounds, conjoin, conjuncts, is_int, linear, rebuild, simplify

MAX_UNROLL_COPIES = 512
AUTO_EXPAND = 128  # auto-unrolled nests up to this many steps are expanded here


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
    inner = loop_ranges(loop.body, dict(ranges))
    end = loop.begin + loop.extent
    for g in guards(loop.body):
        if not (isinstance(g, Cmp) and g.op == "lt" and g.b == Const(0)):
            continue
        terms, k = linear(g.a, inner)
        a = terms.pop(loop.var, 0)
        if a <= 0:
            continue
        _, rest_hi = bounds((terms, k), inner)
        if rest_hi != float("inf"):
            end = min(end, -(int(rest_hi) // a))  # var < ceil(-rest_hi / a)
    return end


def partition(s: Stmt, ranges: Ranges) -> Stmt:
    """Split loops with tail guards into a guard-free main part and a guarded tail."""
    if isinstance(s, For):
        if s.kind in ("serial", "unrolled", "unroll_hint") and guards(s.body):
            m = _main_end(s, ranges)
            if s.begin < m < s.begin + s.extent:
                main = For(s.var, s.begin, m - s.begin, s.kind, s.body, s.thread, s.auto_unroll)
                tail = For(s.var, m, s.begin + s.extent - m, s.kind, s.body, s.thread, s.auto_unroll)
                parts = [fold(main, dict(ranges)), fold(tail, dict(ranges))]
                return seq(partition(p, ranges) for p in parts if p != EMPTY)
        ranges[s.var] = (s.begin, s.begin + s.extent - 1)
    return map_children(s, lambda x: partition(x, ranges))


def trip_count(s: Stmt) -> int:
    """Iterations of the innermost statements of ``s`` (max over branches); a vectorized loop
    counts one step per 16 lanes, about the vector statements it becomes."""
    if isinstance(s, For):
        vector = s.kind == "vectorized" and not guards(s.body)  # guarded ones print as scalar loops
        return (max(1, s.extent // 16) if vector else s.extent) * trip_count(s.body)
    if isinstance(s, IfThenElse):
        return max(trip_count(s.then), trip_count(s.otherwise) if s.otherwise else 1)
    if isinstance(s, Seq):
        return max((trip_count(x) for x in s.stmts), default=1)
    return 1


def auto_unroll(s: Stmt, limit: int | None = None) -> Stmt:
    """Mark serial loops under an ``auto_unroll_max_step`` pragma whose nest is small enough."""
    if isinstance(s, For):
        lim = s.auto_unroll if s.auto_unroll is not None else limit
        kind = s.kind
        if lim is not None and kind == "serial" and trip_count(s) <= lim:
            if trip_count(s) <= AUTO_EXPAND:
                kind = "unrolled"
            elif not _has_scalar_loops(s.body):
                kind = "unroll_hint"  # only innermost nests: hints on outer levels blow up gcc's time
        return For(s.var, s.begin, s.extent, kind, auto_unroll(s.body, lim), s.thread, None)
    return map_children(s, lambda x: auto_unroll(x, limit))


def _has_scalar_loops(s: Stmt) -> bool:
    """Whether ``s`` contains a loop other than a vectorized one."""
    if isinstance(s, For) and s.kind != "vectorized":
        return True
    return any(_has_scalar_loops(x) for x in stmt_children(s))


def unroll(s: Stmt, ranges: Ranges) -> Stmt:
    """Replace unrolled loops by copies of their body (up to a size limit; larger stay pragmas)."""
    if isinstance(s, For):
        ranges[s.var] = (s.begin, s.begin + s.extent - 1)
        body = unroll(s.body, ranges)
        if s.kind == "unrolled" and s.extent * stmt_size(body) <= MAX_UNROLL_COPIES:
            copies = []
            memo: dict[int, tuple] = {}
            for i in range(s.begin, s.begin + s.extent):
                ranges[s.var] = (i, i)
                copies.append(specialize(body, s.var, i, ranges, memo))
            ranges[s.var] = (s.begin, s.begin + s.extent - 1)
            return seq(c for c in copies if c != EMPTY)
        return For(s.var, s.begin, s.extent, s.kind, body, s.thread, s.auto_unroll)
    return map_children(s, lambda x: unroll(x, ranges))


def uses(e: Expr, var: Var) -> bool:
    """Whether ``e`` mentions ``var``."""
    if isinstance(e, Var):
        return e.name == var.name
    return any(uses(c, var) for c in children(e))


def specialize(s: Stmt, var: Var, value: int, ranges: Ranges, memo: dict[int, tuple] | None = None) -> Stmt:
    """``s`` with ``var`` fixed to ``value``: only index expressions and guards that use ``var`` are
    re-simplified (the rest of the tree is shared, which keeps unrolling cheap). ``memo`` keeps the
    linear form of each index across the copies of one loop."""
    memo = {} if memo is None else memo

    def fn(e: Expr) -> Expr | None:
        if is_int(e):
            got = memo.get(id(e))
            if got is None:
                terms, k = linear(e, {})
                c = terms.pop(var, 0)
                shared = rebuild(terms, 0, e.dtype) if terms else None
                got = memo[id(e)] = (e, shared, k, c, not any(uses(t, var) for t in terms))
            _, shared, k, c, affine = got
            if affine:
                return e if c == 0 else with_offset(shared, k + c * value, e.dtype)
            return simplify(substitute(e, {var: Const(value)}), ranges)
        if isinstance(e, Cmp):
            return simplify(substitute(e, {var: Const(value)}), ranges) if uses(e, var) else e
        return None

    if isinstance(s, Store):
        return Store(s.buffer, rewrite(s.index, fn), rewrite(s.value, fn))
    if isinstance(s, For):
        ranges[s.var] = (s.begin, s.begin + s.extent - 1)
        body = specialize(s.body, var, value, ranges, memo)
        return (
            EMPTY if body == EMPTY else For(s.var, s.begin, s.extent, s.kind, body, s.thread, s.auto_unroll)
        )
    if isinstance(s, IfThenElse):
        other = None if s.otherwise is None else specialize(s.otherwise, var, value, ranges, memo)
        return fold(
            IfThenElse(rewrite(s.cond, fn), specialize(s.then, var, value, ranges, memo), other), ranges
        )
    if isinstance(s, Seq):
        return seq(x for x in (specialize(x, var, value, ranges, memo) for x in s.stmts) if x != EMPTY)
    return s


def with_offset(terms: Expr | None, k: int, dtype: str) -> Expr:
    """``terms + k`` built on the shared ``terms`` node (as ``rebuild`` would print it)."""
    if terms is None:
        return Const(k, dtype)
    if k == 0:
        return terms
    return BinOp("add" if k > 0 else "sub", terms, Const(abs(k), dtype), dtype)


def stmt_size(s: Stmt) -> int:
    """Number of leaf statements (a measure of code size)."""
    if isinstance(s, For):
        return stmt_size(s.body)
    if isinstance(s, IfThenElse):
        return 1 + stmt_size(s.then) + (stmt_size(s.otherwise) if s.otherwise else 0)
    if isinstance(s, Seq):
        return sum(stmt_size(x) for x in s.stmts)
    return 1


def check_loops(s: Stmt, gpu: bool, in_parallel: bool = False, in_vector: bool = False) -> None:
    """Reject nests the target cannot run: nested parallel loops, parallel inside vector loops,
    thread-bound loops on a CPU target."""
    if isinstance(s, For):
        if s.kind == "parallel" and (in_parallel or in_vector):
            raise ScheduleError(
                f"loop {s.var.name}: a parallel loop cannot be nested in a parallel or vector loop"
            )
        if s.kind == "thread" and not gpu:
            raise ScheduleError(f"loop {s.var.name} is bound to {s.thread}; bind needs a GPU target")
        check_loops(s.body, gpu, in_parallel or s.kind == "parallel", in_vector or s.kind == "vectorized")
    elif isinstance(s, (IfThenElse, Seq)):
        for x in stmt_children(s):
            check_loops(x, gpu, in_parallel, in_vector)
    elif not isinstance(s, (Store, Allocate, Barrier)):
        raise TypeError(f"unknown statement {s!r}")
