"""The handlers of ``dot_layout`` (an operand laid out for the dot-product intrinsics, see
:mod:`.dot_layout`) and ``tensorize``: mark a stage's loop as the outermost loop of a region that a tensor
intrinsic computes. The region itself is checked against the intrinsic's compute when the schedule
is lowered (:mod:`autosched.lower.tensorize`), where its loops' extents are known.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..expr import ComputeOp
from ..te.intrin import lookup_intrin
from . import steps as st
from .dot_layout import make_dot_layout_ops
from .stage import ScheduleError, ScheduleLike, Stage
from .transform import split_stage


def _tensorize(s: ScheduleLike, stage: Stage, step: st.TensorizeStep) -> None:
    if not isinstance(stage.op, ComputeOp):
        raise ScheduleError(f"{stage.name} is not a compute stage; only computes can be tensorized")
    if stage.op.num_outputs != 1:
        raise ScheduleError(f"{stage.name} has {stage.op.num_outputs} outputs; tensorize needs one")
    if step.axis not in stage.leaves:
        raise ScheduleError(f"no loop {step.axis!r}; current loops: {stage.leaves}")
    intrin = lookup_intrin(step.intrin)
    if intrin is None:
        raise ScheduleError(f"no tensor intrinsic named {step.intrin!r} is declared (decl_tensor_intrin)")
    if stage.tensorized:
        raise ScheduleError(f"{stage.name} is already tensorized at {next(iter(stage.tensorized))!r}")
    stage.tensorized[step.axis] = intrin


def _dot_layout(s: ScheduleLike, stage: Stage, step: st.DotLayoutStep) -> None:
    if not isinstance(stage.op, ComputeOp):
        raise ScheduleError(f"{stage.name} is not a compute stage")
    if stage.relations or stage.annotations or stage.tensorized:
        raise ScheduleError("dot_layout must come before the stage's loops are changed")
    if step.group not in (1, 2, 4) or step.lanes not in (4, 8, 16, 32):
        raise ScheduleError(
            f"dot_layout: group must be 1, 2 or 4 and lanes 4, 8, 16 or 32, got {step.group}, {step.lanes}"
        )
    op = stage.op
    split_stage(s, stage, lambda: make_dot_layout_ops(op, step.group, step.lanes))


HANDLERS: dict[type, Callable[[ScheduleLike, Stage, Any], None]] = {
    st.TensorizeStep: _tensorize,
    st.DotLayoutStep: _dot_layout,
}
