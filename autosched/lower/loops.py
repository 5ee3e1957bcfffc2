"""A stage's loops: leaf extents from its split/fuse relations, and root indices from the leaves."""

from __future__ import annotations

from dataclasses import dataclass

from ..expr import BinOp, Const, Expr, Var, compare
from ..schedule import FuseRel, ScheduleError, SplitRel, Stage

KIND_OF = {"parallel": "parallel", "vectorize": "vectorized", "unroll": "unrolled"}


@dataclass(frozen=True, slots=True)
class Leaf:
    """One loop of a stage's nest."""

    name: str
    var: Var
    extent: int
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


def build_loop_nest(stage: Stage, root_extents: dict[str, int], prefix: str) -> LoopNest:
    """Resolve ``stage``'s relations for the given root extents."""
    ext = dict(root_extents)
    for rel in stage.relations:
        if isinstance(rel, SplitRel):
            e = ext[rel.parent]
            if rel.factor is not None:
                inner = min(rel.factor, e)
                outer = ceil_div(e, inner)
            else:
                outer = min(rel.nparts or 1, e)
                inner = ceil_div(e, outer)
            ext[rel.outer], ext[rel.inner] = outer, inner
        else:
            ext[rel.fused] = ext[rel.outer] * ext[rel.inner]
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
        values[name] = var if ext[name] > 1 else Const(0)  # a loop of one iteration is not emitted
    preds: list[Expr] = []
    for rel in reversed(stage.relations):
        if isinstance(rel, FuseRel):
            fused, inner_extent = values[rel.fused], Const(ext[rel.inner])
            values[rel.outer] = BinOp("floordiv", fused, inner_extent, "int32")
            values[rel.inner] = BinOp("floormod", fused, inner_extent, "int32")
        else:
            n_in = ext[rel.inner]
            outer_value = values[rel.outer]
            scaled = outer_value if n_in == 1 else BinOp("mul", outer_value, Const(n_in), "int32")
            values[rel.parent] = BinOp("add", scaled, values[rel.inner], "int32")
            if ext[rel.outer] * n_in > ext[rel.parent]:
                preds.append(compare("lt", values[rel.parent], ext[rel.parent]))
    missing = [n for n in root_extents if n not in values]
    if missing:
        raise ScheduleError(f"stage {stage.name}: axes {missing} are not reachable from its loops")
    return LoopNest(tuple(leaves), {n: values[n] for n in root_extents}, tuple(preds))
