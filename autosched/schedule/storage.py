"""Handlers of the storage primitives: ``set_store_predicate`` and ``storage_align``.

A store predicate is recorded as the JSON text of its expression (steps come from logs, which are
untrusted: the text is parsed and checked here, never evaluated); it may use the stage's root axes
and its loops by name, and the variable of a thread axis bound to one of its loops (TVM's
``set_store_predicate(tx.var.equal(0))``), which stands for that loop.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..expr import ComputeOp, Var, substitute, walk
from ..te.serial import expr_from_json
from . import steps as st
from .stage import THREAD_TAGS, ScheduleError, ScheduleLike, Stage

MAX_PREDICATE_CHARS = 20_000


def _store_predicate(s: ScheduleLike, stage: Stage, step: st.StorePredicateStep) -> None:
    if not isinstance(stage.op, ComputeOp):
        raise ScheduleError(f"{stage.name} has no stores to guard")
    if len(step.predicate) > MAX_PREDICATE_CHARS:
        raise ScheduleError("store predicate text is too long")
    try:
        cond = expr_from_json(json.loads(step.predicate))
    except (ValueError, TypeError, RecursionError) as err:
        raise ScheduleError(f"malformed store predicate: {err}") from None
    if cond.dtype != "bool":
        raise ScheduleError(f"a store predicate must be a condition, got a {cond.dtype} expression")
    bound = {tag: leaf for leaf, tag in stage.annotations.items() if tag in THREAD_TAGS}
    if bound:  # a thread axis's variable (``tx.var``) stands for the loop bound to it
        cond = substitute(cond, {Var(tag): Var(leaf) for tag, leaf in bound.items()})
    known = set(stage.kinds)
    unknown = sorted({v.name for v in walk(cond) if isinstance(v, Var)} - known)
    if unknown:
        raise ScheduleError(f"store predicate uses {unknown}, which are not axes of {stage.name}")
    stage.store_predicate = cond


def _storage_align(s: ScheduleLike, stage: Stage, step: st.StorageAlignStep) -> None:
    if not isinstance(stage.op, ComputeOp):
        raise ScheduleError(f"{stage.name} is not a computed tensor; only intermediates are allocated")
    names = [iv.name for iv in stage.op.axis]
    if step.axis not in names:
        raise ScheduleError(
            f"storage_align needs a root data axis of {stage.name} ({names}), not {step.axis!r}"
        )
    if step.factor <= 0 or not 0 <= step.offset < step.factor:
        raise ScheduleError(
            f"storage_align needs factor > 0 and 0 <= offset < factor, got {step.factor}, {step.offset}"
        )
    stage.aligns[step.axis] = (step.factor, step.offset)


HANDLERS: dict[type, Callable[[ScheduleLike, Stage, Any], None]] = {
    st.StorePredicateStep: _store_predicate,
    st.StorageAlignStep: _storage_align,
}
