"""Replay: a schedule's steps, through JSON text and back, rebuild a schedule with identical C.

A tuning log stores only (workload, target, steps); every record must turn back into the same
program. For every hand-written schedule of ``schedule_cases`` and for random legal schedules,
``steps_to_json`` -> ``json.dumps`` -> ``json.loads`` -> ``steps_from_json`` ->
``Schedule.replay`` on freshly created workload tensors emits the same C source.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from random_schedules import DRAWERS
from repro import describe
from schedule_cases import CASES, Case

import autosched as asc
from autosched.schedule import steps as S


def roundtrip(steps: list[asc.Step]) -> tuple[asc.Step, ...]:
    text = json.dumps(asc.steps_to_json(steps))
    return asc.steps_from_json(json.loads(text))


def assert_replays(wl: asc.Workload, s: asc.Schedule, target: str) -> None:
    original = asc.emit(s, wl.tensors(), target=target)
    steps = roundtrip(s.steps)
    assert steps == tuple(s.steps)
    # a fresh Workload object builds fresh tensors: nothing is shared with the original schedule
    fresh = asc.get_workload(wl.name, wl.args)
    replayed = asc.Schedule.replay(fresh.outputs, steps)
    assert list(replayed.steps) == list(s.steps)
    assert list(replayed.stages) == list(s.stages)
    assert asc.emit(replayed, fresh.tensors(), target=target) == original
    # replaying on the same workload's tensors gives the same program too
    again = asc.Schedule.replay(wl.outputs, steps)
    assert asc.emit(again, wl.tensors(), target=target) == original


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hand_written_schedule_replays_identically(case: Case) -> None:
    wl, s = case.schedule()
    assert_replays(wl, s, case.recipe.target)


@pytest.mark.parametrize("case", [c for c in CASES if c.shape_id == "odd"][:40],
                         ids=lambda c: c.id)
def test_portable_source_replays_identically(case: Case) -> None:
    wl, s = case.schedule()
    fresh = asc.get_workload(wl.name, wl.args)
    replayed = asc.Schedule.replay(fresh.outputs, roundtrip(s.steps))
    assert (asc.emit(replayed, fresh.tensors(), portable=True)
            == asc.emit(s, wl.tensors(), portable=True))


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), op=st.sampled_from(sorted(DRAWERS)))
def test_random_schedule_replays_identically(data: st.DataObject, op: str) -> None:
    wl, s, target = DRAWERS[op](data.draw)
    note(describe(s.steps, workload=wl, target=target))
    assert_replays(wl, s, target)


def test_replay_of_a_prefix_is_the_schedule_at_that_point() -> None:
    """Replaying the first n steps gives the C the schedule had after its n-th step."""
    wl = asc.get_workload("matmul", (17, 13, 11))
    A, B, C = wl.tensors()
    s = asc.create_schedule(C)
    seen: list[tuple[int, str]] = []

    def record() -> None:
        seen.append((len(s.steps), asc.emit(s, wl.tensors())))

    record()
    CC = s.cache_write(C, "local")
    record()
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 4)
    record()
    s[CC].compute_at(s[C], jo)
    record()
    s[C].vectorize(ji)
    record()
    s[C].parallel(io)
    record()
    assert [n for n, _ in seen] == [0, 1, 4, 5, 6, 7]
    for n, src in seen:
        fresh = asc.get_workload("matmul", (17, 13, 11))
        replayed = asc.Schedule.replay(fresh.outputs, roundtrip(s.steps[:n]))
        assert asc.emit(replayed, fresh.tensors()) == src, f"after {n} steps"


def test_every_step_kind_roundtrips() -> None:
    """Each registered kind survives JSON, field for field (tuples stay tuples)."""
    examples = [
        S.SplitStep("C", "i", 4, None), S.SplitStep("C", "i", None, 3),
        S.ReorderStep("C", ("j", "i")), S.FuseStep("C", ("i", "j")),
        S.AnnotateStep("C", "i", "parallel"), S.BindStep("C", "i", "blockIdx.x"),
        S.PragmaStep("C", "i", "auto_unroll_max_step", 16), S.ComputeAtStep("B.local", "C", "j"),
        S.ComputeInlineStep("pad"), S.ComputeRootStep("pad"), S.CacheWriteStep("C", "local"),
        S.CacheReadStep("B", "local", ("C", "D")), S.RfactorStep("C", "k.inner", 1),
        S.StorePredicateStep("C", '["cmp", "lt", ["var", "i", "int32"], ["const", 2, "int32"]]'),
        S.StorageAlignStep("B", "i", 16, 1), S.TensorizeStep("C", "j.inner", "gemv16"),
        S.DotLayoutStep("C", 4, 16),
    ]
    assert {type(e).kind for e in examples} == set(asc.Step.registry)
    for e in examples:
        data = json.loads(json.dumps(e.to_json()))
        assert data["kind"] == type(e).kind
        back = asc.Step.from_json(data)
        assert back == e and type(back) is type(e)
        assert hash(back) == hash(e)


@pytest.mark.parametrize("data", [
    {"kind": "untangle", "stage": "C", "axis": "i"},
    {"kind": "", "stage": "C"},
    {"stage": "C", "axis": "i", "factor": 2, "nparts": None},
    {"kind": None},
    {"kind": "split", "stage": "C", "axis": "i", "factor": 2},
    {"kind": "reorder", "stage": "C"},
    {"kind": "compute_at", "stage": "pad", "target": "conv"},
    {"kind": "cache_read", "stage": "B", "scope": "local"},
    {"kind": "rfactor", "axis": "k", "factor_axis": 0},
], ids=["unknown-kind", "empty-kind", "no-kind", "null-kind", "split-no-nparts", "reorder-no-order",
        "compute_at-no-axis", "cache_read-no-readers", "rfactor-no-stage"])
def test_from_json_rejects_bad_records(data: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        asc.Step.from_json(data)


def test_steps_from_json_rejects_a_bad_record_in_a_list() -> None:
    good = asc.steps_to_json([S.SplitStep("C", "i", 4, None)])
    with pytest.raises(ValueError):
        asc.steps_from_json([*good, {"kind": "warp_specialize", "stage": "C"}])


def test_replay_of_illegal_steps_raises_schedule_error() -> None:
    """A record that does not fit the DAG (e.g. from another workload) fails with the step named."""
    wl = asc.get_workload("matmul", (8, 8, 8))
    record = {"kind": "split", "stage": "conv", "axis": "y", "factor": 2, "nparts": None}
    steps = asc.steps_from_json([record])
    with pytest.raises(asc.ScheduleError, match="split"):
        asc.Schedule.replay(wl.outputs, steps)
    steps = asc.steps_from_json([{"kind": "fuse", "stage": "C", "axes": ["i", "k"]}])
    with pytest.raises(asc.ScheduleError, match="fuse"):
        asc.Schedule.replay(wl.outputs, steps)
