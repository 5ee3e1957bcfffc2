"""scan: cumulative sums and recurrences over the first axis, against numpy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from te_strict import compile_strict

import autosched as asc

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
    compile_strict(asc.create_schedule(res.op), [X, res], tmp_path)
