"""DAG helpers: operations in topological order, one-line definitions, structural keys."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from .ir_builder import format_extern
from .nodes import to_str
from .rename import unique_names
from .tensor import ComputeOp, ExternOp, Operation, PlaceholderOp, ScanOp, Tensor


def as_tensors(items: Tensor | Operation | Sequence[Tensor | Operation]) -> list[Tensor]:
    """Accept tensors or operations (one or a list), as te's functions do."""
    seq = items if isinstance(items, (list, tuple)) else [items]
    out = []
    for t in seq:
        if isinstance(t, Tensor):
            out.append(t)
        elif isinstance(t, (PlaceholderOp, ComputeOp, ScanOp, ExternOp)):
            out.append(t.output(0))
        else:
            raise TypeError(f"expected a Tensor or an operation, got {type(t).__name__}")
    return out


def topo_order(outputs: Sequence[Tensor]) -> list[Operation]:
    """All operations the outputs depend on, producers before consumers; names must be unique."""
    order: list[Operation] = []
    seen: dict[str, Operation] = {}
    for t in outputs:
        _visit(t.op, order, seen, set())
    return order


def _visit(op: Operation, order: list[Operation], seen: dict[str, Operation], visiting: set[str]) -> None:
    """Add ``op``'s producers, then ``op``, to ``order`` (a module function, not a closure that
    calls itself: such a closure is a reference cycle left to the garbage collector)."""
    if op.name in seen:
        if seen[op.name] is not op:
            raise ValueError(f"two different tensors are both named {op.name!r}; names must be unique")
        return
    if op.name in visiting:
        raise ValueError(f"cycle through tensor {op.name!r}")
    visiting.add(op.name)
    for t in op.input_tensors:
        _visit(t.op, order, seen, visiting)
    visiting.discard(op.name)
    seen[op.name] = op
    order.append(op)


def op_to_str(op: Operation) -> str:
    """One line that defines an operation."""
    if isinstance(op, PlaceholderOp):
        return f"{op.name} = placeholder([{', '.join(str(d) for d in op.shape)}], {op.dtype})"
    if isinstance(op, ScanOp):
        states = ", ".join(f"{t.name}[{', '.join(str(d) for d in t.shape)}]" for t in op.states)
        inits = "; ".join(op_to_str(t.op) for t in op.inits)
        updates = "; ".join(op_to_str(t.op) for t in op.updates)
        line = f"{op.name} = scan(state={states}, init: {inits}, update: {updates}"
        others = [o for o in op.body if all(o is not t.op for t in op.updates)]
        return line + "".join(f"; body: {op_to_str(o)}" for o in others) + ")"
    if isinstance(op, ExternOp):
        ins = ", ".join(f"{b.name}={t.name}" for b, t in zip(op.in_buffers, op.inputs, strict=True))
        outs = ", ".join(f"{b.name}:{b.dtype}[{', '.join(str(d) for d in b.shape)}]" for b in op.out_buffers)
        code = f" c:{op.code.digest()}" if op.code else ""
        return f"{op.name} = extern(({outs}) <- ({ins}): {format_extern(op.body)}){code}"
    axes = ", ".join(f"{iv.name}:{iv.extent}" for iv in op.axis)
    body = ", ".join(to_str(b) for b in op.bodies) if op.others else to_str(op.body)
    return f"{op.name}[{axes}] = {body}" + (f"  # tag={op.tag}" if op.tag else "")


def dag_key(outputs: Sequence[Tensor]) -> str:
    """A structural hash of the DAG behind ``outputs``: stable across runs and processes.

    Operations that share a name are hashed under the names :func:`unique_names` gives them (from
    the DAG alone); a DAG without a repeated name hashes its names as written."""
    text = "\n".join(op_to_str(op) for op in topo_order(unique_names(outputs).outputs))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
