"""Operations that share a (default) name, as TVM allows: the schedule renames the later ones
(``compute_1``, ...) from the DAG alone, and every API still takes the user's own tensors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.expr import dag_key, unique_names
from autosched.ops.registry import get_workload
from autosched.schedule import Schedule
from autosched.schedule.steps import SplitStep, steps_from_json, steps_to_json

pytestmark = pytest.mark.requires("gcc")

ROOT = Path(__file__).resolve().parents[2]

# the scan tutorial's unnamed states, inits and updates, and a schedule with steps on the update
SCAN_DAG = """
import autosched as asc

def scan_dag(m, n):
    X = asc.placeholder((m, n), name="X")
    s_state = asc.placeholder((m, n))
    s_init = asc.compute((1, n), lambda _, i: X[0, i])
    s_update = asc.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
    return X, s_init, s_update, asc.scan(s_init, s_update, s_state, inputs=[X])

def scheduled(m, n):
    X, s_init, s_update, res = scan_dag(m, n)
    s = asc.create_schedule(res.op)
    xo, xi = s[s_update].split(s_update.op.axis[1], factor=8)
    s[s_update].reorder(xi, xo)
    s[s_init].split(s_init.op.axis[1], factor=4)
    return s, [X, res]
"""


def _scan_module() -> dict[str, object]:
    space: dict[str, object] = {}
    exec(SCAN_DAG, space)
    return space


def test_scan_tutorial_with_unnamed_init_and_update_matches_numpy() -> None:
    s, args = _scan_module()["scheduled"](10, 20)  # type: ignore[operator]
    assert list(s.stages) == ["X", "compute", "compute_1", "scan"]
    f = asc.build(s, args, target="c")
    a = np.random.default_rng(0).random((10, 20), dtype=np.float32)
    b = np.zeros_like(a)
    f(a, b)
    np.testing.assert_allclose(b, np.cumsum(a, axis=0), rtol=1e-5)


def test_scan_of_two_unnamed_states_matches_numpy() -> None:
    m, n, w = 6, 5, 3
    X = asc.placeholder((m, n), name="X")
    st1, st2 = asc.placeholder((m, n)), asc.placeholder((m, w))
    i1 = asc.compute((1, n), lambda _, i: X[0, i])
    i2 = asc.compute((1, w), lambda _, i: asc.const(0.0))
    u1 = asc.compute((m, n), lambda t, i: st1[t - 1, i] + X[t, i])
    u2 = asc.compute((m, w), lambda t, i: st2[t - 1, i] + st1[t - 1, 0])
    r1, r2 = asc.scan([i1, i2], [u1, u2], [st1, st2], inputs=[X])
    s = asc.create_schedule(r1.op)
    f = asc.build(s, [X, r1, r2], target="c")
    x = np.random.default_rng(1).random((m, n), dtype=np.float32)
    o1, o2 = np.zeros((m, n), np.float32), np.zeros((m, w), np.float32)
    f(x, o1, o2)
    want1 = np.cumsum(x, axis=0)
    want2 = np.zeros((m, w), np.float32)
    for t in range(1, m):
        want2[t] = want2[t - 1] + want1[t - 1, 0]
    np.testing.assert_allclose(o1, want1, rtol=1e-5)
    np.testing.assert_allclose(o2, want2, rtol=1e-5)


def _chain() -> tuple[asc.Tensor, asc.Tensor, asc.Tensor]:
    A = asc.placeholder((12, 8))
    B = asc.compute((12, 8), lambda i, j: A[i, j] * 2 + 1)
    k = asc.reduce_axis(8, name="k")
    C = asc.compute((12,), lambda i: asc.sum(B[i, k] * A[i, k], axis=k))
    return A, B, C


def _check_chain(s: Schedule, A: asc.Tensor, C: asc.Tensor) -> None:
    source = asc.emit(s, [A, C], target="c")
    f = asc.build(s, [A, C], target="c")
    a = np.random.default_rng(2).random((12, 8), dtype=np.float32)
    c = np.zeros(12, np.float32)
    f(a, c)
    np.testing.assert_allclose(c, ((a * 2 + 1) * a).sum(axis=1), rtol=1e-5)
    assert "compute_1" in source


def test_two_unnamed_computes_chained_compute_at_and_cache_write() -> None:
    A, B, C = _chain()
    s = asc.create_schedule(C.op)
    assert list(s.stages) == ["placeholder", "compute", "compute_1"]
    CL = s.cache_write(C, "local")
    s[B].compute_at(s[CL], CL.op.axis[0])
    s[CL].compute_at(s[C], C.op.axis[0])
    assert s[B].name == "compute" and s[C].name == "compute_1" and s[C.op] is s[C]
    _check_chain(s, A, C)


def test_cache_read_and_rfactor_take_the_users_tensors() -> None:
    A, B, C = _chain()
    s = asc.create_schedule(C.op)
    AL = s.cache_read(A, "local", [B, C])
    ko, ki = s[C].split(C.op.reduce_axis[0], factor=4)
    CF = s.rfactor(C, ki)
    s[B].compute_inline()
    assert AL.op.name == "placeholder.local" and CF.op.name == "compute_1.rf"
    _check_chain(s, A, C)


def test_create_group_takes_the_users_tensors() -> None:
    A, B, C = _chain()
    D = asc.compute((12,), lambda i: C[i] * 3)
    s = asc.create_schedule(D.op)
    g = s.create_group(outputs=C, inputs=A)
    assert g.members == ("compute", "compute_1") and s[D].name == "compute_2"
    xo, _ = s[D].split(D.op.axis[0], factor=4)
    g.compute_at(s[D], xo)
    a = np.random.default_rng(3).random((12, 8), dtype=np.float32)
    d = np.zeros(12, np.float32)
    asc.build(s, [A, D], target="c")(a, d)
    np.testing.assert_allclose(d, ((a * 2 + 1) * a).sum(axis=1) * 3, rtol=1e-5)


def test_two_unnamed_placeholders_follow_the_argument_list() -> None:
    A = asc.placeholder((7,))
    B = asc.placeholder((7,))
    C = asc.compute((7,), lambda i: A[i] - 2 * B[i], name="C")
    s = asc.create_schedule(C.op)
    a, b = np.arange(7, dtype=np.float32), np.full(7, 10, np.float32)
    for order, arrays, want in (([A, B, C], (a, b), a - 2 * b), ([B, A, C], (b, a), a - 2 * b)):
        c = np.zeros(7, np.float32)
        asc.build(s, order, target="c")(*arrays, c)
        np.testing.assert_array_equal(c, want)
    assert {a.name for a in asc.lower(s, [A, B, C]).args} == {"placeholder", "placeholder_1", "C"}


def test_a_user_workload_with_unnamed_stages_builds_and_keeps_its_call_order() -> None:
    @asc.workload("test_names_two_inputs")
    def two_inputs(n: int) -> list[asc.Tensor]:
        A, B = asc.placeholder((n,)), asc.placeholder((n,))
        return [A, B, asc.compute((n,), lambda i: A[i] - B[i])]

    w = get_workload("test_names_two_inputs", (5,))
    assert [t.name for t in w.tensors()] == ["placeholder", "placeholder_1", "compute"]
    a, b = np.arange(5, dtype=np.float32), np.ones(5, np.float32)
    np.testing.assert_array_equal(w.evaluate(a, b)[0], a - b)
    task = asc.Task("test_names_two_inputs", (5,), target="c")
    c = np.zeros(5, np.float32)
    task.build([SplitStep("compute", "i", 2, None)])(a, b, c)
    np.testing.assert_array_equal(c, a - b)


def test_steps_on_a_renamed_stage_replay_in_another_process() -> None:
    code = SCAN_DAG + (
        "import json\nfrom autosched.expr import dag_key\n"
        "from autosched.schedule.steps import steps_to_json\n"
        "s, args = scheduled(10, 20)\n"
        "print(json.dumps([dag_key([args[1]]), steps_to_json(s.steps), str(asc.lower(s, args))]))\n"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "PYTHONHASHSEED": str(seed)},
        )
        for seed in (1, 2)
    ]
    (key1, steps1, ir1), (key2, steps2, ir2) = (json.loads(r.stdout) for r in runs)
    assert key1 == key2 and steps1 == steps2 and ir1 == ir2
    assert {d["stage"] for d in steps1} == {"compute", "compute_1"}
    space = _scan_module()
    X, _, _, res = space["scan_dag"](10, 20)  # type: ignore[operator]
    assert dag_key([res]) == key1
    replayed = Schedule.replay([res], steps_from_json(steps1))
    assert str(asc.lower(replayed, [X, res])) == ir1
    assert steps_to_json(replayed.steps) == steps1


def test_dags_without_a_repeated_name_keep_their_keys() -> None:
    # keys computed on main before operations could share a name (tuning logs hold them)
    key = get_workload("matmul", (64, 64, 64, "float32")).key
    assert key == "matmul(64,64,64,'float32',False)#f3cb52b889c2775f"
    A = asc.placeholder((8, 4), name="A")
    k = asc.reduce_axis(4, name="k")
    B = asc.compute((8,), lambda i: asc.sum(A[i, k] * 2, axis=k), name="B")
    C = asc.compute((8,), lambda i: B[i] + A[i, 0], name="C")
    assert dag_key([C]) == "8d2fa3adb851b6d0"
    renamed = unique_names([C])
    assert renamed.outputs[0] is C and not renamed.ops
    assert asc.create_schedule(C.op).source_outputs[0].op is C.op
