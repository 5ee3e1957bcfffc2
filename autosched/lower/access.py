"""How an array index moves along a loop: the affine-index analysis the vectorization pass
(:mod:`.vectorize`) decides every dialect's vector loads and stores by."""

from __future__ import annotations

from collections.abc import Callable

from ..expr import Expr, Var
from .simplify import linear


def along(index: Expr, v: Var, uses: Callable[[Expr], bool]) -> tuple[dict[Expr, int], int, int | None]:
    """``index`` as (terms without ``v`` -> coefficient, constant, the stride of ``v``): the stride
    is None where ``index`` is not affine in ``v`` (``v`` inside a term: a product, a division).
    ``uses(term)`` says whether a term uses ``v`` (the pass passes a memoized walk)."""
    terms, k = linear(index, {})
    stride = terms.pop(v, 0)
    return terms, k, None if any(uses(t) for t in terms) else stride
