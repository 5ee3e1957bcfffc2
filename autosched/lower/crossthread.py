"""Cross-thread reduction: a reduction loop bound to ``threadIdx.*`` (TVM's ``rfactor`` + ``bind``
pattern of its softmax and reduction GPU schedules) becomes an allreduce over the threads of a block.

Each thread accumulates its own part of the reduction in a one-element ``local`` accumulator
(the loops of the reduction, the thread-bound one included, run as usual around it), writes it to
its slot of a ``shared`` buffer as large as the block, and a tree halves the live slots per step
(``slot[t] = slot[t] op slot[t + s]`` for ``t < s``, ``s`` from the next power of two down to 1,
so any extent works, dividing or not). Thread 0 of the reduction stores the result. The barriers
between the steps are inserted by :mod:`autosched.lower.gpu` like any other (every step writes
and reads the shared buffer), and guards around them are moved inside so that every thread of the
block reaches every barrier.

Only ``sum``, ``max`` and ``min`` with one output reduce across threads; the stage's data loops
must be outside its reduction loops (each thread holds one accumulator).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..expr import BinOp, Const, Expr, Extent, Reduce, Var, compare, substitute, walk
from ..schedule import ScheduleError, Stage
from ..schedule.transform import reduce_identity
from .ir import Allocate, Buffer, BufLoad, For, IfThenElse, Stmt, Store, seq
from .loops import Leaf
from .reduction import COMBINE
from .simplify import conjoin

if TYPE_CHECKING:  # annotations only: the lowerer calls this module
    from .lowering import Lowerer, StageContext


def thread_reduce_leaf(leaves: tuple[Leaf, ...]) -> int | None:
    """The position of the reduction loop bound to a ``threadIdx`` axis (None: there is none)."""
    found = [p for p, lf in enumerate(leaves) if lf.axis_kind == "reduce" and _is_thread(lf.thread)]
    if len(found) > 1:
        names = ", ".join(leaves[p].name for p in found)
        raise ScheduleError(f"reduction loops {names} are all bound to threads: bind at most one")
    return found[0] if found else None


def _is_thread(tag: str | None) -> bool:
    return tag is not None and tag.startswith("threadIdx")


def lower_cross_thread(
    lw: Lowerer,
    stage: Stage,
    ctx: StageContext,
    body: Reduce,
    targets: list[tuple[Buffer, Expr]],
    extras: dict[int, list[Stmt]],
) -> Stmt:
    """The stage's loops with its reduction reduced across the threads of a block."""
    leaves = ctx.nest.leaves
    t = thread_reduce_leaf(leaves)
    assert t is not None, "a stage with a thread-bound reduction loop"
    tx = leaves[t]
    where = f"cross-thread reduction of {stage.name} over {tx.name} ({tx.thread})"
    if not isinstance(body.combiner, str) or len(targets) != 1:
        raise ScheduleError(
            f"{where}: only sum, max and min reductions with one output reduce across threads"
        )
    r0 = next(p for p, lf in enumerate(leaves) if lf.axis_kind == "reduce")
    inner_data = [lf.name for lf in leaves[r0:] if lf.axis_kind == "data"]
    if inner_data:
        raise ScheduleError(
            f"{where}: data loop {inner_data[0]} is inside a reduction loop; reorder the reduction "
            "loops innermost"
        )
    n = tx.extent
    if not isinstance(n, int):
        raise ScheduleError(f"{where}: the thread-bound loop has a symbolic extent")
    (target, index), dtype = targets[0], targets[0][0].dtype
    others = _block_threads(lw, stage, leaves[:r0], tx)
    size = n
    for _, ext in others:
        size *= ext
    acc = Buffer(f"{stage.name}.acc", (1,), dtype, "local")
    red = Buffer(f"{stage.name}.red_buf", (size,), dtype, "shared")
    placed = lw.place([c for c in ctx.preds if c is not ctx.store_pred], leaves)
    update = lw.reduction_update(stage, body, [(acc, Const(0))])
    nest = lw.build(
        leaves[r0:],
        update,
        {p - r0: x for p, x in extras.items() if p >= r0},
        {p - r0: c for p, c in placed.items() if p >= r0},
    )
    (identity,) = reduce_identity(body.combiner, [dtype])
    steps: list[Stmt] = [Allocate(acc), Allocate(red), Store(acc, Const(0), identity), nest]
    own = BufLoad(acc, Const(0))
    steps.append(_on_threads(tx, "write", lambda v: Store(red, _slot(v, n, others), own)))
    half = 1
    while half < n:
        half *= 2
    while half > 1:
        half //= 2
        steps.append(_on_threads(tx, f"step{half}", _tree_step(red, body.combiner, half, n, others)))
    store_pred = _final_predicate(ctx.store_pred, tx, leaves, where)

    def final(v: Var) -> Stmt:
        conds = [compare("eq", v, 0)] + ([] if store_pred is None else [substitute(store_pred, {tx.var: v})])
        return IfThenElse(conjoin(conds), Store(target, index, BufLoad(red, _slot(v, n, others))))

    steps.append(_on_threads(tx, "store", final))
    body_stmt = seq(steps)
    if r0 == 0 and stage.attach == ("root",):  # a scalar result: one block, so one kernel
        body_stmt = For(Var(f"{stage.name}.block"), 0, 1, "thread", body_stmt, "blockIdx.x")
    outer_extras = {p: x for p, x in extras.items() if p < r0}
    outer_preds = {p: c for p, c in placed.items() if p < r0}
    return lw.build(leaves[:r0], body_stmt, outer_extras, outer_preds)


def _block_threads(lw: Lowerer, stage: Stage, outer: tuple[Leaf, ...], tx: Leaf) -> list[tuple[Var, int]]:
    """The other threadIdx-bound loops around the reduction (this stage's, and those of the stages
    it is computed in): each thread of the block gets its own slot of the shared buffer."""
    found: dict[Var, Extent] = {lf.var: lf.extent for lf in outer if _is_thread(lf.thread)}
    if stage.attach[0] == "at":
        parent = lw.s.stages[stage.attach[1]]
        pos = [lf.name for lf in lw.context(parent).nest.leaves].index(stage.attach[2])
        found |= lw.enclosing_threads(parent.name, pos)
    out: list[tuple[Var, int]] = []
    for v, ext in found.items():
        if not isinstance(ext, int):
            raise ScheduleError(f"loop {v.name} is bound to a thread with a symbolic extent")
        if ext > 1:
            out.append((v, ext))
    return out


def _slot(v: Expr, n: int, others: list[tuple[Var, int]]) -> Expr:
    """The thread's slot in the shared buffer: its index in the reduction, then the other threads."""
    index, stride = v, n
    for w, ext in others:
        index = BinOp("add", index, BinOp("mul", w, Const(stride), "int32"), "int32")
        stride *= ext
    return index


def _tree_step(
    red: Buffer, combiner: str, half: int, n: int, others: list[tuple[Var, int]]
) -> Callable[[Var], Stmt]:
    """Thread ``v``'s part of one tree step: ``slot[v] = slot[v] op slot[v + half]`` for the
    threads below ``half`` whose partner exists."""

    def make(v: Var) -> Stmt:
        slot = _slot(v, n, others)
        partner = BinOp("add", slot, Const(half), "int32")
        value = BinOp(COMBINE[combiner], BufLoad(red, slot), BufLoad(red, partner), red.dtype)
        live = conjoin([compare("lt", v, half), compare("lt", BinOp("add", v, Const(half), "int32"), n)])
        return IfThenElse(live, Store(red, slot, value))

    return make


def _on_threads(tx: Leaf, part: str, make: Callable[[Var], Stmt]) -> Stmt:
    """``make(v)`` inside a loop bound to the reduction's thread axis, on a fresh variable ``v``."""
    v = Var(f"{tx.var.name}.{part}")
    return For(v, 0, tx.extent, "thread", make(v), tx.thread)


def _final_predicate(pred: Expr | None, tx: Leaf, leaves: tuple[Leaf, ...], where: str) -> Expr | None:
    """The stage's store predicate, which guards the final store (thread 0 stores anyway): it may
    read the data loops and the thread-bound reduction loop, not the serial reduction loops."""
    if pred is None:
        return None
    used = {x for x in walk(pred) if isinstance(x, Var)}
    lost = [lf.name for lf in leaves if lf.axis_kind == "reduce" and lf.var != tx.var and lf.var in used]
    if lost:
        raise ScheduleError(
            f"{where}: the store predicate reads reduction loop {lost[0]}, done before the store"
        )
    return pred
