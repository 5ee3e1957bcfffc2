"""Schedule -> loop-nest IR: inlining, bound inference for compute_at, loop nests, guards."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..expr import (
    BinOp,
    ComputeOp,
    Const,
    Expr,
    Extent,
    Load,
    Reduce,
    Tensor,
    Var,
    as_expr,
    compare,
    dag_shape_vars,
    rewrite,
    shape_vars,
    substitute,
    walk,
)
from ..schedule import Schedule, ScheduleError, Stage
from ..schedule.transform import identity_value
from .bounds import infer_region
from .ir import Allocate, Buffer, BufLoad, For, IfThenElse, PrimFunc, Stmt, Store, map_children, seq
from .loops import Leaf, LoopNest, build_loop_nest
from .simplify import FALSE, INF, TRUE, Ranges, combine, conjoin, simplify, span

COMBINE = {"sum": "add", "max": "max", "min": "min"}


@dataclass(frozen=True, slots=True)
class StageContext:
    """Where a stage runs: its region (bases, extents), loops, and guarded expression."""

    nest: LoopNest
    bases: list[Expr]
    region: list[Extent]
    body: Expr
    preds: list[Expr]


class Lowerer:
    """Lowers one schedule with its argument list into a :class:`PrimFunc`."""

    def __init__(self, sched: Schedule, args: Sequence[Tensor], name: str = "default_function") -> None:
        self.s = sched
        self.name = name
        self.ranges: Ranges = {}
        self.buffers: dict[str, Buffer] = {}
        self.bases: dict[str, list[Expr]] = {}
        self._bodies: dict[str, Expr] = {}
        self._contexts: dict[str, StageContext] = {}
        self._readers: dict[str, list[Stage]] | None = None
        names = [t.name for t in args]
        if len(set(names)) != len(names):
            raise ValueError(f"argument names repeat: {names}")
        for t in args:
            if t.name not in sched.stages:
                raise ValueError(f"argument {t.name!r} is not a tensor of this schedule")
            stage = sched.stages[t.name]
            if stage.attach != ("root",):
                raise ScheduleError(
                    f"argument {t.name} is {stage.attach[0]}-scheduled; arguments must be root stages"
                )
            self.buffers[t.name] = Buffer(t.name, tuple(t.shape), t.dtype, "global", is_arg=True)
            self.bases[t.name] = [Const(0)] * len(t.shape)
        self.args = tuple(self.buffers[n] for n in names)
        self.sizes = tuple(shape_vars(list(args)))
        missing = [v.name for v in dag_shape_vars(list(sched.source_outputs)) if v not in self.sizes]
        if missing:
            raise ValueError(
                f"shape variables {missing} appear in no argument's shape: a kernel takes its sizes "
                "from its arrays, so each must be a dimension of an argument"
            )
        for v in self.sizes:
            self.ranges[v] = (0, INF)
        for out in sched.outputs:
            if out not in self.buffers:
                raise ValueError(f"output {out!r} must be among the arguments")

    def run(self) -> PrimFunc:
        body: list[Stmt] = []
        for stage in self.s.stages.values():
            if stage.is_placeholder:
                if stage.name not in self.buffers and self.readers(stage.name):
                    raise ValueError(f"input {stage.name!r} is read but not among the arguments")
                continue
            if stage.attach != ("root",):
                continue
            if stage.name not in self.buffers:
                if not self._read_anywhere(stage.name):
                    continue
                buf = Buffer(stage.name, stage.op.shape, stage.op.dtype, "global")
                self.buffers[stage.name] = buf
                self.bases[stage.name] = [Const(0)] * len(buf.shape)
                body.append(Allocate(buf))
            body.append(self.lower_stage(stage))
        return PrimFunc(self.name, self.args, seq(body), self.sizes)

    def _read_anywhere(self, name: str) -> bool:
        return any(r.attach != ("inline",) or self._read_anywhere(r.name) for r in self.readers(name))

    def readers(self, name: str) -> list[Stage]:
        """Stages whose expression reads ``name`` (``Schedule.readers``, each stage's inputs looked
        up once per lowering)."""
        if self._readers is None:
            self._readers = {}
            for stage in self.s.stages.values():
                if isinstance(stage.op, ComputeOp):
                    for t in stage.op.input_tensors:
                        self._readers.setdefault(t.name, []).append(stage)
        return self._readers.get(name, [])

    def effective_readers(self, name: str) -> list[Stage]:
        """Stages that read ``name`` directly or through inlined stages."""
        out: list[Stage] = []
        for r in self.readers(name):
            for x in self.effective_readers(r.name) if r.attach == ("inline",) else [r]:
                if x not in out:
                    out.append(x)
        return out

    # -- expressions
    def body_of(self, stage: Stage) -> Expr:
        """The stage's expression with every inlined producer substituted."""
        cached = self._bodies.get(stage.name)
        if cached is not None:
            return cached
        op = stage.op
        assert isinstance(op, ComputeOp)

        def inline(e: Expr) -> Expr | None:
            if isinstance(e, Load):
                prod = self.s.stages[e.tensor.name]
                if prod.attach == ("inline",):
                    pop = prod.op
                    assert isinstance(pop, ComputeOp)
                    idx = [rewrite(i, inline) for i in e.indices]
                    mapping = {iv.var: i for iv, i in zip(pop.axis, idx, strict=True)}
                    return substitute(self.body_of(prod), mapping)
            return None

        body = rewrite(op.body, inline)
        self._bodies[stage.name] = body
        return body

    def to_buffers(self, e: Expr) -> Expr:
        """Replace tensor loads by flat buffer loads relative to each buffer's region."""

        def fn(n: Expr) -> Expr | None:
            if isinstance(n, Load):
                name = n.tensor.name
                if name not in self.buffers:
                    raise ScheduleError(f"{name} is read before it is computed (check compute_at targets)")
                buf = self.buffers[name]
                idx = [rewrite(i, fn) for i in n.indices]
                local = [BinOp("sub", i, b, "int32") for i, b in zip(idx, self.bases[name], strict=True)]
                return BufLoad(buf, self.flatten(local, buf.shape))
            return None

        return rewrite(e, fn)

    def flatten(self, idx: Sequence[Expr], shape: Sequence[Extent]) -> Expr:
        """The row-major flat index of ``idx``, simplified (symbolic strides multiply)."""
        parts = [
            (i, st) if isinstance(st, int) else (BinOp("mul", i, st, "int32"), 1)
            for i, st in zip(idx, strides(shape), strict=True)
        ]
        return combine(parts, self.ranges)

    # -- stages
    def context(self, stage: Stage) -> StageContext:
        """The stage's region, loops and expression in loop variables (memoized)."""
        ctx = self._contexts.get(stage.name)
        if ctx is not None:
            return ctx
        op = stage.op
        assert isinstance(op, ComputeOp)
        if stage.attach[0] == "at":
            bases, region = self.region_at(stage)
        else:
            bases, region = [Const(0)] * len(op.shape), list(op.shape)
        root_ext: dict[str, Extent] = {iv.name: region[d] for d, iv in enumerate(op.axis)}
        root_ext |= {iv.name: iv.extent for iv in op.reduce_axis}
        nest = build_loop_nest(stage, root_ext, stage.name)
        for leaf in nest.leaves:
            self.ranges[leaf.var] = span(0, leaf.extent)
        sub: dict[Var, Expr] = {}
        preds = list(nest.predicates)
        for d, iv in enumerate(op.axis):
            full = BinOp("add", bases[d], nest.values[iv.name], "int32")
            sub[iv.var] = simplify(full, self.ranges)
            if not same_extent(region[d], op.shape[d]) or bases[d] != Const(0):
                preds += [compare("lt", full, op.shape[d]), compare("ge", full, 0)]
        for iv in op.reduce_axis:
            sub[iv.var] = (
                simplify(nest.values[iv.name] + iv.begin, self.ranges) if iv.begin else nest.values[iv.name]
            )
        ctx = StageContext(nest, bases, region, substitute(self.body_of(stage), sub), preds)
        self._contexts[stage.name] = ctx
        return ctx

    def region_at(self, stage: Stage) -> tuple[list[Expr], list[Extent]]:
        """Bound inference: what one iteration of the attach loop needs of ``stage``, over every
        consumer (each must run inside that loop)."""
        _, parent_name, leaf = stage.attach
        free: dict[Var, Extent] = {}
        bodies = []
        for reader in self.effective_readers(stage.name):
            chain = [reader]
            while chain[-1].name != parent_name:
                if chain[-1].attach[0] != "at":
                    raise ScheduleError(
                        f"{stage.name} is computed at {parent_name}.{leaf}, but its consumer "
                        f"{reader.name} is not computed inside that loop"
                    )
                chain.append(self.s.stages[chain[-1].attach[1]])
            for inner in chain[:-1]:
                free |= {lf.var: lf.extent for lf in self.context(inner).nest.leaves}
            bodies.append(self.context(reader).body)
        parent_nest = self.context(self.s.stages[parent_name]).nest
        pos = [lf.name for lf in parent_nest.leaves].index(leaf)
        free |= {lf.var: lf.extent for lf in parent_nest.leaves[pos + 1 :]}
        return infer_region(stage.op, bodies, free, self.ranges)

    def lower_stage(self, stage: Stage) -> Stmt:
        ctx = self.context(stage)
        nest, body = ctx.nest, ctx.body
        extras: dict[int, list[Stmt]] = {}
        for p, leaf in enumerate(nest.leaves):
            for child in self.s.stages.values():
                if child.attach == ("at", stage.name, leaf.name):
                    extras.setdefault(p, []).extend(self.lower_child(child))
        op = stage.op
        assert isinstance(op, ComputeOp)
        own = self.buffers[stage.name]
        index = self.flatten([nest.values[iv.name] for iv in op.axis], own.shape)
        if isinstance(body, Reduce):
            return self.lower_reduction(body, nest, own, index, list(ctx.preds), extras)
        store = Store(own, index, self.to_buffers(body))
        return self.build(nest.leaves, store, extras, self.place(list(ctx.preds), nest.leaves))

    def lower_child(self, child: Stage) -> list[Stmt]:
        ctx = self.context(child)
        scope = child.scope if child.scope != "global" else "local"
        buf = Buffer(child.name, tuple(ctx.region), child.op.dtype, scope)
        self.buffers[child.name] = buf
        self.bases[child.name] = ctx.bases
        return [Allocate(buf), self.lower_stage(child)]

    def lower_reduction(
        self,
        body: Reduce,
        nest: LoopNest,
        own: Buffer,
        index: Expr,
        preds: list[Expr],
        extras: dict[int, list[Stmt]],
    ) -> Stmt:
        leaves = nest.leaves
        r0 = next(p for p, lf in enumerate(leaves) if lf.axis_kind == "reduce")
        acc = BufLoad(own, index)
        update_value = BinOp(COMBINE[body.combiner], acc, self.to_buffers(body.source), own.dtype)
        update: Stmt = Store(own, index, update_value)
        if body.where is not None:  # guards the update only: the init must run everywhere
            update = IfThenElse(simplify(self.to_buffers(body.where), self.ranges), update)
        placed = self.place(preds, leaves)
        # init nest: the data-parallel loops inside the first reduction loop, on fresh variables
        inner = [lf for lf in leaves[r0 + 1 :] if lf.axis_kind == "data"]
        rename = {lf.var: Var(lf.var.name + ".init") for lf in inner}
        init_leaves = [
            Leaf(lf.name, rename[lf.var], lf.extent, "data", lf.loop_kind, lf.thread, lf.auto_unroll)
            for lf in inner
        ]
        for lf in init_leaves:
            self.ranges[lf.var] = span(0, lf.extent)
        init_preds = []
        for level, cs in placed.items():
            if level > r0:
                for c in cs:
                    if all(
                        not isinstance(v, Var) or v in rename or self._outer_var(v, leaves, r0)
                        for v in walk(c)
                    ):
                        init_preds.append(substitute(c, dict(rename)))
        init_store = Store(
            own,
            simplify(substitute(index, dict(rename)), self.ranges),
            identity_value(body.combiner, own.dtype),
        )
        init = self.build(init_leaves, init_store, {}, self.place(init_preds, init_leaves))
        extras.setdefault(r0 - 1, []).append(init)
        return self.build(leaves, update, extras, placed)

    @staticmethod
    def _outer_var(v: Var, leaves: Sequence[Leaf], r0: int) -> bool:
        return any(lf.var == v for lf in leaves[:r0]) or all(lf.var != v for lf in leaves)

    def place(self, preds: list[Expr], leaves: Sequence[Leaf]) -> dict[int, list[Expr]]:
        """Group conditions by the innermost loop they depend on (-1: none), dropping proven ones."""
        pos = {lf.var: p for p, lf in enumerate(leaves)}
        out: dict[int, list[Expr]] = {}
        for c in preds:
            c = simplify(c, self.ranges)
            if c == TRUE:
                continue
            level = max((pos[v] for v in walk(c) if isinstance(v, Var) and v in pos), default=-1)
            out.setdefault(level, []).append(c)
        return out

    def build(
        self,
        leaves: Sequence[Leaf],
        bottom: Stmt,
        extras: dict[int, list[Stmt]],
        preds: dict[int, list[Expr]],
    ) -> Stmt:
        stmt = bottom
        for p in range(len(leaves) - 1, -2, -1):
            body = seq([*extras.get(p, []), stmt])
            if p in preds:
                cond = conjoin(preds[p])
                body = seq([]) if cond == FALSE else IfThenElse(cond, body)
            if p < 0:
                return body
            lf = leaves[p]
            if lf.extent == 1 and lf.loop_kind != "thread":  # not emitted; its pragma goes inward
                stmt = body if lf.auto_unroll is None else with_auto_unroll(body, lf.auto_unroll)
                continue
            stmt = For(lf.var, 0, lf.extent, lf.loop_kind, body, lf.thread, lf.auto_unroll)
        return stmt


def strides(shape: Sequence[Extent]) -> list[Extent]:
    """Row-major strides of ``shape`` (expressions where the shape is symbolic)."""
    out: list[Extent] = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        a, b = out[d + 1], shape[d + 1]
        if isinstance(a, int) and isinstance(b, int):
            out[d] = a * b
        else:
            out[d] = simplify(BinOp("mul", as_expr(a), as_expr(b), "int32")) if a != 1 else b
    return out


def same_extent(a: Extent, b: Extent) -> bool:
    """Whether two extents are the same number or the same expression."""
    return a == b if isinstance(a, int) == isinstance(b, int) else False


def with_auto_unroll(s: Stmt, step: int) -> Stmt:
    """``s`` with an ``auto_unroll_max_step`` pragma on its outermost loops (those without one)."""
    if isinstance(s, For):
        return s if s.auto_unroll is not None else replace(s, auto_unroll=step)
    return map_children(s, lambda x: with_auto_unroll(x, step))
