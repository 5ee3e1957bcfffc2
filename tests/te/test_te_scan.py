"""scan: cumulative sums and recurrences over the first axis, against numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from te_strict import compile_strict

import autosched as asc
from autosched.reference import evaluate

pytestmark = pytest.mark.requires("gcc")


def _cumsum(m: int, n: int) -> tuple[asc.Tensor, asc.Tensor, asc.Tensor, asc.Tensor]:
    X = asc.placeholder((m, n), name="X")
    state = asc.placeholder((m, n), name="s_state")
    init = asc.compute((1, n), lambda _, i: X[0, i], name="s_init")
    update = asc.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="s_update")
    return X, state, init, update


@pytest.mark.parametrize("m,n", [(8, 8), (9, 5), (1, 3)])
def test_cumulative_sum_and_a_consumer(m: int, n: int) -> None:
    X, state, init, update = _cumsum(m, n)
    res = asc.scan(init, update, state, inputs=[X])
    assert res.shape == (m, n) and res.dtype == "float32"
    x = np.random.default_rng(m).random((m, n)).astype(np.float32)
    out = np.zeros_like(x)
    asc.build(asc.create_schedule(res.op), [X, res])(x, out)
    np.testing.assert_allclose(out, np.cumsum(x, axis=0), rtol=1e-5)
    Y = asc.compute((m, n), lambda t, i: res[t, i] * 2, name="Y")
    s = asc.create_schedule(Y.op)
    yo, yi = s[Y].split(Y.op.axis[1], factor=4)
    s[Y].vectorize(yi)
    y = np.zeros_like(x)
    asc.build(s, [X, Y])(x, y)
    np.testing.assert_allclose(y, 2 * np.cumsum(x, axis=0), rtol=1e-5)


def test_recurrence_with_two_init_rows_reads_two_earlier_rows() -> None:
    F = asc.placeholder((12, 3), dtype="int32", name="F")
    st = asc.placeholder((12, 3), dtype="int32", name="st")
    ini = asc.compute((2, 3), lambda t, i: F[t, i], name="ini")
    upd = asc.compute((12, 3), lambda t, i: st[t - 1, i] * 2 + st[t - 2, i] + F[t, i], name="upd")
    sc = asc.scan(ini, upd, st, name="rec")
    f = np.random.default_rng(0).integers(-3, 4, (12, 3)).astype(np.int32)
    out = np.zeros_like(f)
    asc.build(asc.create_schedule(sc.op), [F, sc])(f, out)
    want = f.copy()
    for t in range(2, 12):
        want[t] = 2 * want[t - 1] + want[t - 2] + f[t]
    np.testing.assert_array_equal(out, want)


def test_bad_scans_are_one_clear_error() -> None:
    X, state, init, update = _cumsum(6, 4)
    narrow = asc.compute((1, 3), lambda _, i: X[0, i], name="narrow")
    with pytest.raises(ValueError, match=r"init \[1, 3\], update \[6, 4\], state \[6, 4\] disagree"):
        asc.scan(narrow, update, state)
    short = asc.compute((5, 4), lambda t, i: state[t - 1, i] + X[t, i], name="short")
    with pytest.raises(ValueError, match="as many rows as the state"):
        asc.scan(init, short, state)
    same_row = asc.compute((6, 4), lambda t, i: state[t, i] + 1, name="same_row")
    with pytest.raises(ValueError, match="earlier rows"):
        asc.scan(init, same_row, state)
    with pytest.raises(ValueError, match="must be a placeholder"):
        asc.scan(init, update, init)
    res = asc.scan(init, update, state)
    with pytest.raises(asc.ScheduleError, match="scan"):
        asc.create_schedule(res.op)[res].parallel("t")


def test_scan_builds_as_strict_c99(tmp_path: Path) -> None:
    X, state, init, update = _cumsum(7, 5)
    res = asc.scan(init, update, state)
    s = asc.create_schedule(res.op)
    _, xi = s[update].split(update.op.axis[1], factor=4)
    s[update].vectorize(xi)
    compile_strict(s, [X, res], tmp_path)


def _twice_plus_x(x: np.ndarray) -> np.ndarray:
    want = x.copy()
    for t in range(1, x.shape[0]):
        want[t] = 2 * want[t - 1] + x[t]
    return want


@pytest.mark.parametrize("m,n", [(6, 32), (7, 37)])
def test_scheduled_scan_stages_as_in_tvm_tutorial(m: int, n: int) -> None:
    """Split, vectorize and parallel on the init and update stages' non-time axes; a two-stage
    update with the first stage attached at the second's loop."""
    X, state, init, update = _cumsum(m, n)
    res = asc.scan(init, update, state, inputs=[X])
    s = asc.create_schedule(res.op)
    for part in (init, update):
        xo, xi = s[part].split(part.op.axis[1], factor=8)
        s[part].vectorize(xi)
    s[update].parallel(s[update].leaves[1])
    text = str(asc.lower(s, [X, res]))
    assert "for scan.t in [1, " in text and "vectorized" in text and "parallel" in text
    x = np.random.default_rng(n).random((m, n)).astype(np.float32)
    out = np.zeros_like(x)
    asc.build(s, [X, res])(x, out)
    np.testing.assert_allclose(out, np.cumsum(x, axis=0), rtol=1e-5)
    s1 = asc.compute((m, n), lambda t, i: state[t - 1, i] * 2, name="s1")
    s2 = asc.compute((m, n), lambda t, i: s1[t, i] + X[t, i], name="s2")
    res2 = asc.scan(init, s2, state, inputs=[X])
    for attach in (True, False):  # s1 at s2's loop (a row tile), or at root (row t, a whole buffer)
        s = asc.create_schedule(res2.op)
        xo, _ = s[s2].split(s2.op.axis[1], factor=16)
        if attach:
            s[s1].compute_at(s[s2], xo)
        out = np.zeros_like(x)
        asc.build(s, [X, res2])(x, out)
        np.testing.assert_allclose(out, _twice_plus_x(x), rtol=1e-5)
    np.testing.assert_allclose(evaluate(res2, {"X": x})["scan"], _twice_plus_x(x), rtol=1e-5)


def test_scan_of_two_states_reading_each_other() -> None:
    m, n = 8, 5
    X = asc.placeholder((m, n), name="X")
    a_st, b_st = asc.placeholder((m, n), name="a_st"), asc.placeholder((m, n), name="b_st")
    a0 = asc.compute((1, n), lambda _, i: X[0, i], name="a0")
    b0 = asc.compute((1, n), lambda _, i: X[0, i] * 0.5, name="b0")
    a1 = asc.compute((m, n), lambda t, i: a_st[t - 1, i] + b_st[t - 1, i], name="a1")
    b1 = asc.compute((m, n), lambda t, i: b_st[t - 1, i] * 0.5 + X[t, i], name="b1")
    ra, rb = asc.scan([a0, b0], [a1, b1], [a_st, b_st], name="ab")
    assert (ra.name, rb.name, ra.op is rb.op) == ("ab.v0", "ab.v1", True)
    x = np.random.default_rng(0).random((m, n)).astype(np.float32)
    wa, wb = x.copy(), x * 0.5
    for t in range(1, m):
        wa[t], wb[t] = wa[t - 1] + wb[t - 1], wb[t - 1] * 0.5 + x[t]
    s = asc.create_schedule(ra.op)
    _, bi = s[b1].split(b1.op.axis[1], factor=4)
    s[b1].vectorize(bi)
    oa, ob = np.zeros_like(x), np.zeros_like(x)
    asc.build(s, [X, ra, rb])(x, oa, ob)
    np.testing.assert_allclose(oa, wa, rtol=1e-5)
    np.testing.assert_allclose(ob, wb, rtol=1e-5)
    ref = evaluate([ra, rb], {"X": x})
    np.testing.assert_allclose(ref["ab.v0"], wa, rtol=1e-5)
    np.testing.assert_allclose(ref["ab.v1"], wb, rtol=1e-5)


def test_scan_stage_primitives_that_do_not_apply_are_clear_errors() -> None:
    X, state, init, update = _cumsum(6, 4)
    res = asc.scan(init, update, state, inputs=[X])
    s = asc.create_schedule(res.op)
    with pytest.raises(asc.ScheduleError, match="update of scan scan, computed row by row"):
        s[update].compute_inline()
    with pytest.raises(asc.ScheduleError, match="init of scan scan"):
        s[init].compute_at(s[update], update.op.axis[1])
    with pytest.raises(asc.ScheduleError, match="cache_write of it is not supported"):
        s.cache_write(update, "local")
    with pytest.raises(asc.ScheduleError, match="cache_read for a reader"):
        s.cache_read(X, "local", [update])
    with pytest.raises(ValueError, match="give one init and one update per state"):
        asc.scan([init], [update, update], [state])
    wide = asc.compute((5, 4), lambda t, i: state[t - 1, i] * 2, name="wide")
    with pytest.raises(ValueError, match="its first axis must have the state's 6 rows"):
        asc.scan(init, asc.compute((6, 4), lambda t, i: wide[t % 5, i], name="u"), state)
    same = asc.compute((6, 4), lambda t, i: state[t, i] * 2, name="same")
    with pytest.raises(ValueError, match="same reads .*earlier rows"):
        asc.scan(init, asc.compute((6, 4), lambda t, i: same[t, i], name="u2"), state)
