"""A stage's loops: leaf extents from its split/fuse relations, and root indices from the leaves."""

from __future__ import annotations

from dataclasses import dataclass

from ..expr import BinOp, Const, Expr, Extent, Var, as_expr, compare, static
from ..schedule import FuseRel, ScheduleError, SplitRel, Stage
from ..te.extent import ext_ceil_div, ext_mul

KIND_OF = {"parallel": "parallel", "vectorize": "vectorized", "unroll": "unrolled"}


@dataclass(frozen=True, slots=True)
class Leaf:
    """One loop of a stage's nest."""

    name: str
    var: Var
    extent: Extent
    axis_kind: str  # "data" | "reduce"
    loop_kind: str  # an ir.LOOP_KINDS entry
    thread: str | None
    auto_unroll: int | None


@dataclass(frozen=True, slots=True)
class LoopNest:
    leaves: tuple[Leaf, ...]
    values: dict[str, Expr]  # root axis name -> its value in terms of the leaf variables
    predicates: tuple[Expr, ...]  # conditions that non-dividing splits need


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _split_extents(
    e: Extent, factor: int | None, nparts: int | None, threads: bool = False
) -> tuple[Extent, Extent]:
    """(outer, inner) extents of a split of ``e``; a symbolic ``e`` gets the factor (or nparts)
    as is and a ceil-divided partner (a guard keeps the last iteration in range). A factor larger
    than ``e`` shrinks to ``e``, unless the inner side goes to GPU ``threads``: a block launches
    every thread of its extent, and the guard masks the ones past ``e``."""
    if isinstance(e, int):
        if factor is not None and threads:
            return ceil_div(e, factor), factor
        if factor is not None:
            inner = min(factor, e)
            return ceil_div(e, inner), inner
        outer = min(nparts or 1, e)
        return outer, ceil_div(e, outer)
    if factor is not None:
        return ext_ceil_div(e, factor), factor
    return nparts or 1, ext_ceil_div(e, nparts or 1)


def _thread_sides(stage: Stage) -> set[str]:
    """Axes that are, or split only into, loops bound to ``threadIdx.*``."""
    out = {n for n, ann in stage.annotations.items() if ann.startswith("threadIdx.")}
    for rel in reversed(stage.relations):
        if isinstance(rel, SplitRel) and rel.outer in out and rel.inner in out:
            out.add(rel.parent)
    return out


def build_loop_nest(stage: Stage, root_extents: dict[str, Extent], prefix: str) -> LoopNest:
    """Resolve ``stage``'s relations for the given root extents (ints, or expressions of shape
    variables: a split of a symbolic extent is guarded)."""
    ext = dict(root_extents)
    threads = _thread_sides(stage)
    for rel in stage.relations:
        if isinstance(rel, SplitRel):
            split = _split_extents(ext[rel.parent], rel.factor, rel.nparts, rel.inner in threads)
            ext[rel.outer], ext[rel.inner] = split
        else:
            ext[rel.fused] = ext_mul(ext[rel.outer], ext[rel.inner])
    leaves = []
    values: dict[str, Expr] = {}
    for name in stage.leaves:
        var = Var(f"{prefix}.{name}")
        ann = stage.annotations.get(name)
        kind = KIND_OF.get(ann, "thread") if ann else "serial"
        pragma = stage.pragmas.get(name, {}).get("auto_unroll_max_step")
        leaves.append(
            Leaf(name, var, ext[name], stage.kinds[name], kind, ann if kind == "thread" else None, pragma)
        )
        one = static(ext[name]) == 1  # a loop of one iteration is not emitted
        values[name] = Const(0) if one else var
    preds: list[Expr] = []
    for rel in reversed(stage.relations):
        if isinstance(rel, FuseRel):
            fused, inner_extent = values[rel.fused], as_expr(ext[rel.inner])
            values[rel.outer] = BinOp("floordiv", fused, inner_extent, "int32")
            values[rel.inner] = BinOp("floormod", fused, inner_extent, "int32")
        else:
            n_in = ext[rel.inner]
            outer_value = values[rel.outer]
            scaled = outer_value if static(n_in) == 1 else BinOp("mul", outer_value, as_expr(n_in), "int32")
            values[rel.parent] = BinOp("add", scaled, values[rel.inner], "int32")
            n_out, n_par = ext[rel.outer], ext[rel.parent]
            if isinstance(n_out, int) and isinstance(n_in, int) and isinstance(n_par, int):
                guarded = n_out * n_in > n_par
            else:  # symbolic: exact only when one side is the parent itself
                guarded = static(n_in) != 1 and static(n_out) != 1
            if guarded:
                preds.append(compare("lt", values[rel.parent], n_par))
    missing = [n for n in root_extents if n not in values]
    if missing:
        raise ScheduleError(f"stage {stage.name}: axes {missing} are not reachable from its loops")
    return LoopNest(tuple(leaves), {n: values[n] for n in root_extents}, tuple(preds))
