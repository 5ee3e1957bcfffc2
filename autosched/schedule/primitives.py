"""The schedule primitives: one handler per step kind, which checks the step against a stage's
state and applies it. :meth:`Schedule.apply <autosched.schedule.Schedule.apply>` looks the
handler up in :data:`HANDLERS` by the step's type; every illegal request raises
:class:`~autosched.schedule.ScheduleError`. Handlers see the schedule as a
:class:`~.stage.ScheduleLike` (its stages, outputs, readers and ``insert_stage``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..expr import ComputeOp, Expr, ExternOp, Load, Reduce, ScanOp, rewrite
from . import steps as st
from .intrin import HANDLERS as INTRIN_HANDLERS
from .stage import (
    ANNOTATIONS,
    PRAGMAS,
    SCOPES,
    FuseRel,
    ScheduleError,
    ScheduleLike,
    SplitRel,
    Stage,
    thread_axis,
)
from .storage import HANDLERS as STORAGE_HANDLERS
from .transform import copy_op, make_cache_op, make_rfactor_ops, split_stage


def _leaf(stage: Stage, axis: str) -> int:
    if axis not in stage.leaves:
        if axis in stage.kinds:
            raise ScheduleError(f"axis {axis!r} is no longer a loop (it was split or fused)")
        raise ScheduleError(f"no axis {axis!r}; current loops: {stage.leaves}")
    return stage.leaves.index(axis)


def _compute_only(stage: Stage) -> ComputeOp:
    if isinstance(stage.op, ScanOp):
        raise ScheduleError(
            f"{stage.name} is a scan: a sequential loop over its first axis; schedule its init and "
            "update stages (s[init], s[update]) and the stages it reads instead"
        )
    if isinstance(stage.op, ExternOp):
        raise ScheduleError(
            f"{stage.name} is an extern stage: its C computes it as written, so it cannot be split, "
            "tiled, reordered, annotated or moved; schedule the stages it reads and the ones that read it"
        )
    if not isinstance(stage.op, ComputeOp):
        raise ScheduleError(f"{stage.name} is a placeholder; it has no loops to schedule")
    return stage.op


def scan_role(s: ScheduleLike, stage: Stage) -> tuple[str, str] | None:
    """(scan name, "init" | "update" | "body") when ``stage`` computes part of a scan, else None."""
    for other in s.stages.values():
        op = other.op
        if isinstance(op, ScanOp) and any(p is stage.op for p in op.parts):
            if any(t.op is stage.op for t in op.inits):
                return op.name, "init"
            return op.name, "update" if any(t.op is stage.op for t in op.updates) else "body"
    return None


def _not_in_scan(s: ScheduleLike, stage: Stage, what: str, roles: tuple[str, ...]) -> None:
    """Refuse ``what`` on a stage with one of these scan ``roles``."""
    role = scan_role(s, stage)
    if role is not None and role[1] in roles:
        raise ScheduleError(
            f"{stage.name} is the {role[1]} of scan {role[0]}, computed row by row in the scan's time "
            f"loop; {what} of it is not supported (split, reorder, fuse and annotations are)"
        )


def _split(s: ScheduleLike, stage: Stage, step: st.SplitStep) -> None:
    _compute_only(stage)
    pos = _leaf(stage, step.axis)
    if (step.factor is None) == (step.nparts is None):
        raise ScheduleError("give exactly one of factor and nparts")
    value = step.factor if step.factor is not None else step.nparts
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ScheduleError(f"split factor/nparts must be a positive int, got {value!r}")
    outer, inner = stage.leaves_after_split(step.axis)
    if outer in stage.kinds or inner in stage.kinds:
        raise ScheduleError(f"axis names {outer}/{inner} already exist")
    kind = stage.kinds[step.axis]
    stage.kinds[outer] = stage.kinds[inner] = kind
    stage.relations.append(SplitRel(step.axis, outer, inner, step.factor, step.nparts))
    stage.leaves[pos : pos + 1] = [outer, inner]
    stage.annotations.pop(step.axis, None)


def _reorder(s: ScheduleLike, stage: Stage, step: st.ReorderStep) -> None:
    _compute_only(stage)
    if len(set(step.order)) != len(step.order):
        raise ScheduleError(f"repeated axis in {list(step.order)}")
    positions = sorted(_leaf(stage, a) for a in step.order)
    for pos, name in zip(positions, step.order, strict=True):
        stage.leaves[pos] = name


def _fuse(s: ScheduleLike, stage: Stage, step: st.FuseStep) -> None:
    _compute_only(stage)
    if len(step.axes) < 2:
        raise ScheduleError("fuse needs at least two axes")
    positions = [_leaf(stage, a) for a in step.axes]
    if positions != list(range(positions[0], positions[0] + len(positions))):
        raise ScheduleError(f"axes {list(step.axes)} are not adjacent loops in order (loops: {stage.leaves})")
    kinds = {stage.kinds[a] for a in step.axes}
    if len(kinds) > 1:
        raise ScheduleError("cannot fuse a data-parallel axis with a reduction axis")
    kind = stage.kinds[step.axes[0]]
    current = step.axes[0]
    for nxt in step.axes[1:]:
        base = current[: -len(".fused")] if current.endswith(".fused") else current
        fused = f"{base}.{nxt}.fused"
        if fused in stage.kinds:
            raise ScheduleError(f"axis name {fused} already exists")
        stage.relations.append(FuseRel(current, nxt, fused))
        stage.kinds[fused] = kind
        current = fused
    stage.leaves[positions[0] : positions[-1] + 1] = [current]
    for a in step.axes:
        stage.annotations.pop(a, None)


def _annotate(s: ScheduleLike, stage: Stage, step: st.AnnotateStep) -> None:
    _compute_only(stage)
    _leaf(stage, step.axis)
    if step.annotation not in ANNOTATIONS:
        raise ScheduleError(f"unknown annotation {step.annotation!r}; known: {ANNOTATIONS}")
    if stage.kinds[step.axis] == "reduce" and step.annotation in ("vectorize", "parallel"):
        raise ScheduleError(
            f"cannot {step.annotation} reduction axis {step.axis!r}: iterations would race "
            "on the same output element (use rfactor first)"
        )
    old = stage.annotations.get(step.axis)
    if old is not None and old != step.annotation:
        raise ScheduleError(f"axis {step.axis!r} is already annotated {old!r}")
    stage.annotations[step.axis] = step.annotation


def _bind(s: ScheduleLike, stage: Stage, step: st.BindStep) -> None:
    _compute_only(stage)
    _leaf(stage, step.axis)
    thread_axis(step.thread)
    if stage.kinds[step.axis] == "reduce" and not step.thread.startswith("threadIdx"):
        raise ScheduleError(
            f"cannot bind reduction axis {step.axis!r} to {step.thread}: only to threadIdx.x/y/z "
            "(a reduction across the threads of a block)"
        )
    # several loops of a stage may be virtual threads (TVM's vthreads named vy, vx): each is a
    # loop of its own, injected on its own; a hardware index is one loop per stage
    if step.thread != "vthread" and step.thread in stage.annotations.values():
        raise ScheduleError(f"{step.thread} is already bound in this stage")
    stage.annotations[step.axis] = step.thread


def _pragma(s: ScheduleLike, stage: Stage, step: st.PragmaStep) -> None:
    _compute_only(stage)
    _leaf(stage, step.axis)
    if step.key not in PRAGMAS:
        raise ScheduleError(f"unknown pragma {step.key!r}; known: {PRAGMAS}")
    if step.value < 0:
        raise ScheduleError(f"pragma {step.key} needs a value >= 0, got {step.value}")
    stage.pragmas.setdefault(step.axis, {})[step.key] = step.value


def effective_readers(s: ScheduleLike, name: str) -> list[Stage]:
    """Stages that read ``name`` directly or through inlined stages."""
    out: list[Stage] = []
    for r in s.readers(name):
        for x in effective_readers(s, r.name) if r.attach == ("inline",) else [r]:
            if x not in out:
                out.append(x)
    return out


def _downstream(s: ScheduleLike, name: str) -> set[str]:
    seen: set[str] = set()
    todo = [name]
    while todo:
        for r in s.readers(todo.pop()):
            if r.name not in seen:
                seen.add(r.name)
                todo.append(r.name)
    return seen


def _compute_at(s: ScheduleLike, stage: Stage, step: st.ComputeAtStep) -> None:
    _compute_only(stage)
    _not_in_scan(s, stage, "compute_at", ("init", "update"))
    if stage.name in s.outputs:
        raise ScheduleError("an output stage cannot be computed at another stage")
    target = s.stages.get(step.target)
    if target is None:
        raise ScheduleError(f"no stage named {step.target!r}")
    _leaf(target, step.axis)
    if target.name not in _downstream(s, stage.name):
        raise ScheduleError(f"{step.target} does not consume {stage.name}; compute_at needs a consumer loop")
    role = scan_role(s, stage)
    if role is not None and (scan_role(s, target) or ("", ""))[0] != role[0]:
        raise ScheduleError(f"{stage.name} is in the body of scan {role[0]}: attach it to a stage of it")
    node = target
    while node.attach[0] == "at":
        if node.attach[1] == stage.name:
            raise ScheduleError("compute_at would create a cycle")
        node = s.stages[node.attach[1]]
    stage.attach = ("at", target.name, step.axis)


def _compute_inline(s: ScheduleLike, stage: Stage, step: st.ComputeInlineStep) -> None:
    op = _compute_only(stage)
    _not_in_scan(s, stage, "compute_inline", ("init", "update"))
    if stage.name in s.outputs:
        raise ScheduleError("an output stage cannot be inlined")
    if isinstance(op.body, Reduce):
        raise ScheduleError("a reduction cannot be inlined")
    if any(t.attach[:2] == ("at", stage.name) for t in s.stages.values()):
        raise ScheduleError("other stages are computed at this one; it cannot be inlined")
    stage.attach = ("inline",)


def _compute_root(s: ScheduleLike, stage: Stage, step: st.ComputeRootStep) -> None:
    _compute_only(stage)
    stage.attach = ("root",)


def _cache_write(s: ScheduleLike, stage: Stage, step: st.CacheWriteStep) -> None:
    op = _compute_only(stage)
    _not_in_scan(s, stage, "cache_write", ("init", "update", "body"))
    if step.scope not in SCOPES:
        raise ScheduleError(f"unknown scope {step.scope!r}; known: {SCOPES}")
    if stage.relations or stage.annotations:
        raise ScheduleError("cache_write must come before split/fuse/annotate of the stage")
    if stage.attach == ("inline",):
        raise ScheduleError("cannot cache_write an inlined stage")
    cache_op, new_op = make_cache_op(op, f"{op.name}.{step.scope}")
    s.insert_stage(cache_op, before=stage.name, scope=step.scope)
    stage.reset(new_op)


def _cache_read(s: ScheduleLike, stage: Stage, step: st.CacheReadStep) -> None:
    if step.scope not in SCOPES:
        raise ScheduleError(f"unknown scope {step.scope!r}; known: {SCOPES}")
    if not step.readers:
        raise ScheduleError("give at least one reader")
    if isinstance(stage.op, ScanOp) or (isinstance(stage.op, ExternOp) and stage.op.num_outputs != 1):
        raise ScheduleError("cache_read of a scan or of an extern stage of several outputs is not supported")
    _not_in_scan(s, stage, "cache_read", ("init", "update", "body"))
    readers = []
    for r in step.readers:
        reader = s.stages.get(r)
        if reader is None or not isinstance(reader.op, ComputeOp):
            raise ScheduleError(f"reader {r!r} is not a compute stage of this schedule")
        if not any(t.op.name == stage.name for t in reader.op.input_tensors):
            raise ScheduleError(f"stage {r} does not read {stage.name}")
        _not_in_scan(s, reader, "cache_read for a reader", ("init", "update", "body"))
        readers.append(reader)
    cache = copy_op(stage.op, f"{stage.name}.{step.scope}")
    first = min(list(s.stages).index(r.name) for r in readers)
    s.insert_stage(cache, before=list(s.stages)[first], scope=step.scope)
    for reader in readers:
        old = reader.op
        assert isinstance(old, ComputeOp)
        body = _reading(old.body, stage.name, cache)
        others = tuple(_reading(b, stage.name, cache) for b in old.others)
        reader.op = ComputeOp(old.name, old.axis, body, old.tag, old.attrs, others)


def _reading(e: Expr, src: str, dst: ComputeOp) -> Expr:
    """``e`` with its reads of the operation named ``src`` made reads of ``dst``."""

    def swap(n: Expr) -> Expr | None:
        if isinstance(n, Load) and n.tensor.op.name == src:
            return Load(dst.output(n.tensor.value_index), tuple(_reading(i, src, dst) for i in n.indices))
        return None

    return rewrite(e, swap)


def _rfactor(s: ScheduleLike, stage: Stage, step: st.RfactorStep) -> None:
    op = _compute_only(stage)
    _not_in_scan(s, stage, "rfactor", ("init", "update", "body"))
    if stage.kinds.get(step.axis) != "reduce":
        raise ScheduleError(f"{step.axis!r} is not a reduction axis of {stage.name}")
    _leaf(stage, step.axis)
    if not 0 <= step.factor_axis <= len(op.axis):
        raise ScheduleError(f"factor_axis must be in [0, {len(op.axis)}], got {step.factor_axis}")
    split = next(
        (r for r in stage.relations if isinstance(r, SplitRel) and step.axis in (r.outer, r.inner)), None
    )
    if split is not None and any(
        isinstance(r, SplitRel) and r.parent == split.parent and r is not split for r in stage.relations
    ):
        raise ScheduleError("rfactor supports an axis from at most one split of a root reduction axis")
    if split is not None and split.parent not in {iv.name for iv in op.reduce_axis}:
        raise ScheduleError("rfactor supports an axis from at most one split of a root reduction axis")
    split_stage(s, stage, lambda: make_rfactor_ops(op, step.axis, split, step.factor_axis))


HANDLERS: dict[type, Callable[[ScheduleLike, Stage, Any], None]] = {
    st.SplitStep: _split,
    st.ReorderStep: _reorder,
    st.FuseStep: _fuse,
    st.AnnotateStep: _annotate,
    st.BindStep: _bind,
    st.PragmaStep: _pragma,
    st.ComputeAtStep: _compute_at,
    st.ComputeInlineStep: _compute_inline,
    st.ComputeRootStep: _compute_root,
    st.CacheWriteStep: _cache_write,
    st.CacheReadStep: _cache_read,
    st.RfactorStep: _rfactor,
}
HANDLERS.update(STORAGE_HANDLERS)
HANDLERS.update(INTRIN_HANDLERS)
