"""Vector loops free of per-lane selects (CPU targets).

A vectorized loop whose stores select on a condition of its own variable alone (padding:
``w >= 1 && w < 57 ? data[...] : 0``) is printed as a scalar loop, one branch per element (the C
emitter vectorizes straight-line loads and arithmetic only). Here such a loop is split where
those conditions change value, so each part decides them once, and a select on a condition that
does not change inside the loop (``h >= 1``) is hoisted around it (unswitching). Each part is
then straight-line vector code (ResNet-18's convolutions, which copy their input into a padded
buffer first, got 4-7% faster, kernels alone; 2 threads, Zen 4:
``benchmarks/bench_lower_selects.py``). A loop with more parts than
:data:`MAX_PARTS` is left as it is; one of symbolic extent or longer than :data:`MAX_EXTENT` is only
unswitched.
"""

from __future__ import annotations

import math
from fractions import Fraction
from itertools import pairwise, product

from ..expr import Cmp, Expr, Extent, Select, Var, walk
from ..te.traverse import rewrite
from .ir import For, IfThenElse, Seq, Stmt, Store, map_children, seq
from .simplify import FALSE, TRUE, Ranges, binop_sub, conjuncts, decide, linear, simplify, span

MAX_PARTS = 5  # pieces one loop may be split into
MAX_EXTENT = 1 << 12  # longer loops are only unswitched, not split
MAX_UNSWITCH = 2  # conditions hoisted around one loop (2**n copies of it)
FEW = 4  # values of the other variables of a condition that cuts are found for


def split_selects(s: Stmt, ranges: Ranges) -> Stmt:
    """``s`` with every vectorized loop of stores split and unswitched as the module says."""
    if isinstance(s, For):
        inner = {**ranges, s.var: span(s.begin, s.extent)}
        if s.kind == "vectorized" and _stores(s.body) is not None:
            return _vector_loop(s, ranges)
        return map_children(s, lambda x: split_selects(x, inner))
    return map_children(s, lambda x: split_selects(x, ranges))


def _stores(body: Stmt) -> list[Store] | None:
    """The loop body's statements if they are all stores, else None."""
    items = list(body.stmts) if isinstance(body, Seq) else [body]
    return items if all(isinstance(x, Store) for x in items) else None  # type: ignore[return-value]


def _selects(stores: list[Store]) -> list[Select]:
    return [e for st in stores for e in walk(st.value) if isinstance(e, Select)]


def _uses(e: Expr, var: Var) -> bool:
    """Whether ``e`` reads ``var``."""
    return any(isinstance(n, Var) and n == var for n in walk(e))


def _cuts(loop: For, selects: list[Select], ranges: Ranges | None = None) -> list[int]:
    """The values of the loop variable where a select condition of that variable changes.

    A condition ``a * v + k <op> 0`` is linear in ``v``, so its truth can change only next to the
    root ``r = -k / a``: from ``v - 1`` to ``v`` at ``v = ceil(r)`` (``<``, ``>=``, ``==``) or
    ``v = floor(r) + 1`` (``<=``, ``>``, ``!=``); both are checked instead of every ``v``. Other
    loop variables of few values (a stride phase: ``2 * v + px - 1 >= 0``) count by each of their
    values: between the cuts the condition is then the same for every ``v``, a condition of them
    alone, which :func:`_unswitched` hoists."""
    assert isinstance(loop.begin, int) and isinstance(loop.extent, int)
    end = loop.begin + loop.extent
    found: set[int] = set()
    for sel in selects:
        for c in conjuncts(sel.cond):
            if not isinstance(c, Cmp) or loop.var not in {v for v in walk(c) if isinstance(v, Var)}:
                continue
            terms, k0 = linear(binop_sub(c.a, c.b), {})
            a = terms.pop(loop.var, 0)
            values = _few_values(terms, ranges or {})
            if a == 0 or values is None:
                continue
            coefs = list(terms.values())
            for k in {k0 + sum(c * v for c, v in zip(coefs, vs, strict=True)) for vs in values}:
                root = Fraction(-k, a)
                for v in (math.ceil(root), math.floor(root) + 1):
                    if loop.begin < v < end and decide(c.op, a * v + k, a * v + k) != decide(
                        c.op, a * (v - 1) + k, a * (v - 1) + k
                    ):
                        found.add(v)
    return sorted(found)


def _few_values(terms: dict[Expr, int], ranges: Ranges) -> list[tuple[int, ...]] | None:
    """Every combination of values of ``terms`` (variables of at most :data:`FEW` combinations
    in ``ranges``), or None."""
    spans = []
    for t in terms:
        lo, hi = ranges.get(t, (-math.inf, math.inf)) if isinstance(t, Var) else (-math.inf, math.inf)
        if not math.isfinite(hi - lo):
            return None
        spans.append(range(int(lo), int(hi) + 1))
    if math.prod(len(r) for r in spans) > FEW:
        return None
    return list(product(*spans))


def _decided(e: Expr, ranges: Ranges) -> Expr:
    """``e`` with every select whose condition ``ranges`` decide replaced by its branch."""

    def fn(n: Expr) -> Expr | None:
        if not isinstance(n, Select):
            return None
        cond = simplify(n.cond, ranges)
        if cond == TRUE:
            return _decided(n.true_value, ranges)
        if cond == FALSE:
            return _decided(n.false_value, ranges)
        return Select(cond, _decided(n.true_value, ranges), _decided(n.false_value, ranges))

    return rewrite(e, fn)


def _taking(e: Expr, cond: Expr, branch: bool) -> Expr:
    """``e`` with every select on ``cond`` replaced by its true (``branch``) or false branch."""

    def fn(n: Expr) -> Expr | None:
        if isinstance(n, Select) and n.cond == cond:
            return _taking(n.true_value if branch else n.false_value, cond, branch)
        return None

    return rewrite(e, fn)


def _loop(loop: For, begin: Extent, extent: Extent, stores: list[Store]) -> For:
    """``loop`` over ``[begin, begin + extent)`` with ``stores`` as its body."""
    return For(loop.var, begin, extent, loop.kind, seq(stores), loop.thread, loop.auto_unroll)


def _unswitched(loop: For, depth: int = 0) -> Stmt:
    """``loop`` inside ``if`` statements on the conditions of its selects that do not use its
    variable, one copy of it per branch taken."""
    stores = _stores(loop.body)
    assert stores is not None
    invariant = [sel.cond for sel in _selects(stores) if not _uses(sel.cond, loop.var)]
    if not invariant or depth == MAX_UNSWITCH:
        return loop
    cond = invariant[0]
    copies = [
        _unswitched(
            _loop(loop, loop.begin, loop.extent, [Store(st.buffer, st.index, _taking(st.value, cond, branch))
                                                  for st in stores]),  # fmt: skip
            depth + 1,
        )
        for branch in (True, False)
    ]
    return IfThenElse(cond, copies[0], copies[1])


def _vector_loop(loop: For, ranges: Ranges) -> Stmt:
    stores = _stores(loop.body)
    assert stores is not None
    # conditions simplified under the loop's range first: a flat index split into rows and
    # columns (``(j + 114 * r) // 114``) reads as the row ``r`` there, a condition of no lane
    own = {**ranges, loop.var: span(loop.begin, loop.extent)}
    stores = [Store(st.buffer, st.index, _decided(st.value, own)) for st in stores]
    selects = _selects(stores)
    if not selects:
        return loop
    if not (isinstance(loop.begin, int) and isinstance(loop.extent, int)) or loop.extent > MAX_EXTENT:
        return _unswitched(loop)
    end = loop.begin + loop.extent
    bounds = [loop.begin, *_cuts(loop, selects, ranges), end]
    if len(bounds) - 1 > MAX_PARTS:
        return loop
    parts: list[Stmt] = []
    for lo, hi in pairwise(bounds):
        inner = {**ranges, loop.var: span(lo, hi - lo)}
        piece = [Store(st.buffer, st.index, _decided(st.value, inner)) for st in stores]
        parts.append(_unswitched(_loop(loop, lo, hi - lo, piece)))
    return seq(parts)
