"""How an array index moves along a loop: the one affine-index analysis the vector printers of
every dialect (C vector extensions, CUDA ``float4``, OpenCL ``vloadN``/``vstoreN``) decide by."""

from __future__ import annotations

from collections.abc import Callable

from ..expr import Expr, Var, walk
from .simplify import linear


def along(
    index: Expr, v: Var, uses: Callable[[Expr], bool] | None = None
) -> tuple[dict[Expr, int], int, int | None]:
    """``index`` as (terms without ``v`` -> coefficient, constant, the stride of ``v``): the stride
    is None where ``index`` is not affine in ``v`` (``v`` inside a term: a product, a division).
    ``uses(term)`` says whether a term uses ``v`` (default: a walk of it; printers pass a memo)."""
    terms, k = linear(index, {})
    stride = terms.pop(v, 0)
    uses = uses or (lambda t: v in walk(t))
    return terms, k, None if any(uses(t) for t in terms) else stride


def aligned_run(index: Expr, v: Var, begin: int, lanes: int) -> bool:
    """Whether ``index`` reads ``lanes`` contiguous elements from ``v = begin`` on, starting at a
    multiple of ``lanes`` whatever the other variables are (every coefficient and the constant at
    ``begin`` divisible by it): an aligned vector access."""
    terms, k, stride = along(index, v)
    return stride == 1 and (k + begin) % lanes == 0 and all(c % lanes == 0 for c in terms.values())
