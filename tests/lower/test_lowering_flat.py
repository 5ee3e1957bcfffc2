"""Lowering that the convolutions over flat pixels rely on (autosched.graph.conv_flat): a flat
index split into rows and columns and put back together is affine again, a vectorized loop's
partial last tile is cut to the positions left (whole vectors, no per-lane guards), iterations
past a partial tile's end are dropped, and a padded copy split by stride phase selects per row,
not per lane."""

from __future__ import annotations

import numpy as np
import pytest

import autosched as asc
from autosched.expr import BinOp, Const, Var
from autosched.lower import lower
from autosched.lower.ir import For, IfThenElse, Seq, Stmt
from autosched.lower.simplify import linear, rebuild


def _int(op: str, a: object, b: object) -> BinOp:
    return BinOp(op, a, b if not isinstance(b, int) else Const(b, "int32"), "int32")  # type: ignore[arg-type]


def test_a_flat_index_split_into_rows_and_columns_is_affine_again() -> None:
    i, j = Var("i"), Var("j")
    for flat, want in ((i, "i"), (_int("add", _int("mul", j, 48), i), "(i + (j * 48))"),
                       (_int("add", _int("mul", j, 224), i), "(i + (j * 224))")):
        e = _int("add", _int("mul", _int("floordiv", flat, 112), 112), _int("floormod", flat, 112))
        assert str(rebuild(*linear(e, {i: (0, 47), j: (0, 261)}))) == want
    other = _int("add", _int("mul", _int("floordiv", i, 112), 111), _int("floormod", i, 112))
    assert "//" in str(rebuild(*linear(other, {i: (0, 500)})))  # (i // 112) * 111: not the identity


def _loops(s: Stmt) -> list[For]:
    children: tuple[Stmt, ...] = s.stmts if isinstance(s, Seq) else ()
    if isinstance(s, For):
        children = (s.body,)
    elif isinstance(s, IfThenElse):
        children = (s.then,) if s.otherwise is None else (s.then, s.otherwise)
    return ([s] if isinstance(s, For) else []) + [f for c in children for f in _loops(c)]


def _guarded(s: Stmt) -> bool:
    return isinstance(s, IfThenElse) or any(_guarded(c) for c in (
        s.stmts if isinstance(s, Seq) else (s.body,) if isinstance(s, For) else ()))


@pytest.mark.requires("gcc")
def test_a_partial_tile_of_vectors_is_cut_to_the_positions_left() -> None:
    A = asc.placeholder((196,), name="A")
    B = asc.compute((196,), lambda i: A[i] * 2.0, name="B")
    s = asc.create_schedule(B)
    _, inner = s[B].split(B.op.axis[0], 64)
    s[B].vectorize(inner)
    vectors = [lp for lp in _loops(lower(s, [A, B]).body) if lp.kind == "vectorized"]
    assert [(lp.begin, lp.extent) for lp in vectors] == [(0, 64), (0, 4)]  # 196 = 3 x 64 + 4
    assert not any(_guarded(lp.body) for lp in vectors)
    a = np.arange(196, dtype=np.float32)
    got = np.zeros(196, np.float32)
    asc.build(s, [A, B])(a, got)
    np.testing.assert_array_equal(got, 2 * a)


@pytest.mark.requires("gcc")
def test_tiles_past_a_partial_bands_end_are_dropped() -> None:
    """Rows of 7 outputs read at a pitch of 9 from a flat stage computed per band of 4 rows in
    tiles of 16: the last band (2 rows) needs 16 positions, one whole tile; its other tiles
    are dropped rather than left as guarded scalar loops."""
    X = asc.placeholder((90,), name="X")
    F = asc.compute((90,), lambda e: X[e] + 1.0, name="F")
    out = asc.compute((10, 7), lambda y, x: F[y * 9 + x] * 3.0, name="out")
    s = asc.create_schedule(out)
    yo, _ = s[out].split(out.op.axis[0], 4)
    s[F].compute_at(s[out], yo)
    _, fi = s[F].split(F.op.axis[0], 16)
    s[F].vectorize(fi)
    vectors = [lp for lp in _loops(lower(s, [X, out]).body) if lp.kind == "vectorized"]
    assert vectors and not any(_guarded(lp.body) for lp in vectors)
    x = np.arange(90, dtype=np.float32)
    got = np.zeros((10, 7), np.float32)
    asc.build(s, [X, out])(x, got)
    np.testing.assert_array_equal(got, 3 * (x.reshape(10, 9)[:, :7] + 1))


@pytest.mark.requires("gcc")
def test_a_padded_copy_split_by_stride_phase_selects_per_row() -> None:
    """P[px, j] = X[2j + px - 1] inside the row, 0 outside: the column condition reads the phase
    ``px`` (a loop of 2 values) too; the vector loop is cut where it changes for either phase
    and the rest, a condition of ``px`` alone, hoisted around it."""
    X = asc.placeholder((10,), name="X")
    def body(px: object, j: object) -> object:
        at = j * 2 + px - 1  # type: ignore[operator]
        return asc.if_then_else((at >= 0) & (at < 10), X[at], 0.0)
    P = asc.compute((2, 6), body, name="P")
    s = asc.create_schedule(P)
    s[P].vectorize(P.op.axis[1])
    vectors = [lp for lp in _loops(lower(s, [X, P]).body) if lp.kind == "vectorized"]
    assert vectors and all("select" not in str(lp.body) for lp in vectors if lp.extent > 1)
    x = np.arange(1, 11, dtype=np.float32)
    got = np.zeros((2, 6), np.float32)
    asc.build(s, [X, P])(x, got)
    padded = np.concatenate([[0.0], x, [0.0]]).astype(np.float32)
    np.testing.assert_array_equal(got, np.stack([padded[0::2], padded[1::2]]))
