"""Unit tests of the lowering stage: simplifier, bound inference, partitioning, vector chunks."""

from __future__ import annotations

import numpy as np
import pytest

import autosched as asc
from autosched.emit_c.printer import UNROLL_HINT_MAX
from autosched.expr import Var, const
from autosched.lower import lower
from autosched.lower.bounds import infer_region
from autosched.lower.ir import Buffer, For, IfThenElse, Seq, Stmt, Store
from autosched.lower.selects import _cuts
from autosched.lower.simplify import FALSE, TRUE, bounds, linear, simplify
from autosched.te.nodes import Cmp, Select
from autosched.vector_lanes import chunks_of

i, j, k = Var("i"), Var("j"), Var("k")
RANGES = {i: (0, 15), j: (0, 7), k: (0, 99)}


def test_linear_canonical_form_collects_terms() -> None:
    e = (i * 8 + j) * 2 - j + 3 - i * 16
    assert linear(e, {}) == ({j: 1}, 3)
    assert simplify(e) == simplify(j + 3)


def test_floordiv_and_floormod_use_ranges() -> None:
    fused = i * 8 + j
    assert simplify(fused // 8, RANGES) == i
    assert simplify(fused % 8, RANGES) == j
    assert simplify((fused + 3) % 8, RANGES) != j  # may wrap: kept
    assert simplify(k // 100, RANGES) == const(0)


def test_comparisons_are_decided_by_ranges() -> None:
    assert simplify(i * 8 + j < 128, RANGES) == TRUE
    assert simplify(i * 8 + j >= 128, RANGES) == FALSE
    undecided = simplify(i * 8 + j < 100, RANGES)
    assert undecided not in (TRUE, FALSE)
    assert bounds(linear(i * 8 - j, RANGES), RANGES) == (-7, 120)


def test_bound_inference_of_a_tile() -> None:
    A = asc.placeholder((64, 32), name="A")
    io, ii = Var("io"), Var("ii")
    body = A[io * 8 + ii, k] + A[io * 8 + ii + 2, k]
    bases, extents = infer_region(A.op, [body], {ii: 8}, {io: (0, 7), ii: (0, 7), k: (0, 31)})
    assert extents == [10, 1]  # 8 rows + a halo of 2; k is fixed at this loop: one column
    assert simplify(bases[0]) == simplify(io * 8) and bases[1] == k
    ranges = {io: (0, 7), ii: (0, 7), k: (0, 31)}
    _, extents = infer_region(A.op, [A[io * 8 + ii, (k * ii) % 32]], {ii: 8}, ranges)
    assert extents == [8, 32]  # not affine in the free loop: the whole dimension


def test_bound_inference_of_a_tile_read_through_a_floordiv() -> None:
    """A tile of 16 channels reads 2 blocks of 8 (the packed convolution's unblocking stage): the
    floordiv of the free loop is bounded, not taken as the whole dimension."""
    A = asc.placeholder((8, 32, 8), name="A")
    io, ii = Var("io"), Var("ii")
    ranges = {io: (0, 3), ii: (0, 15), k: (0, 31)}
    bases, extents = infer_region(A.op, [A[(io * 16 + ii) // 8, k, (io * 16 + ii) % 8]], {ii: 16}, ranges)
    assert extents == [2, 1, 8]
    assert simplify(bases[0]) == simplify(io * 2)
    _, extents = infer_region(A.op, [A[(io * 8 + ii) // 8, k, 0]], {ii: 16}, ranges)
    assert extents == [2, 1, 1]  # io * 8 + ii spans 16 rows: 2 blocks
    _, extents = infer_region(A.op, [A[(k + ii) // 8, k, 0]], {ii: 16}, ranges)
    assert extents == [8, 1, 1]  # the floordiv also reads a fixed loop: the whole dimension


def _loops(s: Stmt, out: list[For]) -> list[For]:
    if isinstance(s, For):
        out.append(s)
        _loops(s.body, out)
    elif isinstance(s, Seq):
        for x in s.stmts:
            _loops(x, out)
    elif isinstance(s, IfThenElse):
        _loops(s.then, out)
    return out


def _has_guard(s: Stmt) -> bool:
    if isinstance(s, IfThenElse):
        return True
    if isinstance(s, For):
        return _has_guard(s.body)
    if isinstance(s, Seq):
        return any(_has_guard(x) for x in s.stmts)
    return False


def test_partition_leaves_the_main_body_without_guards() -> None:
    wl = asc.get_workload("matmul", (127, 255, 63))
    A, B, C = wl.tensors()
    s = asc.create_schedule(C)
    x, y = s[C].op.axis
    s[C].tile(x, y, 32, 8)
    func = lower(s, [A, B, C])
    body = func.body.stmts if isinstance(func.body, Seq) else (func.body,)
    main = body[0]
    assert isinstance(main, For) and main.extent == 3  # 3 full row tiles of 32
    inner_main = main.body.stmts[0] if isinstance(main.body, Seq) else main.body
    assert isinstance(inner_main, For) and inner_main.extent == 31 and not _has_guard(inner_main)
    tail_loops = [lp for b in body[1:] for lp in _loops(b, [])]  # the last, partial row tile: 31 rows
    assert any(lp.var.name == "C.i.inner" and lp.extent == 31 for lp in tail_loops)
    assert not _has_guard(func.body)  # every tail was partitioned down to exact extents


def test_vector_chunks_cover_any_extent() -> None:
    assert chunks_of(56, 16) == [16, 16, 16, 8]
    assert chunks_of(7, 16) == [4, 2, 1]
    assert chunks_of(32, 8) == [8, 8, 8, 8]
    assert sum(chunks_of(61, 16)) == 61


@pytest.mark.requires("gcc")
def test_reduction_where_does_not_skip_the_init() -> None:
    X = asc.placeholder((6, 5), name="X")
    r = asc.reduce_axis(5, "r")
    Y = asc.compute((6,), lambda a: asc.sum(X[a, r], axis=r, where=a > 2), name="Y")
    f = asc.build(asc.create_schedule(Y), [X, Y])
    x = np.random.default_rng(0).random((6, 5), dtype=np.float32)
    y = np.full(6, np.nan, np.float32)
    f(x, y)
    np.testing.assert_allclose(y, np.where(np.arange(6) > 2, x.sum(1), 0), rtol=1e-6)


def test_auto_unroll_pragma_unrolls_small_inner_nests() -> None:
    A = asc.placeholder((64,), name="A")
    B = asc.compute((64,), lambda a: A[a] * 2.0, name="B")
    s = asc.create_schedule(B)
    o, inner = s[B].split(B.op.axis[0], 4)
    s[B].pragma(o, "auto_unroll_max_step", 4)
    loops = _loops(lower(s, [A, B]).body, [])
    assert [lp.extent for lp in loops] == [16]  # the 4-iteration inner loop became straight code


@pytest.mark.requires("gcc")
def test_auto_unroll_pragma_on_a_loop_of_one_iteration_still_applies() -> None:
    """A pragma on a loop that is not emitted (extent 1) goes to the loops inside it."""
    A = asc.placeholder((1, 8), name="A")
    B = asc.compute((1, 8), lambda a, b: A[a, b] + 1.0, name="B")
    s = asc.create_schedule(B)
    n, w = B.op.axis
    s[B].pragma(n, "auto_unroll_max_step", 16)
    func = lower(s, [A, B])
    assert _loops(func.body, []) == [] and len(func.body.stmts) == 8  # type: ignore[attr-defined]
    f = asc.build(s, [A, B])
    a = np.arange(8, dtype=np.float32).reshape(1, 8)
    b = np.zeros((1, 8), np.float32)
    f(a, b)
    np.testing.assert_array_equal(b, a + 1)


def test_auto_unroll_expands_small_nests_and_hints_innermost_larger_ones() -> None:
    """Up to AUTO_EXPAND steps the nest becomes straight code; a larger nest within the pragma
    gets a compiler hint where only vector loops stay inside it, and outer levels stay loops."""
    A = asc.placeholder((64, 48), name="A")
    B = asc.compute((64, 48), lambda a, b: A[a, b] * 2.0, name="B")
    s = asc.create_schedule(B)
    i, j = B.op.axis
    io, ii = s[B].split(i, 8)
    jo, ji = s[B].split(j, 6)
    s[B].reorder(io, jo, ii, ji)
    s[B].pragma(io, "auto_unroll_max_step", 512)
    kinds = {lp.var.name: lp.kind for lp in _loops(lower(s, [A, B]).body, [])}
    # b.inner (6 steps) is expanded; a.inner (8 x 6 = 48 steps > 32) is left to the compiler
    assert kinds == {"B.a.outer": "serial", "B.b.outer": "serial", "B.a.inner": "unroll_hint"}
    s2 = asc.create_schedule(B)
    io, ii = s2[B].split(B.op.axis[0], 4)
    jo, ji = s2[B].split(B.op.axis[1], 6)
    s2[B].reorder(io, jo, ii, ji)
    s2[B].pragma(io, "auto_unroll_max_step", 16)
    kinds = {lp.var.name: lp.kind for lp in _loops(lower(s2, [A, B]).body, [])}
    assert kinds == {"B.a.outer": "serial", "B.b.outer": "serial", "B.a.inner": "serial"}  # 24 > 16


def test_a_long_hinted_loop_asks_the_compiler_for_a_bounded_unroll() -> None:
    """A 300-iteration reduction under a pragma of 512 is left to the C compiler, which is asked to
    unroll it by UNROLL_HINT_MAX, not completely (gcc took 2-9 s to compile such a loop unrolled
    whole); a hinted loop within the bound keeps its full count."""
    A = asc.placeholder((3, 300), name="A")
    k = asc.reduce_axis(300, name="k")
    S = asc.compute((3,), lambda i: asc.sum(asc.exp(A[i, k]), axis=k), name="S")
    s = asc.create_schedule(S)
    s[S].pragma(S.op.axis[0], "auto_unroll_max_step", 512)
    source = asc.emit(s, [A, S], "c")
    assert f"#pragma GCC unroll {UNROLL_HINT_MAX}\n" in source and "unroll 300" not in source
    B = asc.compute((3, 40), lambda i, j: A[i, j] * 2.0, name="B")
    s = asc.create_schedule(B)
    s[B].pragma(B.op.axis[0], "auto_unroll_max_step", 512)
    assert "#pragma GCC unroll 40\n" in asc.emit(s, [A, B], "c")


@pytest.mark.requires("gcc")
def test_unrolled_copies_decide_their_guards() -> None:
    """Copies of unrolled loops fix their variables: guards and selects that depend on them are
    decided per copy (a padded copy becomes plain loads and zeros), and the program computes the
    same."""
    X = asc.placeholder((10,), name="X")
    P = asc.compute((14,), lambda a: asc.if_then_else((a >= 2) & (a < 12), X[a - 2], 0.0), name="P")
    s = asc.create_schedule(P)
    s[P].unroll(P.op.axis[0])
    func = lower(s, [X, P])
    stores = func.body.stmts  # type: ignore[attr-defined]
    assert len(stores) == 14 and all("select" not in str(st) for st in stores)
    Y = asc.compute((10,), lambda a: X[a] * 3.0, name="Y")
    s = asc.create_schedule(Y)
    _, inner = s[Y].split(Y.op.axis[0], 4)  # 3 tiles of 4, the last one partial
    s[Y].unroll(inner)
    assert not _has_guard(lower(s, [X, Y]).body)
    x = np.arange(10, dtype=np.float32)
    for sched, out, want in ((asc.create_schedule(P), P, np.pad(x, 2)), (s, Y, x * 3)):
        if out is P:
            sched[P].unroll(P.op.axis[0])
        got = np.zeros(out.shape, np.float32)
        asc.build(sched, [X, out])(x, got)
        np.testing.assert_array_equal(got, want)


def _vector_loops(s: Stmt) -> list[For]:
    found = [s] if isinstance(s, For) and s.kind == "vectorized" else []
    children = s.stmts if isinstance(s, Seq) else ()
    if isinstance(s, For):
        children = (s.body,)
    elif isinstance(s, IfThenElse):
        children = (s.then,) if s.otherwise is None else (s.then, s.otherwise)
    return found + [f for c in children for f in _vector_loops(c)]


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("target", ["c", None])
def test_a_vectorized_padded_copy_is_split_where_its_selects_change(target: str | None) -> None:
    """A vectorized loop over a padded row selects on ``w`` (the column) and ``h`` (the row): on a
    CPU it is split at the padding (w = 2 and 12) into parts that decide the column's condition,
    and the row's condition is hoisted around each part, so no vector loop selects per lane; the
    program computes the padded array. A GPU lowering keeps the loop whole."""
    X = asc.placeholder((5, 10), name="X")
    inside = lambda h, w: (h >= 1) & (h < 6) & (w >= 2) & (w < 12)  # noqa: E731
    P = asc.compute((7, 14), lambda h, w: asc.if_then_else(inside(h, w), X[h - 1, w - 2], -1.0), name="P")
    s = asc.create_schedule(P)
    s[P].vectorize(P.op.axis[1])
    if target is None:
        loops = _vector_loops(lower(s, [X, P], gpu=True).body)
        assert [(lp.begin, lp.extent) for lp in loops] == [(0, 14)] and "select" in str(loops[0])
        return
    loops = _vector_loops(lower(s, [X, P]).body)
    # the border parts decide the whole condition (false); the middle one is copied per row branch
    assert sorted((lp.begin, lp.extent) for lp in loops) == [(0, 2), (2, 10), (2, 10), (12, 2)]
    assert all("select" not in str(lp.body) for lp in loops), loops
    x = np.arange(50, dtype=np.float32).reshape(5, 10)
    got = np.zeros((7, 14), np.float32)
    asc.build(s, [X, P], target=target)(x, got)
    np.testing.assert_array_equal(got, np.pad(x, ((1, 1), (2, 2)), constant_values=-1.0))


def test_split_points_of_a_linear_condition_are_where_its_truth_changes() -> None:
    """``_cuts`` solves each condition at its root; checked against testing every loop value."""
    v = Var("v")
    truth = {"lt": lambda x: x < 0, "le": lambda x: x <= 0, "gt": lambda x: x > 0,
             "ge": lambda x: x >= 0, "eq": lambda x: x == 0, "ne": lambda x: x != 0}  # fmt: skip
    body = Store(Buffer("y", (64,), "float32"), v, const(0.0, "float32"))
    one, zero = const(1.0, "float32"), const(0.0, "float32")
    checked = 0
    for op, holds in truth.items():
        for a in (-3, -2, -1, 1, 2, 3):
            for k in range(-13, 14):
                sel = Select(Cmp(op, v * a + const(k), const(0)), one, zero)
                for begin, extent in ((0, 1), (0, 9), (2, 13)):
                    loop = For(v, begin, extent, "vectorized", body)
                    values = range(begin, begin + extent)
                    want = [x for x in values[1:] if holds(a * x + k) != holds(a * (x - 1) + k)]
                    assert _cuts(loop, [sel]) == want, (op, a, k, begin, extent)
                    checked += bool(want)
    assert checked > 500  # most cases do cut somewhere
