"""IR passes after loop-nest construction: guard folding, auto-unroll marking, loop partitioning,
checks (explicit unrolling is in ``unrolling.py``)."""

from __future__ import annotations

from itertools import pairwise

from ..expr import BinOp, Cmp, Const, Expr, Extent, Var, as_expr, walk
from ..schedule import ScheduleError
from .ir import (
    EMPTY,
    Allocate,
    Barrier,
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
from .simplify import (
    FALSE,
    INF,
    TRUE,
    Ranges,
    bounds,
    conjoin,
    conjuncts,
    linear,
    loop_end,
    rebuild,
    simplify,
    span,
)
from .unrolling import MAX_UNROLL_COPIES, expanded_size

AUTO_EXPAND = 32  # auto-unrolled nests up to this many steps are expanded here
SYMBOLIC_STEPS = 1 << 20  # what a loop over a symbolic extent counts as (never unrolled)
_VECTOR_NODES = (BufLoad, BinOp, Var, Const)  # what a vector statement is made of


def fold(s: Stmt, ranges: Ranges) -> Stmt:
    """Simplify guards under the loop ranges; drop the ones that are decided. (Indices were
    simplified when lowering built them, so stores are left as they are.)"""
    if isinstance(s, Store):
        return s
    if isinstance(s, For):
        ranges[s.var] = span(s.begin, s.extent)
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
        out[s.var] = span(s.begin, s.extent)
    for x in stmt_children(s):
        loop_ranges(x, out)
    return out


def guards(s: Stmt) -> list[Expr]:
    """Every guard condition part inside ``s``."""
    own = conjuncts(s.cond) if isinstance(s, IfThenElse) else []
    return own + [g for x in stmt_children(s) for g in guards(x)]


def _tails(loop: For) -> list[Cmp]:
    """The guards in ``loop`` of the form ``a*var + rest < 0`` (candidates for a tail)."""
    return [
        g
        for g in guards(loop.body)
        if isinstance(g, Cmp) and g.op == "lt" and g.b == Const(0) and loop.var in walk(g.a)
    ]


def _main_end(loop: For, ranges: Ranges) -> tuple[int, int]:
    """``(m, d)``: the largest ``m`` such that every guard in ``loop`` that tightens with its
    variable holds for ``var < m``, and the smallest ``d`` such that one of them fails for
    ``var >= d`` whatever the loops inside (guards of the form ``a*var + rest < 0``, ``a > 0``)."""
    assert isinstance(loop.begin, int) and isinstance(loop.extent, int)
    end = dead = loop.begin + loop.extent
    tails = _tails(loop)
    inner = loop_ranges(loop.body, dict(ranges)) if tails else ranges
    for g in tails:
        terms, k = linear(g.a, inner)
        a = terms.pop(loop.var, 0)
        if a <= 0:
            continue
        rest_lo, rest_hi = bounds((terms, k), inner)
        if rest_hi != float("inf"):
            end = min(end, -(int(rest_hi) // a))  # var < ceil(-rest_hi / a)
        if rest_lo != -float("inf"):
            dead = min(dead, -(int(rest_lo) // a))  # var >= ceil(-rest_lo / a)
    return end, max(end, dead)


def _symbolic_main_end(
    loop: For, ranges: Ranges, sizes: frozenset[Var]
) -> tuple[Expr, list[Expr], list[Expr]] | None:
    """For a loop with a symbolic bound: ``(m, proven, exact)``, ``m`` an expression of shape
    variables such that every guard in ``proven`` holds for ``var < m`` (and those in ``exact``
    fail for ``var >= m``), or None if no guard gives one.

    A guard ``a*var + rest < 0`` gives ``m = ceil(-max(rest) / a)`` where ``max(rest)`` keeps the
    terms fixed during the loop (shape variables, outer loop variables) as symbols and takes the
    numeric bound of each term that varies inside it."""
    inner = loop_ranges(loop.body, dict(ranges))
    inside = set(loop_ranges(loop.body, {}))
    found: list[tuple[Expr, Expr, bool]] = []
    for g in _tails(loop):
        terms, k = linear(g.a, inner)
        a = terms.pop(loop.var, 0)
        if a <= 0:
            continue
        symbols: dict[Expr, int] = {}
        numeric: dict[Expr, int] = {}
        for t, c in terms.items():
            uses = {v for v in walk(t) if isinstance(v, Var)}
            (numeric if uses & inside else symbols)[t] = c
        _, hi = bounds((numeric, k), inner)
        if hi == INF or not symbols:
            continue
        neg = {t: -c for t, c in symbols.items()}  # ceil((-symbols - hi) / a)
        top = rebuild(neg, -int(hi) + a - 1)
        m = simplify(BinOp("floordiv", top, Const(a), "int32"), ranges) if a > 1 else simplify(top, ranges)
        found.append((m, g, not numeric))
    if not found:
        return None
    m = found[0][0]
    for other, _, _ in found[1:]:
        if other != m:
            m = BinOp("min", m, other, "int32")
    exact = [g for other, g, ex in found if ex and other == m]
    return m, [g for _, g, _ in found], exact


def _clamp(m: Expr, begin: Extent, end: Extent, ranges: Ranges) -> Expr:
    """``max(begin, min(m, end))``, simplified where the order is provable."""
    lo, hi = as_expr(begin), as_expr(end)
    if not _le(m, hi, ranges):
        m = BinOp("min", m, hi, "int32")
    if not _le(lo, m, ranges):
        m = BinOp("max", lo, m, "int32")
    return simplify(m, ranges)


def _le(a: Expr, b: Expr, ranges: Ranges) -> bool:
    """Whether ``a <= b`` provably (``x // c <= (x + d) // c`` for ``d >= 0`` included)."""
    if isinstance(a, BinOp) and isinstance(b, BinOp) and a.op == b.op == "floordiv" and a.b == b.b:
        a, b = a.a, b.a
    lo, _ = bounds(linear(BinOp("sub", b, a, "int32"), ranges), ranges)
    return lo >= 0


def _symbolic_parts(s: For, ranges: Ranges, sizes: frozenset[Var]) -> list[Stmt] | None:
    """(main, tail) of a loop split at a symbolic bound (see :func:`_symbolic_main_end`), or None."""
    got = _symbolic_main_end(s, ranges, sizes)
    if got is None:
        return None
    end = loop_end(s.begin, s.extent)
    mid = _clamp(got[0], s.begin, end, ranges)
    main_ext = simplify(BinOp("sub", mid, as_expr(s.begin), "int32"), ranges)
    tail_ext = simplify(BinOp("sub", as_expr(end), mid, "int32"), ranges)
    main = For(s.var, s.begin, main_ext, s.kind, _drop(s.body, got[1], TRUE), s.thread, s.auto_unroll)
    tail = For(s.var, mid, tail_ext, s.kind, _drop(s.body, got[2], FALSE), s.thread, s.auto_unroll)
    return [fold(main, dict(ranges)), fold(tail, dict(ranges))]


def _unswitch(s: For, ranges: Ranges, sizes: frozenset[Var]) -> For:
    """A parallel loop over a symbolic extent with tail guards stays one loop (one parallel
    region) whose body tests once per iteration whether it is before the symbolic bound of
    :func:`_symbolic_main_end`: there it runs without the guards that bound proves."""
    got = _symbolic_main_end(s, ranges, sizes)
    if got is None:
        return s
    cut = _clamp(got[0], s.begin, loop_end(s.begin, s.extent), ranges)
    main, tail = _drop(s.body, got[1], TRUE), _drop(s.body, got[2], FALSE)
    body = IfThenElse(Cmp("lt", s.var, cut), main, None if tail == EMPTY else tail)
    return For(s.var, s.begin, s.extent, s.kind, body, s.thread, s.auto_unroll)


def _drop(s: Stmt, known: list[Expr], value: Expr) -> Stmt:
    """``s`` with the guard parts in ``known`` replaced by ``value`` (TRUE or FALSE)."""
    if not known:
        return s
    if isinstance(s, IfThenElse):
        parts = [value if c in known else c for c in conjuncts(s.cond)]
        then = _drop(s.then, known, value)
        other = None if s.otherwise is None else _drop(s.otherwise, known, value)
        if FALSE in parts:
            return EMPTY if other is None else other
        cond = conjoin([c for c in parts if c != TRUE])
        return then if cond == TRUE and other is None else IfThenElse(cond, then, other)
    return map_children(s, lambda x: _drop(x, known, value))


def partition(
    s: Stmt,
    ranges: Ranges,
    memo: dict[int, tuple[Stmt, bool]] | None = None,
    sizes: frozenset[Var] = frozenset(),
) -> Stmt:
    """Split loops with tail guards into a guard-free main part and a guarded tail (an
    image's last partial tile of pixel vectors: its vector loop cut to the pixels left). A loop over
    a symbolic extent (``sizes`` are the shape variables) gets a main part up to a symbolic bound,
    without the guards that bound proves."""
    memo = {} if memo is None else memo
    if not has_guards(s, memo):
        return s
    if isinstance(s, For):
        if s.kind in ("serial", "unrolled", "unroll_hint", "vectorized"):
            # a vectorized loop's main part is whole vectors, its guarded tail (if any) scalar
            if isinstance(s.begin, int) and isinstance(s.extent, int):
                m, dead = _main_end(s, ranges)
                end = s.begin + s.extent
                if s.begin < m < end or m < dead < end:
                    # main part without the guards, a guarded tail, then (dead, end): iterations
                    # where a guard fails throughout (a band's last tiles past a partial band)
                    cuts = sorted({s.begin, max(m, s.begin), min(dead, end), end})
                    parts = [fold(For(s.var, a, b - a, s.kind, s.body, s.thread, s.auto_unroll), dict(ranges))
                             for a, b in pairwise(cuts)]
                    return seq(partition(p, ranges, memo, sizes) for p in parts if p != EMPTY)
            # an unrolled loop of known extent stays whole (and unrolled), guards and all
            if sizes and (s.kind != "unrolled" or not isinstance(s.extent, int)):
                split = _symbolic_parts(s, ranges, sizes)
                if split is not None:
                    return seq(_partition_inside(p, ranges, memo, sizes) for p in split if p != EMPTY)
        elif s.kind == "parallel" and sizes and not isinstance(s.extent, int):
            s = _unswitch(s, ranges, sizes)
        ranges[s.var] = span(s.begin, s.extent)
    return map_children(s, lambda x: partition(x, ranges, memo, sizes))


def _partition_inside(
    s: Stmt, ranges: Ranges, memo: dict[int, tuple[Stmt, bool]], sizes: frozenset[Var]
) -> Stmt:
    """Partition the loops inside a part of a symbolically partitioned loop (not the part itself:
    its bounds are symbolic already, and its tail keeps the guards that made it)."""
    if isinstance(s, For):
        ranges[s.var] = span(s.begin, s.extent)
    return map_children(s, lambda x: partition(x, ranges, memo, sizes))


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
        n = s.extent if isinstance(s.extent, int) else SYMBOLIC_STEPS
        steps *= max(1, n // 16) if _whole_vectors(s) else n
        kind = s.kind
        if lim is not None and kind == "serial" and isinstance(s.extent, int):
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
        expands = (
            s.kind == "unrolled"
            and isinstance(s.extent, int)
            and s.extent * expanded_size(s.body, sizes) <= MAX_UNROLL_COPIES
        )
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
                f"loop {s.var.name} is bound to {s.thread}; bind needs a GPU target (opencl or cuda); "
                "on CPU use parallel / vectorize instead"
            )
        check_loops(s.body, gpu, in_parallel or s.kind == "parallel", in_vector or s.kind == "vectorized")
    elif isinstance(s, (IfThenElse, Seq)):
        for x in stmt_children(s):
            check_loops(x, gpu, in_parallel, in_vector)
    elif not isinstance(s, (Store, Allocate, Barrier, CallStmt, Evaluate)):
        raise TypeError(f"unknown statement {s!r}")
