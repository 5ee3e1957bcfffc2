"""Schedule -> loop-nest IR: inlining, bound inference for compute_at, loop nests, guards."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..expr import (
    NO_CODE,
    BinOp,
    ComputeOp,
    Const,
    Expr,
    Extent,
    ExternOp,
    Load,
    Reduce,
    ScanOp,
    Tensor,
    Var,
    compare,
    dag_shape_vars,
    op_code,
    rewrite,
    shape_vars,
    substitute,
    walk,
)
from ..schedule import Schedule, ScheduleError, Stage
from ..schedule.transform import reduce_identity
from .bounds import infer_region
from .crossthread import lower_cross_thread, thread_reduce_leaf
from .extern import lower_extern
from .ir import Allocate, Buffer, BufLoad, For, IfThenElse, PrimFunc, Stmt, Store, map_children, seq
from .loops import Leaf, LoopNest, build_loop_nest
from .reduction import aligned_strides, outputs_of, reduce_update
from .scan import lower_scan
from .simplify import FALSE, INF, TRUE, Ranges, combine, conjoin, simplify, span
from .tensorize import lower_tensorized


@dataclass(frozen=True, slots=True)
class StageContext:
    """Where a stage runs: its region (bases, extents), loops, and guarded expression."""

    nest: LoopNest
    bases: list[Expr]
    region: list[Extent]
    bodies: tuple[Expr, ...]  # one per output
    preds: list[Expr]
    store_pred: Expr | None = None  # the store predicate, also among ``preds``


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
        self.regions: dict[str, tuple[list[Expr], list[Extent]]] = {}  # fixed by the scan lowering
        scans = [st.op for st in sched.stages.values() if isinstance(st.op, ScanOp)]
        self.in_scan = {p.name for op in scans for p in op.parts}
        names = [t.name for t in args]
        if len(set(names)) != len(names):
            raise ValueError(f"argument names repeat: {names}")
        for t in args:
            stage = sched.stages.get(t.op.name)
            if stage is None or t.value_index >= stage.op.num_outputs:
                raise ValueError(f"argument {t.name!r} is not a tensor of this schedule")
            # an intermediate (computed at a loop, or inlined) in the arguments is written there too
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
            missing = [t.name for t in outputs_of(sched.stages[out]) if t.name not in self.buffers]
            if missing:
                raise ValueError(f"output {missing[0]!r} must be among the arguments")

    def run(self) -> PrimFunc:
        body: list[Stmt] = []
        for stage in self.s.stages.values():
            if stage.name in self.in_scan:
                continue  # the scan lowers its init and body stages in its own loops
            if stage.is_placeholder:
                if stage.name not in self.buffers and self.readers(stage.name):
                    raise ValueError(f"input {stage.name!r} is read but not among the arguments")
                continue
            outs = outputs_of(stage)
            is_arg = any(t.name in self.buffers for t in outs)
            if stage.attach != ("root",) and not (stage.attach == ("inline",) and is_arg):
                continue
            if not is_arg:
                if not self._read_anywhere(stage.name):
                    continue
                for t in outs:
                    buf = self.allocate(stage, t, tuple(t.shape), "global")
                    self.bases[t.name] = [Const(0)] * len(buf.shape)
                    body.append(Allocate(buf))
            if isinstance(stage.op, ScanOp):
                body.append(lower_scan(self, stage.op))
            elif isinstance(stage.op, ExternOp):
                body.append(lower_extern(self, stage.op))
            else:
                body.append(self.lower_stage(stage))
        code = NO_CODE.merge(*(op_code(st.op) for st in self.s.stages.values()))
        return PrimFunc(self.name, self.args, seq(body), self.sizes, code)

    def allocate(self, stage: Stage, t: Tensor, shape: tuple[Extent, ...], scope: str) -> Buffer:
        """A new buffer for output ``t`` of ``stage``, with the row strides storage_align asks for."""
        buf = Buffer(t.name, shape, t.dtype, scope)
        if stage.aligns and isinstance(stage.op, ComputeOp):
            fixed = [d for d in shape if isinstance(d, int)]
            if len(fixed) != len(shape):
                raise ValueError(
                    f"storage_align of {t.name!r}: its buffer has a symbolic shape {shape}; "
                    "storage_align pads fixed-size buffers only"
                )
            names = [iv.name for iv in stage.op.axis]
            aligns = {names.index(a): fo for a, fo in stage.aligns.items()}
            buf = replace(buf, strides=aligned_strides(fixed, aligns))
        self.buffers[t.name] = buf
        return buf

    def _read_anywhere(self, name: str) -> bool:
        return any(r.attach != ("inline",) or self._read_anywhere(r.name) for r in self.readers(name))

    def readers(self, name: str) -> list[Stage]:
        """Stages whose expression reads ``name`` (``Schedule.readers``, each stage's inputs looked
        up once per lowering)."""
        if self._readers is None:
            self._readers = {}
            for stage in self.s.stages.values():
                if not stage.is_placeholder:
                    for op_name in dict.fromkeys(t.op.name for t in stage.op.input_tensors):
                        self._readers.setdefault(op_name, []).append(stage)
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
    def body_of(self, stage: Stage, index: int = 0) -> Expr:
        """Output ``index``'s expression with every inlined producer substituted."""
        key = f"{stage.name}#{index}"
        cached = self._bodies.get(key)
        if cached is not None:
            return cached
        op = stage.op
        assert isinstance(op, ComputeOp)
        body = self.inline(op.bodies[index])
        self._bodies[key] = body
        return body

    def inline(self, e: Expr) -> Expr:
        """``e`` with the reads of inlined stages replaced by their expressions."""
        return rewrite(e, self._inlined)

    def _inlined(self, n: Expr) -> Expr | None:
        """A read of an inlined stage as its expression (for :meth:`inline`; a bound method: a closure
        calling itself is a reference cycle, which kept each lowering alive until a collection)."""
        if isinstance(n, Load):
            prod = self.s.stages.get(n.tensor.op.name)  # a scan's state is no stage
            if prod is not None and prod.attach == ("inline",):
                pop = prod.op
                assert isinstance(pop, ComputeOp)
                idx = [rewrite(i, self._inlined) for i in n.indices]
                mapping = {iv.var: i for iv, i in zip(pop.axis, idx, strict=True)}
                return substitute(self.body_of(prod, n.tensor.value_index), mapping)
        return None

    def to_buffers(self, e: Expr) -> Expr:
        """Replace tensor loads by flat buffer loads relative to each buffer's region."""
        return rewrite(e, self._buffer_load)

    def _buffer_load(self, n: Expr) -> Expr | None:
        """A tensor read as a flat buffer load (for :meth:`to_buffers`)."""
        if isinstance(n, Load):
            name = n.tensor.name
            if name not in self.buffers:
                raise ScheduleError(f"{name} is read before it is computed (check compute_at targets)")
            buf = self.buffers[name]
            idx = [rewrite(i, self._buffer_load) for i in n.indices]
            local = [BinOp("sub", i, b, "int32") for i, b in zip(idx, self.bases[name], strict=True)]
            return BufLoad(buf, self.flatten(local, buf))
        return None

    def flatten(self, idx: Sequence[Expr], buf: Buffer) -> Expr:
        """The flat index of ``idx`` in ``buf`` (row-major, or its padded strides), simplified;
        symbolic strides multiply."""
        parts = [
            (i, st) if isinstance(st, int) else (BinOp("mul", i, st, "int32"), 1)
            for i, st in zip(idx, buf.row_strides(), strict=True)
        ]
        return combine(parts, self.ranges)

    # -- stages
    def context(self, stage: Stage) -> StageContext:
        """The stage's region, loops and expressions in loop variables (memoized)."""
        ctx = self._contexts.get(stage.name)
        if ctx is not None:
            return ctx
        op = stage.op
        assert isinstance(op, ComputeOp)
        if stage.name in self.regions:
            bases, region = self.regions[stage.name]
        elif stage.attach[0] == "at":
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
        store_pred: Expr | None = None
        for d, iv in enumerate(op.axis):
            full = BinOp("add", bases[d], nest.values[iv.name], "int32")
            sub[iv.var] = simplify(full, self.ranges)
            if not same_extent(region[d], op.shape[d]) or bases[d] != Const(0):
                preds += [compare("lt", full, op.shape[d]), compare("ge", full, 0)]
        for iv in op.reduce_axis:
            sub[iv.var] = (
                simplify(nest.values[iv.name] + iv.begin, self.ranges) if iv.begin else nest.values[iv.name]
            )
        if stage.store_predicate is not None:
            by_name: dict[Var, Expr] = {Var(v.name): e for v, e in sub.items()}
            by_name |= {Var(lf.name): lf.var for lf in nest.leaves}
            used = {v.name for v in walk(stage.store_predicate) if isinstance(v, Var)}
            lost = sorted(used - {v.name for v in by_name})
            if lost:
                raise ScheduleError(f"the store predicate of {stage.name} uses {lost}: no longer loops")
            store_pred = substitute(stage.store_predicate, by_name)
            preds.append(store_pred)
        bodies = tuple(substitute(self.body_of(stage, i), sub) for i in range(op.num_outputs))
        ctx = StageContext(nest, bases, region, bodies, preds, store_pred)
        self._contexts[stage.name] = ctx
        return ctx

    def region_at(self, stage: Stage) -> tuple[list[Expr], list[Extent]]:
        """Bound inference: what one iteration of the attach loop needs of ``stage``, over every
        consumer (each must run inside that loop)."""
        _, parent_name, leaf = stage.attach
        free: dict[Var, Extent] = {}
        bodies: list[Expr] = []
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
            bodies.extend(self.context(reader).bodies)
        parent_nest = self.context(self.s.stages[parent_name]).nest
        pos = [lf.name for lf in parent_nest.leaves].index(leaf)
        free |= {lf.var: lf.extent for lf in parent_nest.leaves[pos + 1 :]}
        if stage.scope == "shared":  # one buffer for the block: what all its (virtual) threads need
            free |= self.enclosing_threads(parent_name, pos, ("thread", "vthread"))
        return infer_region(stage.op, bodies, free, self.ranges)

    def enclosing_threads(self, name: str, pos: int, tags: tuple[str, ...] = ("thread",)
                          ) -> dict[Var, Extent]:
        """Loops bound to ``tags`` of ``name`` to leaf ``pos`` and of its hosts to their attach loops."""
        out: dict[Var, Extent] = {}
        while True:
            stage = self.s.stages[name]
            leaves = self.context(stage).nest.leaves
            out |= {lf.var: lf.extent for lf in leaves[: pos + 1] if (lf.thread or "").startswith(tags)}
            if stage.attach[0] != "at":
                return out
            name = stage.attach[1]
            pos = [lf.name for lf in self.context(self.s.stages[name]).nest.leaves].index(stage.attach[2])

    def store_index(self, stage: Stage, ctx: StageContext, name: str) -> Expr:
        """Where one point of the stage's loops goes in the buffer of output ``name``: relative to
        the computed region, or absolute in an argument's whole buffer."""
        op = stage.op
        assert isinstance(op, ComputeOp)
        values = [ctx.nest.values[iv.name] for iv in op.axis]
        if self.bases[name] is not ctx.bases and any(b != Const(0) for b in ctx.bases):
            pairs = zip(ctx.bases, values, strict=True)
            values = [simplify(BinOp("add", b, v, "int32"), self.ranges) for b, v in pairs]
        return self.flatten(values, self.buffers[name])

    def lower_stage(self, stage: Stage) -> Stmt:
        ctx = self.context(stage)
        nest = ctx.nest
        extras: dict[int, list[Stmt]] = {}
        for p, leaf in enumerate(nest.leaves):
            for child in self.s.stages.values():
                if child.attach == ("at", stage.name, leaf.name):
                    extras.setdefault(p, []).extend(self.lower_child(child))
        outs = [t.name for t in outputs_of(stage)]
        targets = [(self.buffers[n], self.store_index(stage, ctx, n)) for n in outs]
        first = ctx.bodies[0]
        if stage.tensorized:
            return lower_tensorized(self, stage, ctx, targets, extras)
        if isinstance(first, Reduce) and thread_reduce_leaf(nest.leaves) is not None:
            return lower_cross_thread(self, stage, ctx, first, targets, extras)
        if isinstance(first, Reduce):
            return self.lower_reduction(stage, first, nest, targets, list(ctx.preds), extras)
        stores = seq(Store(b, i, self.to_buffers(v)) for (b, i), v in zip(targets, ctx.bodies, strict=True))
        return self.build(nest.leaves, stores, extras, self.place(list(ctx.preds), nest.leaves))

    def lower_child(self, child: Stage) -> list[Stmt]:
        ctx = self.context(child)
        scope = child.scope if child.scope != "global" else "local"
        out: list[Stmt] = []
        for t in outputs_of(child):
            if t.name in self.buffers and self.buffers[t.name].is_arg:
                continue  # an intermediate in the arguments: computed here into the whole buffer
            out.append(Allocate(self.allocate(child, t, tuple(ctx.region), scope)))
            self.bases[t.name] = ctx.bases
        return [*out, self.lower_stage(child)]

    def lower_reduction(
        self,
        stage: Stage,
        body: Reduce,
        nest: LoopNest,
        targets: list[tuple[Buffer, Expr]],
        preds: list[Expr],
        extras: dict[int, list[Stmt]],
    ) -> Stmt:
        leaves = nest.leaves
        update = self.reduction_update(stage, body, targets)
        placed = self.place(preds, leaves)
        r0, init = self.reduction_init(body, leaves, targets, placed)
        extras.setdefault(r0 - 1, []).append(init)
        return self.build(leaves, update, extras, placed)

    def reduction_update(self, stage: Stage, body: Reduce, targets: list[tuple[Buffer, Expr]]) -> Stmt:
        """The update of a reduction's outputs with one element (guarded by its ``where``)."""
        sources = [self.to_buffers(x) for x in body.all_sources]
        update = reduce_update(stage.name, body.combiner, targets, sources)
        if body.where is not None:  # guards the update only: the init must run everywhere
            update = IfThenElse(simplify(self.to_buffers(body.where), self.ranges), update)
        return update

    def reduction_init(
        self,
        body: Reduce,
        leaves: Sequence[Leaf],
        targets: list[tuple[Buffer, Expr]],
        placed: dict[int, list[Expr]],
    ) -> tuple[int, Stmt]:
        """(r0, init): the position of the first reduction loop and the nest that sets the outputs
        to the identity, to run just before that loop."""
        r0 = next(p for p, lf in enumerate(leaves) if lf.axis_kind == "reduce")
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
        identities = reduce_identity(body.combiner, [b.dtype for b, _ in targets])
        init_stores = seq(
            Store(b, simplify(substitute(i, dict(rename)), self.ranges), v)
            for (b, i), v in zip(targets, identities, strict=True)
        )
        return r0, self.build(init_leaves, init_stores, {}, self.place(init_preds, init_leaves))

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


def same_extent(a: Extent, b: Extent) -> bool:
    """Whether two extents are the same number or the same expression."""
    return a == b if isinstance(a, int) == isinstance(b, int) else False


def with_auto_unroll(s: Stmt, step: int) -> Stmt:
    """``s`` with an ``auto_unroll_max_step`` pragma on its outermost loops (those without one)."""
    if isinstance(s, For):
        return s if s.auto_unroll is not None else replace(s, auto_unroll=step)
    return map_children(s, lambda x: with_auto_unroll(x, step))
