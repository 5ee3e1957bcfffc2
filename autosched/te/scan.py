"""``scan``: a recurrence over the first axis, as te's ``scan`` (cumulative sums, recurrences).

``scan(init, update, state)`` is a tensor of ``state``'s shape: its rows ``[0, init.shape[0])``
are ``init``'s and each later row ``t`` is ``update``'s row ``t``, where ``update`` reads earlier
rows through the placeholder ``state`` (``state[t - 1, i]``), directly or through other computes
(the scan's body, computed row by row too). Lists of inits, updates and states give a scan of
several states (one output each) that may read each other. It is computed as a sequential loop
over ``t``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .extent import static
from .nodes import BinOp, Const, Load, Var
from .tensor import ComputeOp, Operation, PlaceholderOp, ScanOp, Tensor
from .traverse import walk


def _earlier_row(index: object, t: Var) -> bool:
    """Whether ``index`` is ``t - c`` with a constant ``c >= 1``."""
    return (
        isinstance(index, BinOp)
        and index.op == "sub"
        and index.a == t
        and isinstance(index.b, Const)
        and int(index.b.value) >= 1
    )


def _as_list(value: Tensor | Sequence[Tensor], what: str, name: str) -> list[Tensor]:
    items: list[object] = list(value) if isinstance(value, (list, tuple)) else [value]
    out: list[Tensor] = []
    for t in items:
        if not isinstance(t, Tensor):
            raise TypeError(f"scan {name!r}: {what} must be a tensor, got {type(t).__name__}")
        out.append(t)
    if not out:
        raise ValueError(f"scan {name!r}: give at least one {what}")
    return out


def _check_state(name: str, init: Tensor, update: Tensor, state: Tensor, rows: object) -> None:
    """One state's init, update and placeholder agree (the error lists the three shapes)."""
    if not isinstance(state.op, PlaceholderOp):
        raise ValueError(f"scan {name!r}: the state must be a placeholder, got {state.name}")
    for what, t in (("init", init), ("update", update)):
        if not isinstance(t.op, ComputeOp) or t.op.num_outputs != 1 or t.op.reduce_axis:
            raise ValueError(f"scan {name!r}: {what} must be a compute of one output without a reduction")
    si, su, ss = init.shape, update.shape, state.shape
    problems = []
    if not (len(si) == len(su) == len(ss)):
        problems.append("they differ in rank")
    else:
        if si[1:] != ss[1:] or su[1:] != ss[1:]:
            problems.append("they differ beyond the first (scan) axis")
        if su[0] != ss[0]:
            problems.append("update must have as many rows as the state")
        init_rows, state_rows = static(si[0]), static(ss[0])
        if init_rows is not None and state_rows is not None and init_rows > state_rows:
            problems.append("init has more rows than the state")
        if si[0] != rows:
            problems.append(f"every init must have the same rows ({rows})")
    if len({init.dtype, update.dtype, state.dtype}) != 1:
        problems.append(f"dtypes differ ({init.dtype}, {update.dtype}, {state.dtype})")
    if problems:
        raise ValueError(
            f"scan {name!r}: shapes init {list(si)}, update {list(su)}, state {list(ss)} disagree: "
            + "; ".join(problems)
        )


def _body(name: str, updates: Sequence[Tensor], states: Sequence[Tensor]) -> tuple[ComputeOp, ...]:
    """The updates and every compute between the states and them, producers first."""
    state_ops = {id(t.op) for t in states}
    memo: dict[int, bool] = {}

    def reads_state(op: Operation) -> bool:
        if id(op) not in memo:
            memo[id(op)] = any(id(t.op) in state_ops or reads_state(t.op) for t in op.input_tensors)
        return memo[id(op)]

    order: dict[int, ComputeOp] = {}

    def visit(op: Operation) -> None:
        if id(op) in order:
            return
        if not isinstance(op, ComputeOp):
            raise ValueError(
                f"scan {name!r}: {op.name} reads the state; only computes may (not scans or externs)"
            )
        for t in op.input_tensors:
            if id(t.op) not in state_ops and reads_state(t.op):
                visit(t.op)
        order[id(op)] = op

    for u in updates:
        visit(u.op)
    return tuple(order.values())


def _check_reads(name: str, body: Sequence[ComputeOp], states: Sequence[Tensor]) -> None:
    """Every compute of the body has the state's rows and reads states only at earlier rows."""
    state_ops = {id(t.op) for t in states}
    rows = states[0].shape[0]
    for op in body:
        if not op.axis or op.shape[0] != rows:
            raise ValueError(
                f"scan {name!r}: {op.name} is computed row by row inside the scan, so its first "
                f"axis must have the state's {rows} rows, got shape {list(op.shape)}"
            )
        t_var = op.axis[0].var
        for b in op.bodies:
            for node in walk(b):
                if (
                    isinstance(node, Load)
                    and id(node.tensor.op) in state_ops
                    and not _earlier_row(node.indices[0], t_var)
                ):
                    raise ValueError(
                        f"scan {name!r}: {op.name} reads {node}; it may read the state only at earlier "
                        f"rows ({node.tensor.name}[{t_var.name} - 1, ...])"
                    )


def scan(
    init: Tensor | Sequence[Tensor],
    update: Tensor | Sequence[Tensor],
    state_placeholder: Tensor | Sequence[Tensor],
    inputs: Sequence[Tensor] | None = None,
    name: str = "scan",
    tag: str = "",
) -> Any:
    """The scan of ``update`` over the first axis from ``init`` (see the module docstring); lists
    of inits, updates and states (one each per state) give the list of outputs, as TVM.

    ``init`` has ``k >= 1`` rows; ``update`` and ``state_placeholder`` have the full shape; all
    three agree on every other dimension and on the dtype. The updates read the states only at
    earlier rows (``state[t - c, ...]``, ``c >= 1``), directly or through other computes;
    ``init`` does not read them.
    """
    inits = _as_list(init, "init", name)
    updates = _as_list(update, "update", name)
    states = _as_list(state_placeholder, "state_placeholder", name)
    if not len(inits) == len(updates) == len(states):
        raise ValueError(
            f"scan {name!r}: give one init and one update per state, got {len(inits)} inits, "
            f"{len(updates)} updates and {len(states)} states"
        )
    for i, u, st in zip(inits, updates, states, strict=True):
        _check_state(name, i, u, st, inits[0].shape[0])
    if len({st.shape[0] for st in states}) != 1:
        raise ValueError(
            f"scan {name!r}: every state must have the same rows, got {[st.shape for st in states]}"
        )
    state_ops = {id(st.op) for st in states}
    for i in inits:
        if any(id(t.op) in state_ops for t in i.op.input_tensors):
            raise ValueError(f"scan {name!r}: init must not read the state {i.name}")
    body = _body(name, updates, states)
    _check_reads(name, body, states)
    op = ScanOp(name, tuple(inits), tuple(updates), tuple(states), body, tuple(inputs or ()), tag)
    if isinstance(init, (list, tuple)):
        return [op.output(c) for c in range(op.num_outputs)]
    return op.output(0)
