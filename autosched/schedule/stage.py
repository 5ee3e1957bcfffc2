"""Stages: the scheduling state of one operation (``s[T]``), with TVM ``te``-style primitives.

A stage's primitives (``s[C].split(...)``, ``tile``, ``compute_at``, ...) build a
:mod:`~autosched.schedule.steps` record and hand it to the stage's schedule, which checks it,
applies it (the handlers are in :mod:`~autosched.schedule.primitives`) and records it. This module
holds the data those handlers change (loop relations, leaves, annotations, attachment), the names
they accept, and :class:`ScheduleError`. It knows its schedule only through :class:`ScheduleLike`.
"""

from __future__ import annotations

import json
import operator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

from ..diagnostics import printable
from ..expr import ComputeOp, Expr, IterVar, Operation, PlaceholderOp, Var, as_expr, substitute
from ..te.intrin import INTRINS, TensorIntrin
from ..te.serial import expr_to_json
from . import steps as st

ANNOTATIONS = ("vectorize", "unroll", "parallel")
THREAD_TAGS = (
    "blockIdx.x",
    "blockIdx.y",
    "blockIdx.z",
    "threadIdx.x",
    "threadIdx.y",
    "threadIdx.z",
    "vthread",
)
PRAGMAS = ("auto_unroll_max_step",)
SCOPES = ("global", "shared", "local")


class ScheduleError(ValueError):
    """An illegal schedule request; the message names the step and the reason."""


@dataclass(frozen=True, slots=True)
class SplitRel:
    parent: str
    outer: str
    inner: str
    factor: int | None
    nparts: int | None


@dataclass(frozen=True, slots=True)
class FuseRel:
    outer: str
    inner: str
    fused: str


Relation = SplitRel | FuseRel


class ScheduleLike(Protocol):
    """What stages and step handlers use of their schedule (:class:`~.schedule.Schedule` is one)."""

    outputs: tuple[str, ...]
    stages: dict[str, Stage]

    def apply(self, step: st.Step) -> None: ...

    def transaction(self, only: str | None = None) -> AbstractContextManager[None]: ...

    def insert_stage(self, op: Operation, before: str, scope: str = "global") -> Stage: ...

    def readers(self, name: str) -> list[Stage]: ...


@dataclass(slots=True)
class Stage:
    """The mutable scheduling state of one operation (what ``s[T]`` returns)."""

    schedule: ScheduleLike
    op: Operation
    kinds: dict[str, str] = field(default_factory=dict)  # axis name -> "data" | "reduce"
    relations: list[Relation] = field(default_factory=list)
    leaves: list[str] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)  # leaf -> annotation or thread tag
    pragmas: dict[str, dict[str, int]] = field(default_factory=dict)
    attach: tuple[str, ...] = ("root",)  # ("root",) | ("inline",) | ("at", stage, axis)
    scope: str = "global"
    store_predicate: Expr | None = None  # set_store_predicate: stores happen where it holds
    aligns: dict[str, tuple[int, int]] = field(default_factory=dict)  # storage_align: axis -> (factor, off)
    tensorized: dict[str, TensorIntrin] = field(default_factory=dict)  # tensorize: leaf -> intrinsic
    thread_vars: dict[Var, Expr] = field(default_factory=dict)  # a named thread axis's var -> its tag

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def is_placeholder(self) -> bool:
        return isinstance(self.op, PlaceholderOp)

    def snapshot(self) -> tuple:
        """A copy of the mutable state (see :meth:`ScheduleLike.transaction`)."""
        pragmas = {k: dict(v) for k, v in self.pragmas.items()}
        return (
            self.op,
            dict(self.kinds),
            list(self.relations),
            list(self.leaves),
            dict(self.annotations),
            pragmas,
            self.attach,
            self.scope,
            self.store_predicate,
            dict(self.aligns),
            dict(self.tensorized),
        )

    def restore(self, state: tuple) -> None:
        """Go back to a :meth:`snapshot`."""
        (
            self.op,
            self.kinds,
            self.relations,
            self.leaves,
            self.annotations,
            self.pragmas,
            self.attach,
            self.scope,
            self.store_predicate,
            self.aligns,
            self.tensorized,
        ) = state

    def reset(self, op: Operation) -> None:
        """Start over with ``op``: root axes as leaves, no relations or annotations."""
        self.op = op
        self.relations.clear()
        self.annotations.clear()
        self.pragmas.clear()
        self.tensorized.clear()
        if isinstance(op, ComputeOp):
            self.kinds = {iv.name: "data" for iv in op.axis} | {iv.name: "reduce" for iv in op.reduce_axis}
        else:
            self.kinds = {}
        self.leaves = list(self.kinds)

    # -- te-style primitives: each records a step
    def split(
        self, axis: IterVar | str, factor: int | None = None, nparts: int | None = None
    ) -> tuple[IterVar, IterVar]:
        """Split ``axis`` into (outer, inner) by an inner ``factor`` or a number of outer ``nparts``."""
        pos = self.leaves.index(axis_name(axis)) if axis_name(axis) in self.leaves else 0
        self.schedule.apply(st.SplitStep(self.name, axis_name(axis), factor, nparts))
        outer, inner = self._iv(self.leaves[pos : pos + 2])
        return outer, inner

    def tile(self, x: IterVar | str, y: IterVar | str, x_factor: int, y_factor: int) -> tuple[IterVar, ...]:
        """Split ``x`` and ``y`` and reorder to (xo, yo, xi, yi), as te's tile (all or nothing)."""
        with self.schedule.transaction():
            xo, xi = self.split(x, x_factor)
            yo, yi = self.split(y, y_factor)
            self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def reorder(self, *axes: IterVar | str) -> None:
        """Put the given leaf loops in this relative order (the others keep their places)."""
        self.schedule.apply(st.ReorderStep(self.name, tuple(axis_name(a) for a in axes)))

    def fuse(self, *axes: IterVar | str) -> IterVar:
        """Fuse adjacent leaf loops (outer first) into one."""
        first = axis_name(axes[0]) if axes else ""
        pos = self.leaves.index(first) if first in self.leaves else 0
        self.schedule.apply(st.FuseStep(self.name, tuple(axis_name(a) for a in axes)))
        return self._iv([self.leaves[pos]])[0]

    def vectorize(self, axis: IterVar | str) -> None:
        """Emit this loop as vector instructions."""
        self.schedule.apply(st.AnnotateStep(self.name, axis_name(axis), "vectorize"))

    def unroll(self, axis: IterVar | str) -> None:
        """Unroll this loop."""
        self.schedule.apply(st.AnnotateStep(self.name, axis_name(axis), "unroll"))

    def parallel(self, axis: IterVar | str) -> None:
        """Run this loop's iterations on parallel threads."""
        self.schedule.apply(st.AnnotateStep(self.name, axis_name(axis), "parallel"))

    def bind(self, axis: IterVar | str, thread: IterVar | str) -> None:
        """Bind a loop to a GPU thread axis (``thread_axis("threadIdx.x")``) for ``opencl`` and
        ``cuda`` targets; CPU builds reject it."""
        tag = thread.tag if isinstance(thread, ThreadAxis) else axis_name(thread)
        self.schedule.apply(st.BindStep(self.name, axis_name(axis), tag))
        if isinstance(thread, ThreadAxis) and thread.var.name != tag:
            self.thread_vars[thread.var] = Var(tag)  # thread_axis(..., name="tx"): tx.var is the tag

    def set_store_predicate(self, predicate: Expr) -> None:
        """Store this stage's values only where ``predicate`` (over its axes and loops) holds."""
        try:
            text = json.dumps(expr_to_json(substitute(as_expr(predicate), self.thread_vars)))
        except ValueError as err:
            raise ScheduleError(f"set_store_predicate on stage {self.name}: {err}") from None
        self.schedule.apply(st.StorePredicateStep(self.name, text))

    def storage_align(self, axis: IterVar | str, factor: int, offset: int) -> None:
        """Pad the row stride of root axis ``axis`` in this stage's allocated buffer to
        ``k * factor + offset`` elements (an argument's buffer keeps the caller's layout)."""
        self.schedule.apply(st.StorageAlignStep(self.name, axis_name(axis), int(factor), int(offset)))

    def pragma(self, axis: IterVar | str, key: str, value: int) -> None:
        """Attach a pragma; ``auto_unroll_max_step`` unrolls inner loops up to that many iterations."""
        if key == "import_llvm":
            raise ScheduleError(
                "pragma 'import_llvm': there is no LLVM here; put the C of a tensor intrinsic in its "
                "implementation (fcompute's C body, or asc.intrin.CImpl(preamble=...) for file-scope C)"
            )
        if key not in PRAGMAS:
            raise ScheduleError(f"unknown pragma {key!r}; known: {', '.join(PRAGMAS)}")
        try:
            number = operator.index(value)
        except TypeError:
            raise ScheduleError(f"pragma {key} takes an integer, got {printable(repr(value), 60)}") from None
        self.schedule.apply(st.PragmaStep(self.name, axis_name(axis), key, number))

    def tensorize(self, axis: IterVar | str, intrin: TensorIntrin) -> None:
        """Replace loop ``axis`` and the loops inside it by a call of ``intrin`` (checked against
        the region when the schedule is lowered)."""
        INTRINS[intrin.name] = intrin  # the step names it: the name refers to this declaration
        self.schedule.apply(st.TensorizeStep(self.name, axis_name(axis), intrin.name))

    def compute_at(self, parent: Stage, axis: IterVar | str) -> None:
        """Compute this stage inside loop ``axis`` of ``parent``, only the region it needs."""
        self.schedule.apply(st.ComputeAtStep(self.name, parent.name, axis_name(axis)))

    def compute_inline(self) -> None:
        """Substitute this stage's expression into its consumers."""
        self.schedule.apply(st.ComputeInlineStep(self.name))

    def compute_root(self) -> None:
        """Compute this stage at the top level, whole (the default)."""
        self.schedule.apply(st.ComputeRootStep(self.name))

    # -- helpers
    def leaves_after_split(self, axis: str) -> list[str]:
        return [f"{axis}.outer", f"{axis}.inner"]

    def _iv(self, names: list[str]) -> tuple[IterVar, ...]:
        return tuple(IterVar(Var(n), 0, self.kinds[n]) for n in names)

    def leaf_itervars(self) -> tuple[IterVar, ...]:
        """The current loops, outermost first (extents are resolved at lowering)."""
        return self._iv(self.leaves)


def axis_name(axis: IterVar | Var | str) -> str:
    if isinstance(axis, str):
        return axis
    if isinstance(axis, (IterVar, Var)):
        return axis.name
    raise TypeError(f"expected an axis (IterVar or name), got {type(axis).__name__}")


@dataclass(frozen=True, slots=True)
class ThreadAxis(IterVar):
    """A GPU thread axis (what ``thread_axis`` returns): an IterVar with its thread ``tag``."""

    tag: str = ""


def thread_axis(
    dom: int | tuple[int, int] | str | None = None, tag: str = "", name: str = ""
) -> ThreadAxis:
    """A GPU thread axis for ``bind``, as te's: ``thread_axis("threadIdx.x")`` or
    ``thread_axis((0, n), "threadIdx.x", name="tx")``; ``.var`` is its variable."""
    if isinstance(dom, str) and not tag:
        tag, dom = dom, None
    if tag not in THREAD_TAGS:
        raise ScheduleError(f"thread_axis: unknown tag {tag!r}; known: {', '.join(THREAD_TAGS)}")
    if dom is None or isinstance(dom, str):
        extent = 0
    elif isinstance(dom, (tuple, list)):
        begin, end = (int(x) for x in dom)
        if begin != 0 or end <= 0:
            raise ScheduleError(f"thread_axis: the range must be (0, n) with n > 0, got {tuple(dom)}")
        extent = end
    else:
        extent = int(dom)
    return ThreadAxis(Var(name or tag), extent, "thread", 0, tag)
