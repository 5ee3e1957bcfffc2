"""Unique operation names: a copy of a DAG in which operations that share a name are told apart.

TVM lets several operations of one DAG share a name (``compute`` and ``placeholder`` are the
defaults, so a DAG of unnamed stages repeats them); autosched names stages, buffers and C
identifiers after operations. :func:`unique_names` renames the later ones deterministically, from
the DAG alone: operations are numbered in topological order (producers first, inputs in the order
their readers load them), the first of a name keeps it and the later ones get ``name_1``,
``name_2``, ... (skipping names the DAG already uses). A DAG without a repeated name comes back as
the very same objects, so its structural key does not change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

from .nodes import Expr, Load
from .tensor import ComputeOp, Operation, PlaceholderOp, ScanOp, Tensor
from .traverse import rewrite


@dataclasses.dataclass(frozen=True, slots=True)
class Renamed:
    """``outputs`` with unique names, and for each original operation that changed (by id) the
    original (kept alive, so that its id stays its own) and its renamed copy."""

    outputs: tuple[Tensor, ...]
    ops: dict[int, tuple[Operation, Operation]]

    def op(self, op: Operation) -> Operation:
        """The copy of the user's operation ``op`` (``op`` itself when unchanged)."""
        pair = self.ops.get(id(op))
        return op if pair is None or pair[0] is not op else pair[1]

    def tensor(self, t: Tensor) -> Tensor:
        """The copy of the user's tensor ``t`` (``t`` itself when its operation is unchanged)."""
        op = self.op(t.op)
        return t if op is t.op else op.output(t.value_index)


def _inputs(op: Operation) -> Iterator[Operation]:
    """Every operation ``op`` reads, a scan's states, inits and body included, in a fixed order."""
    if isinstance(op, ScanOp):
        for t in (*op.states, *op.inits):
            yield t.op
        yield from op.body
        yield from (t.op for t in op.inputs)
    for t in op.input_tensors:
        yield t.op


def all_ops(outputs: Sequence[Tensor]) -> list[Operation]:
    """Every operation behind ``outputs`` (scans' inner stages too), producers first, by identity."""
    order: dict[int, Operation] = {}
    for t in outputs:
        _visit(t.op, order, set())
    return list(order.values())


def _visit(op: Operation, order: dict[int, Operation], visiting: set[int]) -> None:
    if id(op) in order or id(op) in visiting:
        return
    visiting.add(id(op))
    for child in _inputs(op):
        _visit(child, order, visiting)
    visiting.discard(id(op))
    order[id(op)] = op


def _new_names(ops: Sequence[Operation]) -> dict[int, str]:
    """The new name of every operation that shares its name with an earlier one."""
    taken = {op.name for op in ops}
    seen: set[str] = set()
    fresh: dict[int, str] = {}
    for op in ops:
        if op.name not in seen:
            seen.add(op.name)
            continue
        k = 1
        while f"{op.name}_{k}" in taken:
            k += 1
        fresh[id(op)] = f"{op.name}_{k}"
        taken.add(fresh[id(op)])
    return fresh


def unique_names(outputs: Sequence[Tensor]) -> Renamed:
    """``outputs`` over a DAG whose operations all have distinct names (see the module docstring)."""
    ops = all_ops(outputs)
    fresh = _new_names(ops)
    done = Renamed(tuple(outputs), {})
    if not fresh:
        return done

    def load(e: Expr) -> Expr | None:
        if isinstance(e, Load) and id(e.tensor.op) in done.ops:
            return Load(done.tensor(e.tensor), tuple(rewrite(i, load) for i in e.indices))
        return None

    def tensors(ts: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        return tuple(done.tensor(t) for t in ts)

    for op in ops:
        if id(op) not in fresh and not any(id(p) in done.ops for p in _inputs(op)):
            continue
        name = fresh.get(id(op), op.name)
        new: Operation
        if isinstance(op, PlaceholderOp):
            new = PlaceholderOp(name, op.shape, op.dtype)
        elif isinstance(op, ComputeOp):
            body, *others = (rewrite(b, load) for b in op.bodies)
            new = dataclasses.replace(op, name=name, body=body, others=tuple(others), attrs=dict(op.attrs))
        elif isinstance(op, ScanOp):
            body_ops = tuple(done.op(b) for b in op.body)
            new = dataclasses.replace(
                op,
                name=name,
                inits=tensors(op.inits),
                updates=tensors(op.updates),
                states=tensors(op.states),
                body=body_ops,  # type: ignore[arg-type]
                inputs=tensors(op.inputs),
            )
        else:
            new = dataclasses.replace(op, name=name, inputs=tensors(op.inputs), attrs=dict(op.attrs))
        done.ops[id(op)] = (op, new)
    return Renamed(tensors(tuple(outputs)), done.ops)


__all__ = ["Renamed", "all_ops", "unique_names"]
