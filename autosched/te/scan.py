"""``scan``: a recurrence over the first axis, as te's ``scan`` (cumulative sums, recurrences).

``scan(init, update, state)`` is a tensor of ``state``'s shape: its rows ``[0, init.shape[0])``
are ``init``'s and each later row ``t`` is ``update``'s row ``t``, where ``update`` reads earlier
rows through the placeholder ``state`` (``state[t - 1, i]``). It is computed as a sequential loop
over ``t``.
"""

from __future__ import annotations

from collections.abc import Sequence

from .nodes import BinOp, Const, Load, Var
from .tensor import ComputeOp, PlaceholderOp, ScanOp, Tensor
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


def scan(
    init: Tensor,
    update: Tensor,
    state_placeholder: Tensor,
    inputs: Sequence[Tensor] | None = None,
    name: str = "scan",
    tag: str = "",
) -> Tensor:
    """The scan of ``update`` over the first axis from ``init`` (see the module docstring).

    ``init`` has ``k >= 1`` rows; ``update`` and ``state_placeholder`` have the full shape; all
    three agree on every other dimension and on the dtype. ``update`` reads the state only at
    earlier rows (``state[t - c, ...]``, ``c >= 1``); ``init`` does not read it.
    """
    for what, t in (("init", init), ("update", update), ("state_placeholder", state_placeholder)):
        if not isinstance(t, Tensor):
            raise TypeError(f"scan {name!r}: {what} must be a tensor, got {type(t).__name__}")
    if not isinstance(state_placeholder.op, PlaceholderOp):
        raise ValueError(f"scan {name!r}: the state must be a placeholder, got {state_placeholder.name}")
    for what, t in (("init", init), ("update", update)):
        if not isinstance(t.op, ComputeOp) or t.op.num_outputs != 1 or t.op.reduce_axis:
            raise ValueError(f"scan {name!r}: {what} must be a compute of one output without a reduction")
    si, su, ss = init.shape, update.shape, state_placeholder.shape
    problems = []
    if not (len(si) == len(su) == len(ss)):
        problems.append("they differ in rank")
    else:
        if si[1:] != ss[1:] or su[1:] != ss[1:]:
            problems.append("they differ beyond the first (scan) axis")
        if su[0] != ss[0]:
            problems.append("update must have as many rows as the state")
        if si[0] > ss[0]:
            problems.append("init has more rows than the state")
    if len({init.dtype, update.dtype, state_placeholder.dtype}) != 1:
        problems.append(f"dtypes differ ({init.dtype}, {update.dtype}, {state_placeholder.dtype})")
    if problems:
        raise ValueError(
            f"scan {name!r}: shapes init {list(si)}, update {list(su)}, state {list(ss)} disagree: "
            + "; ".join(problems)
        )
    state_op = state_placeholder.op
    if any(t.op is state_op for t in init.op.input_tensors):
        raise ValueError(f"scan {name!r}: init must not read the state {state_placeholder.name}")
    assert isinstance(update.op, ComputeOp)
    t_var = update.op.axis[0].var
    for node in walk(update.op.body):
        if isinstance(node, Load) and node.tensor.op is state_op and not _earlier_row(node.indices[0], t_var):
            raise ValueError(
                f"scan {name!r}: update reads {node}; it may read the state only at earlier rows "
                f"({state_placeholder.name}[{t_var.name} - 1, ...])"
            )
    return Tensor(ScanOp(name, init, update, state_placeholder, tuple(inputs or ()), tag))
