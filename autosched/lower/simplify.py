"""Index simplification: affine canonical form, range-aware floordiv/floormod, condition proving.

Integer expressions are brought to ``c0 + sum(coef * term)`` where a term is a variable or an
opaque sub-expression (already simplified). Variable ranges (inclusive bounds of loop variables)
let the simplifier drop ``x // c`` and ``x % c`` where ``x`` stays in ``[0, c)`` and decide
comparisons that always (or never) hold.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..expr import BinOp, Cast, Cmp, Const, Expr, Extent, Logic, Not, Var, as_expr, rewrite

#: inclusive bounds of variables; infinite where a loop's extent is symbolic (shape variables
#: have (0, inf): sizes are never negative)
Ranges = dict[Var, tuple[float, float]]
Linear = tuple[dict[Expr, int], int]
INF = math.inf
TRUE = Const(1, "bool")
FALSE = Const(0, "bool")


def is_int(e: Expr) -> bool:
    return e.dtype in ("int32", "int64")


def linear(e: Expr, ranges: Ranges) -> Linear:
    """``e`` (an integer expression) as (terms -> coefficient, constant)."""
    terms: dict[Expr, int] = {}
    k = _collect(e, ranges, 1, terms)
    return terms, k + _fold_divmod(terms, ranges)


def combine(parts: Iterable[tuple[Expr, int]], ranges: Ranges) -> Expr:
    """``sum(coef * e)`` over integer expressions, simplified (e.g. a flat index from its strides)."""
    terms: dict[Expr, int] = {}
    k = sum(_collect(e, ranges, c, terms) for e, c in parts)
    return rebuild(terms, k + _fold_divmod(terms, ranges))


def _fold_divmod(terms: dict[Expr, int], ranges: Ranges) -> int:
    """Merge each ``c * m * (e // c) + m * (e % c)`` of ``terms`` into ``m * e`` (true of floor
    division), in place; return the constant it adds. A flat index split into (row, column) and
    put back together (``(i // W) * W + i % W``, a fused loop of an image's rows and columns
    reading a flat tensor) is then affine in ``i``: a contiguous vector load, a bounded region."""
    k = 0
    for t in list(terms):
        if not (isinstance(t, BinOp) and t.op == "floormod" and isinstance(t.b, Const)) or t not in terms:
            continue
        m, div = terms[t], BinOp("floordiv", t.a, t.b, t.type)
        if terms.get(div) == m * int(t.b.value):
            del terms[t], terms[div]
            k += _collect(t.a, ranges, m, terms)
    return k


def _collect(e: Expr, ranges: Ranges, scale: int, out: dict[Expr, int]) -> int:
    """Add ``scale * e``'s terms to ``out`` (one dict for a whole sum); return its constant."""
    if isinstance(e, Const):
        return scale * int(e.value)
    if isinstance(e, Var):
        _add(out, e, scale)
        return 0
    if isinstance(e, BinOp):
        op = e.op
        if op == "add":
            return _collect(e.a, ranges, scale, out) + _collect(e.b, ranges, scale, out)
        if op == "sub":
            return _collect(e.a, ranges, scale, out) + _collect(e.b, ranges, -scale, out)
        if op == "mul":
            if isinstance(e.b, Const):
                return _collect(e.a, ranges, scale * int(e.b.value), out)
            ta, ka = linear(e.a, ranges)
            tb, kb = linear(e.b, ranges)
            if not tb:
                return _merge(out, ta, ka, scale * kb)
            if not ta:
                return _merge(out, tb, kb, scale * ka)
            return _product(out, (ta, ka), (tb, kb), e.type, scale)
        if op in ("floordiv", "floormod"):
            tb, kb = linear(e.b, ranges)
            if not tb and kb > 0:
                return _merge(out, *_divmod(op, linear(e.a, ranges), kb, e.type, ranges), scale)
        if op in ("min", "max"):
            a, b = simplify(e.a, ranges), simplify(e.b, ranges)
            lo, hi = bounds(linear(binop_sub(a, b), ranges), ranges)
            if (op == "min" and hi <= 0) or (op == "max" and lo >= 0):
                return _collect(a, ranges, scale, out)
            if (op == "min" and lo >= 0) or (op == "max" and hi <= 0):
                return _collect(b, ranges, scale, out)
            _add(out, BinOp(op, a, b, e.type), scale)
            return 0
    node = rewrite_children(e, ranges)
    if isinstance(node, Const):
        return scale * int(node.value)
    _add(out, node, scale)
    return 0


def _product(out: dict[Expr, int], a: Linear, b: Linear, dtype: str, scale: int) -> int:
    """Add ``scale * a * b`` of two non-constant linear forms. A product by one symbol (``i * n``
    with ``n`` a shape variable, as in a flat index with a symbolic stride) is distributed over
    the other form's terms, so that the index stays a sum of simple terms."""
    for (ta, ka), (tb, kb) in ((a, b), (b, a)):
        if kb == 0 and len(tb) == 1:
            sym, cb = next(iter(tb.items()))
            for t, c in ta.items():
                pair = sorted((t, sym), key=_term_key)
                _add(out, BinOp("mul", pair[0], pair[1], dtype), scale * c * cb)
            _add(out, sym, scale * ka * cb)
            return 0
    _add(out, BinOp("mul", rebuild(*a), rebuild(*b), dtype), scale)
    return 0


def span(begin: Extent, extent: Extent) -> tuple[float, float]:
    """Inclusive bounds of a loop variable over ``[begin, begin + extent)`` (infinite when symbolic)."""
    if isinstance(begin, int) and isinstance(extent, int):
        return (begin, begin + extent - 1)
    return (begin if isinstance(begin, int) else 0, INF)


def loop_end(begin: Extent, extent: Extent) -> Extent:
    """``begin + extent``: an int, or a simplified expression of shape variables."""
    if isinstance(begin, int) and isinstance(extent, int):
        return begin + extent
    return simplify(BinOp("add", as_expr(begin), as_expr(extent), "int32"))


def _add(out: dict[Expr, int], term: Expr, c: int) -> None:
    v = out.get(term, 0) + c
    if v:
        out[term] = v
    else:
        out.pop(term, None)


def _merge(out: dict[Expr, int], terms: dict[Expr, int], k: int, scale: int) -> int:
    for t, c in terms.items():
        _add(out, t, c * scale)
    return k * scale


def binop_sub(a: Expr, b: Expr) -> Expr:
    return BinOp("sub", a, b, a.dtype)


def _divmod(op: str, lin: Linear, c: int, dtype: str, ranges: Ranges) -> Linear:
    terms, k = lin
    if c == 1:
        return (terms, k) if op == "floordiv" else ({}, 0)
    q_terms = {t: v // c for t, v in terms.items() if v % c == 0}
    r_terms = {t: v for t, v in terms.items() if v % c != 0}
    q_k, r_k = divmod(k, c)
    lo, hi = bounds((r_terms, r_k), ranges)
    if lo >= 0 and hi < c:
        return (q_terms, q_k) if op == "floordiv" else (r_terms, r_k)
    if not terms:
        return ({}, k // c) if op == "floordiv" else ({}, k % c)
    if op == "floordiv" and lo >= 0 and q_terms:
        # (c*q + r) // c == q + r // c when r >= 0
        inner = BinOp("floordiv", rebuild(r_terms, r_k), Const(c, dtype), dtype)
        out = dict(q_terms)
        out[inner] = out.get(inner, 0) + 1
        return out, q_k
    if op == "floormod" and q_terms:
        return {BinOp("floormod", rebuild(r_terms, r_k), Const(c, dtype), dtype): 1}, 0
    return {BinOp(op, rebuild(terms, k), Const(c, dtype), dtype): 1}, 0


def _term_key(t: Expr) -> tuple[int, str]:
    return (0, t.name) if isinstance(t, Var) else (1, str(t))


def rebuild(terms: dict[Expr, int], k: int, dtype: str = "int32") -> Expr:
    """An expression for (terms, constant), terms in a deterministic order."""
    out: Expr | None = None
    for t in sorted(terms, key=_term_key):
        c = terms[t]
        mag = t if abs(c) == 1 else BinOp("mul", t, Const(abs(c), dtype), dtype)
        if out is None:
            out = mag if c > 0 else BinOp("sub", Const(0, dtype), mag, dtype)
        else:
            out = BinOp("add" if c > 0 else "sub", out, mag, dtype)
    if out is None:
        return Const(k, dtype)
    if k > 0:
        return BinOp("add", out, Const(k, dtype), dtype)
    if k < 0:
        return BinOp("sub", out, Const(-k, dtype), dtype)
    return out


def term_bounds(t: Expr, ranges: Ranges) -> tuple[float, float]:
    """Inclusive bounds of one term (infinite where unknown)."""
    if isinstance(t, Var):
        return ranges.get(t, (-INF, INF))
    if isinstance(t, BinOp) and isinstance(t.b, Const) and t.b.value > 0:
        c = int(t.b.value)
        lo, hi = bounds(linear(t.a, ranges), ranges)
        if t.op == "floordiv":
            return (lo // c if lo != -INF else -INF, hi // c if hi != INF else INF)
        if t.op == "floormod":
            return (lo, hi) if lo >= 0 and hi < c else (0, c - 1)
    if isinstance(t, BinOp) and t.op in ("min", "max"):
        a = bounds(linear(t.a, ranges), ranges)
        b = bounds(linear(t.b, ranges), ranges)
        f = min if t.op == "min" else max
        return f(a[0], b[0]), f(a[1], b[1])
    return -INF, INF


def bounds(lin: Linear, ranges: Ranges) -> tuple[float, float]:
    """Inclusive bounds of a linear form."""
    terms, k = lin
    lo = hi = float(k)
    for t, c in terms.items():
        tl, th = term_bounds(t, ranges)
        if c > 0:
            lo += c * tl if tl != -INF else -INF
            hi += c * th if th != INF else INF
        else:
            lo += c * th if th != INF else -INF
            hi += c * tl if tl != -INF else INF
    return lo, hi


def simplify(e: Expr, ranges: Ranges | None = None) -> Expr:
    """Simplify any expression: integer parts canonicalized, decidable conditions folded."""
    r = ranges if ranges is not None else {}
    if isinstance(e, (Const, Var)):
        return e
    if is_int(e):
        return rebuild(*linear(e, r), e.dtype)
    if isinstance(e, Cmp) and is_int(e.a) and is_int(e.b):
        return _compare(e, r)
    if isinstance(e, Logic):
        a, b = simplify(e.a, r), simplify(e.b, r)
        if e.op == "and":
            if a == FALSE or b == FALSE:
                return FALSE
            return b if a == TRUE else a if b == TRUE else Logic("and", a, b)
        if a == TRUE or b == TRUE:
            return TRUE
        return b if a == FALSE else a if b == FALSE else Logic("or", a, b)
    if isinstance(e, Not):
        a = simplify(e.a, r)
        return FALSE if a == TRUE else TRUE if a == FALSE else Not(a)
    return rewrite_children(e, r)


def rewrite_children(e: Expr, ranges: Ranges) -> Expr:
    """Rebuild ``e`` with every child simplified."""
    top = e

    def fn(n: Expr) -> Expr | None:
        return None if n is top else simplify(n, ranges)

    out = rewrite(e, fn)
    if isinstance(out, Cast) and isinstance(out.value, Const) and is_int(out):
        return Const(int(out.value.value), out.type)
    return out


def _compare(e: Cmp, ranges: Ranges) -> Expr:
    terms, k = linear(binop_sub(e.a, e.b), ranges)
    lo, hi = bounds((terms, k), ranges)
    verdict = decide(e.op, lo, hi)
    if verdict is not None:
        return TRUE if verdict else FALSE
    return Cmp(e.op, rebuild(terms, k), Const(0, "int32"))


def decide(op: str, lo: float, hi: float) -> bool | None:
    """Whether ``x <op> 0`` holds for every ``x`` in ``[lo, hi]`` (True), for none (False), or
    depends on ``x`` (None)."""
    holds, fails = {
        "lt": (hi < 0, lo >= 0),
        "le": (hi <= 0, lo > 0),
        "gt": (lo > 0, hi <= 0),
        "ge": (lo >= 0, hi < 0),
        "eq": (lo == hi == 0, lo > 0 or hi < 0),
        "ne": (lo > 0 or hi < 0, lo == hi == 0),
    }[op]
    return True if holds else False if fails else None


def conjuncts(cond: Expr) -> list[Expr]:
    """Split ``a && b && ...`` into its parts."""
    if isinstance(cond, Logic) and cond.op == "and":
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [cond]


def conjoin(conds: list[Expr]) -> Expr:
    """``c0 && c1 && ...`` (``TRUE`` when empty)."""
    out: Expr | None = None
    for c in conds:
        out = c if out is None else Logic("and", out, c)
    return TRUE if out is None else out
