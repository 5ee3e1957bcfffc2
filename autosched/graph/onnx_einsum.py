"""The ONNX converter of Einsum: any equation without a repeated index inside one operand, written
as the builder's transposes, reductions and batched matrix products.

Each index of a pair of operands is a batch index (in both and in what is kept), a contracted
index (in both, not kept), or free in one of them. The pair is transposed to (batch, free,
contracted) and (batch, contracted, free), viewed as 3-D, multiplied by ``batch_matmul`` and viewed
back; an index in one operand only that nothing keeps is summed first. More than two operands are
contracted left to right. A constant right operand without batch indices becomes a dense layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .ir import GraphError
from .onnx_context import Importer
from .onnx_matmul import dense_const
from .onnx_rewrite import OnnxNode
from .onnx_table import Result, converter

ELLIPSIS = "..."


@dataclass(frozen=True)
class Operand:
    """A builder value and the index letter of each of its axes."""

    value: str
    letters: str


def _ellipsis_letters(count: int, of: int) -> str:
    """Stand-ins for the last ``count`` of ``of`` axes an ellipsis covers (never index letters)."""
    return "".join(chr(0x100 + i) for i in range(of - count, of))


def _letters(text: str) -> bool:
    """Whether ``text`` is ASCII letters only (or empty)."""
    return all("a" <= c.lower() <= "z" for c in text)


def parse(equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """The index letters of each operand and of the output (an ellipsis expanded, the implicit
    output of an equation without ``->`` made explicit)."""
    eq = "".join(equation.split())
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise GraphError(f"equation {equation!r} names {len(terms)} operands, the node has {len(ranks)}")
    spans = []
    for term, rank in zip(terms, ranks, strict=True):
        named = term.replace(ELLIPSIS, "")
        if not _letters(named) or term.count(ELLIPSIS) > 1:
            raise GraphError(f"equation {equation!r}: operand {term!r} is not letters and one optional '...'")
        span = rank - len(named) if ELLIPSIS in term else 0
        if span < 0 or (ELLIPSIS not in term and len(named) != rank):
            raise GraphError(f"equation {equation!r}: operand {term!r} does not fit an input of rank {rank}")
        spans.append(span)
    widest = max(spans)
    expanded = [t.replace(ELLIPSIS, _ellipsis_letters(s, widest)) for t, s in zip(terms, spans, strict=True)]
    for term in expanded:
        if len(set(term)) != len(term):
            raise GraphError(f"equation {equation!r}: an index repeated within one operand (a diagonal) "
                             "is not supported")
    if arrow:
        if not _letters(rhs.replace(ELLIPSIS, "")) or rhs.count(ELLIPSIS) > 1:
            raise GraphError(f"equation {equation!r}: output {rhs!r} is not letters and one optional '...'")
        out = rhs.replace(ELLIPSIS, _ellipsis_letters(widest, widest))
    else:
        named = "".join(terms).replace(ELLIPSIS, "")
        once = sorted(c for c in set(named) if named.count(c) == 1)
        out = _ellipsis_letters(widest, widest) + "".join(once)
    if len(set(out)) != len(out) or not set(out) <= set("".join(expanded)):
        raise GraphError(f"equation {equation!r}: each output index must appear once, and in an operand")
    return expanded, out


def _sizes(cx: Importer, ops: list[Operand], equation: str) -> dict[str, int]:
    """The extent of each index (1 broadcasts against any other extent)."""
    sizes: dict[str, int] = {}
    for op in ops:
        for letter, d in zip(op.letters, cx.b.shape(op.value), strict=True):
            known = sizes.setdefault(letter, d)
            if known != d and 1 not in (known, d):
                raise GraphError(f"equation {equation!r}: an index has extents {known} and {d}")
            sizes[letter] = max(known, d)
    return sizes


def _broadcast(cx: Importer, op: Operand, sizes: dict[str, int]) -> Operand:
    shape = tuple(sizes[c] for c in op.letters)
    if cx.b.shape(op.value) == shape:
        return op
    return Operand(cx.b.broadcast(op.value, shape), op.letters)


def _sum_own(cx: Importer, op: Operand, keep: set[str]) -> Operand:
    """``op`` summed over the indices not in ``keep``."""
    axes = [i for i, c in enumerate(op.letters) if c not in keep]
    if not axes:
        return op
    letters = "".join(c for c in op.letters if c in keep)
    return Operand(cx.b.reduce(op.value, "sum", axes, keepdims=False), letters)


def _permute(cx: Importer, op: Operand, letters: str) -> Operand:
    if op.letters == letters:
        return op
    return Operand(cx.b.transpose(op.value, [op.letters.index(c) for c in letters]), letters)


def _view(cx: Importer, value: str, shape: tuple[int, ...]) -> str:
    return value if cx.b.shape(value) == shape else cx.b.reshape(value, shape)


def _contract(cx: Importer, a: Operand, b: Operand, keep: set[str], sizes: dict[str, int],
              const_b: np.ndarray | None, weight: str) -> Operand:
    """``a`` times ``b`` summed over their shared indices not in ``keep``; ``const_b``: ``b``'s
    array when it is a constant (its indices in ``b.letters`` order), which becomes a dense
    layer's weight named after ``weight``."""
    batch = "".join(c for c in a.letters if c in b.letters and c in keep)
    inner = "".join(c for c in a.letters if c in b.letters and c not in keep)
    left = "".join(c for c in a.letters if c not in b.letters)
    right = "".join(c for c in b.letters if c not in a.letters)

    def size(letters: str) -> int:
        return math.prod(sizes[c] for c in letters)

    out_shape = tuple(sizes[c] for c in batch + left + right)
    x = _permute(cx, a, batch + left + inner).value
    if const_b is not None and not batch:
        w = np.transpose(const_b, [b.letters.index(c) for c in inner + right])
        w = w.reshape(size(inner), size(right))
        rows = _view(cx, x, (size(left), size(inner)))
        wname = f"{weight}.{len(cx.consts)}"
        y = dense_const(cx, rows, np.ascontiguousarray(w, dtype=cx.b.dtype), wname, None)
        return Operand(_view(cx, y, out_shape), batch + left + right)
    y = _permute(cx, b, batch + inner + right).value
    product = cx.b.batch_matmul(_view(cx, x, (size(batch), size(left), size(inner))),
                                _view(cx, y, (size(batch), size(inner), size(right))))
    return Operand(_view(cx, product, out_shape), batch + left + right)


def einsum(cx: Importer, equation: str, inputs: list[str], name: str) -> str:
    """The builder value of ``Einsum(equation)`` over ONNX values ``inputs`` (node ``name``)."""
    cx.check_float(*inputs)
    letters, out = parse(equation, [len(cx.shape(v)) for v in inputs])
    ops = [Operand(cx.value(v), t) for v, t in zip(inputs, letters, strict=True)]
    sizes = _sizes(cx, ops, equation)
    ops = [_broadcast(cx, op, sizes) for op in ops]
    later = [set("".join(t for t in letters[i + 1:])) for i in range(len(letters))]
    acc = _sum_own(cx, ops[0], set(out) | later[0])
    for i in range(1, len(ops)):
        keep = set(out) | later[i]
        op = _sum_own(cx, ops[i], keep | set(acc.letters))
        acc = _sum_own(cx, acc, keep | set(op.letters))
        const_b = None
        weight_only = len(ops) == 2 and cx.is_const(inputs[1]) and not cx.is_const(inputs[0])
        if weight_only and op is ops[1]:  # the constant as given (not summed): a dense layer's weight
            const_b = np.broadcast_to(cx.consts[inputs[1]], cx.b.shape(op.value))
        acc = _contract(cx, acc, op, keep, sizes, const_b, f"{name}.weight")
    return _permute(cx, acc, out).value


@converter("Einsum", attrs=("equation",),
           doc="any number of operands, '...' and implicit outputs; no index repeated within one operand "
               "(diagonals); becomes transposes, sums and batched products (a dense for a constant operand)")
def _einsum(cx: Importer, n: OnnxNode) -> list[Result]:
    return [einsum(cx, cx.text(n, "equation", ""), list(n.inputs), n.name or "einsum")]
