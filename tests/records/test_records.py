"""The tuning log: record round trips, locked concurrent appends, damaged logs, best/distill, build_best."""

from __future__ import annotations

import json
import multiprocessing
import random
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from autosched.records import (
    BASELINE_KEY,
    BASELINE_MARGIN,
    REMEASURE_KEY,
    NoRecordError,
    Record,
    RecordError,
    RecordWarning,
    append_records,
    best_record,
    best_records,
    build_best,
    distill,
    is_baseline,
    is_remeasurement,
    load_records,
    pick_best,
    ranked,
    steps_key,
)
from autosched.records.io import open_log, write_atomic
from autosched.runner.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autosched.schedule.steps import AnnotateStep, CacheReadStep, ReorderStep, SplitStep, Step, steps_to_json
from autosched.space.generated import SketchSpace
from autosched.target import Target
from autosched.task import Task

TARGET = "c -num-threads=1"


def make_record(
    costs: tuple[float, ...] = (1e-3,),
    *,
    key: str = "wl#1",
    target: str = "c -cc=gcc",
    error: MeasureErrorNo = MeasureErrorNo.NO_ERROR,
    steps: tuple[Step, ...] = (SplitStep("C", "i", 8, None),),
    program: dict[str, object] | None = None,
    timestamp: float = 0.0,
) -> Record:
    """A record with made-up workload and target (enough for everything but build_best)."""
    return Record(
        workload=(key.split("#")[0], (1, "float32", False)),
        workload_key=key,
        target=target,
        compiler="gcc (test) 12.2.0",
        steps=steps,
        costs=costs,
        error_no=error,
        error_msg="" if error == MeasureErrorNo.NO_ERROR else "it failed",
        all_cost=0.5,
        timestamp=timestamp,
        version="0.1.0",
        program=program,
    )


def load_quietly(
    path: Path, workload_key: str | None = None, target: str | Target | None = None
) -> list[Record]:
    """load_records that fails the test on any warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return load_records(path, workload_key=workload_key, target=target)


@pytest.fixture(scope="module")
def task() -> Task:
    return Task("matmul", (32, 48, 40), TARGET)


@pytest.fixture(scope="module")
def sampled_steps(task: Task) -> list[tuple[Step, ...]]:
    space = SketchSpace(task.workload, task.target)
    rng = random.Random(0)
    return [space.steps(space.sample(rng)) for _ in range(8)]


# ---------------------------------------------------------------------------------------------
# Records and lines


def test_round_trip_of_a_measured_program(task: Task, sampled_steps: list[tuple[Step, ...]]) -> None:
    for i, steps in enumerate(sampled_steps):
        res = MeasureResult(costs=(1e-5, 2e-5, 4e-5), all_cost=0.7, timestamp=1796000000.5)
        program = {"space": "sketch", "index": i} if i % 2 else None
        rec = Record.from_measure(MeasureInput(task, steps), res, compiler="gcc", program=program)
        line = rec.to_line()
        assert line.endswith("\n") and line.count("\n") == 1
        assert line == json.dumps(rec.to_json(), separators=(",", ":")) + "\n"
        assert list(json.loads(line)) == [
            "v", "autosched", "workload", "workload_key", "target", "compiler", "steps", "costs",
            "error", "error_msg", "all_cost", "timestamp", *(["program"] if program else []),
        ]  # fmt: skip
        back = Record.from_line(line)
        assert back == rec and back.program == program
        assert back.workload_key == task.workload.key and back.target == str(task.target)
        assert Record.from_json(json.loads(line)) == rec
        assert Record.from_line(json.dumps(rec.to_json(), indent=1).replace("\n", " ")) == rec
        assert back.median == 2e-5 and back.ok
        assert back.program_key == steps_key(steps)


def test_round_trip_of_an_empty_program() -> None:
    rec = make_record(steps=())
    assert '"steps":[]' in rec.to_line()
    assert Record.from_line(rec.to_line()) == rec


def test_steps_key_is_the_hash_of_the_sorted_json() -> None:
    import hashlib

    steps = (SplitStep("C", "i", 8, None), ReorderStep("C", ("i.outer", "j", "i.inner")))
    text = json.dumps(steps_to_json(steps), sort_keys=True, separators=(",", ":"))
    assert steps_key(steps) == hashlib.sha1(text.encode()).hexdigest()[:20]
    assert steps_key(steps) != steps_key(steps[::-1])


@pytest.mark.parametrize("name", ['a},{"b', "x}]", 'q"},{"kind":"split', "\\", "é}"])
def test_names_that_look_like_json_survive(name: str) -> None:
    steps = (
        SplitStep(name, "i", 4, None),
        CacheReadStep("B", "local", (name, "C")),
        AnnotateStep(name, f"{name}.inner", "vectorize"),
    )
    program = {"steps": [name], "list": [name], "costs": [{"steps": []}]}  # '],"costs":' again
    rec = make_record(steps=steps, program=program)
    assert Record.from_line(rec.to_line()) == rec
    assert Record.from_line(rec.to_line()).program == program


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("{", "not JSON"),
        ("[1, 2]", "a record is a JSON object"),
        ('{"v": 99}', "unsupported record format version 99"),
        ('{"v": 1, "steps": []}', "malformed record"),
        ('{"v": 1, "steps": [{"kind": "nope"}]}', "unknown schedule step kind"),
    ],
)
def test_bad_lines_raise_record_error(line: str, why: str) -> None:
    with pytest.raises(RecordError, match=why):
        Record.from_line(line)


def test_bad_error_kind_and_steps_are_record_errors() -> None:
    data = make_record().to_json()
    with pytest.raises(RecordError, match="unknown error kind"):
        Record.from_line(json.dumps({**data, "error": "BAD"}))
    with pytest.raises(RecordError, match="lacks field"):
        Record.from_line(json.dumps({**data, "steps": [{"kind": "split", "stage": "C"}]}))


# ---------------------------------------------------------------------------------------------
# Appending and loading


def test_append_then_load_in_order(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    first = [make_record((i * 1e-3,), timestamp=i) for i in range(1, 4)]
    append_records(log, first)
    append_records(log, [make_record((9e-3,), timestamp=9)], fsync=False)
    append_records(log, [])
    assert load_quietly(log) == [*first, make_record((9e-3,), timestamp=9)]
    assert log.read_text().count("\n") == 4


def test_load_filters_by_workload_and_target(tmp_path: Path, task: Task) -> None:
    log = tmp_path / "log.jsonl"
    mine = make_record(key=task.workload.key, target=str(task.target))
    append_records(log, [make_record(key="other#2"), mine, make_record(key=task.workload.key)])
    assert load_quietly(log, workload_key=task.workload.key, target=task.target) == [mine]
    assert load_quietly(log, workload_key=task.workload.key, target=TARGET) == [mine]  # canonicalized
    assert len(load_quietly(log, workload_key=task.workload.key)) == 2
    assert load_quietly(log, workload_key="nothing#0") == []


def test_missing_log(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"tuning log .*nope\.jsonl does not exist"):
        load_records(tmp_path / "nope.jsonl")


def test_empty_log_has_no_records(tmp_path: Path) -> None:
    log = tmp_path / "empty.jsonl"
    log.write_text("")
    assert load_quietly(log) == []
    log.write_text("\n  \n")
    assert load_quietly(log) == []


@pytest.mark.parametrize(
    "content",
    [b"hello world\nthis is a text file\n", b"\x00\xff\xfe binary \x80\n\x01", b'{"v": 2}\n', b"[1, 2, 3]\n"],
)
def test_garbage_file_is_not_a_log(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "garbage.txt"
    path.write_bytes(content)
    with pytest.raises(RecordError, match=r"garbage\.txt is not an autosched tuning log: line 1: "):
        load_records(path)


def test_truncated_last_line_is_skipped_and_appending_goes_on(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    records = [make_record((i * 1e-3,)) for i in range(1, 4)]
    append_records(log, records)
    half = make_record((5e-3,)).to_line()
    with open(log, "a") as f:  # a writer killed mid-line
        f.write(half[: len(half) // 2])
    with pytest.warns(RecordWarning, match=rf"{log}:4: skipped a truncated last line"):
        assert load_records(log) == records

    append_records(log, [make_record((7e-3,))])
    lines = log.read_text().split("\n")
    assert lines[3] == half[: len(half) // 2] and lines[-1] == ""
    with pytest.warns(RecordWarning, match=rf"{log}:4: skipped a bad line: not JSON") as caught:
        assert load_records(log) == [*records, make_record((7e-3,))]
    assert len(caught) == 1


def test_a_log_of_one_truncated_line_is_empty(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(make_record().to_line()[:100])
    with pytest.warns(RecordWarning, match="truncated last line"):
        assert load_records(log) == []


def test_many_bad_lines_warn_a_bounded_number_of_times(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text("garbage\n" * 15 + make_record().to_line())
    with pytest.warns(RecordWarning) as caught:
        assert load_records(log) == [make_record()]
    assert len(caught) == 11
    assert "skipped 5 more bad lines" in str(caught[-1].message)


def _append_many(path: str, writer: int, count: int, start: multiprocessing.synchronize.Event) -> None:
    """One tuning process: ``count`` appends of one record each, long lines to make tearing likely."""
    steps = tuple(SplitStep(f"stage{writer}", f"axis{i}", i + 1, None) for i in range(60))
    start.wait()
    for i in range(count):
        append_records(path, [make_record((1e-3,), steps=steps, program={"writer": writer, "i": i})])


def test_concurrent_appends_never_interleave(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    writers, count = 4, 300
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_append_many, args=(str(log), w, count, start)) for w in range(writers)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    lines = log.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == writers * count + 1
    for line in lines[:-1]:
        json.loads(line)
    records = load_quietly(log)
    for w in range(writers):
        mine = [r.program["i"] for r in records if r.program and r.program["writer"] == w]
        assert mine == list(range(count))
        assert all(s.stage == f"stage{w}" for r in records if r.program["writer"] == w for s in r.steps)


def test_append_waiting_for_an_in_place_rewrite_goes_to_the_new_file(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    append_records(log, [make_record((1e-3,))])
    late = make_record((2e-3,))
    with open_log(log, exclusive=True):
        writer = threading.Thread(target=append_records, args=(log, [late]))
        writer.start()
        time.sleep(0.2)  # the writer now waits for the lock of the file being replaced
        assert writer.is_alive()
        write_atomic(log, make_record((3e-3,)).to_line().encode())
    writer.join(timeout=10)
    assert load_quietly(log) == [make_record((3e-3,)), late]


# ---------------------------------------------------------------------------------------------
# Best records and distill


def _mixed_log() -> list[Record]:
    fail = MeasureErrorNo.COMPILE_ERROR
    return [
        make_record((3e-3, 5e-3, 4e-3), key="a#1", timestamp=1),  # median 4e-3
        make_record((1e-4,), key="a#1", error=fail, timestamp=2),  # failed: never best
        make_record((2e-3,), key="a#1", timestamp=3),  # best of a on gcc
        make_record((2e-3,), key="a#1", timestamp=4),  # a tie: the earlier one wins
        make_record((1e-3,), key="a#1", target="c -cc=clang", timestamp=5),
        make_record((7e-3,), key="b#2", timestamp=6),
        make_record((), key="b#2", timestamp=7),  # no costs: not valid (a bad line in a log)
        make_record((6e-3,), key="b#2", timestamp=8),
        make_record((1e-6,), key="c#3", error=MeasureErrorNo.WRONG_ANSWER, timestamp=9),
    ]


def test_best_records() -> None:
    best = best_records(_mixed_log())
    assert {k: r.timestamp for k, r in best.items()} == {
        ("a#1", "c -cc=gcc"): 3,
        ("a#1", "c -cc=clang"): 5,
        ("b#2", "c -cc=gcc"): 8,
    }


def test_a_re_measured_program_counts_by_its_re_measurement_only() -> None:
    lucky, steady, broken = ((SplitStep("C", "i", f, None),) for f in (2, 4, 8))
    again = {"space": "sketch", REMEASURE_KEY: 10}
    log = [
        make_record((1e-4,), steps=lucky, timestamp=1),  # a lucky trial ...
        make_record((2e-3,), steps=steady, timestamp=2),
        make_record((5e-5,), steps=broken, timestamp=3),
        make_record((3e-3,) * 10, steps=lucky, program=again, timestamp=4),  # ... measured again
        make_record((2.1e-3,) * 10, steps=steady, program=again, timestamp=5),
        make_record((), steps=broken, program=again, error=MeasureErrorNo.RUN_TIMEOUT, timestamp=6),
    ]
    assert [r.timestamp for r in ranked(log)] == [5, 4]
    assert best_records(log, check=None)[("wl#1", "c -cc=gcc")].timestamp == 5
    assert pick_best(log, check=None) is log[4]
    assert [is_remeasurement(r) for r in log] == [False] * 3 + [True] * 3


def test_another_program_must_beat_the_re_measured_baseline_by_the_margin() -> None:
    hand, close, clear = ((SplitStep("C", "i", f, None),) for f in (2, 4, 8))
    again = {"space": "template", REMEASURE_KEY: 10}
    base = make_record((1e-3,) * 10, steps=hand, program={**again, BASELINE_KEY: True}, timestamp=1)
    near = make_record((1e-3 * (1 - BASELINE_MARGIN / 2),) * 10, steps=close, program=again, timestamp=2)
    far = make_record((1e-3 * (1 - 2 * BASELINE_MARGIN),) * 10, steps=clear, program=again, timestamp=3)
    assert is_baseline(base) and not is_baseline(near)
    assert pick_best([base, near], check=None) is base  # faster, but by less than the margin
    assert [r.timestamp for r in ranked([base, near, far])] == [3, 1, 2]
    assert best_records([near, base, far], check=None)[("wl#1", "c -cc=gcc")] is far
    assert pick_best([near], check=None) is near  # no baseline: the lowest median
    other = make_record((1e-3 * 0.99,) * 10, key="b#2", program=again)  # another workload: no margin
    assert best_records([base, other], check=None)[("b#2", "c -cc=gcc")] is other


def test_distill_keeps_the_best_line_of_each_workload_and_target(tmp_path: Path) -> None:
    src, dst = tmp_path / "log.jsonl", tmp_path / "best.jsonl"
    append_records(src, _mixed_log())
    with pytest.warns(RecordWarning, match=r":7: skipped a bad line: a valid measurement \(NO_ERROR\)"):
        assert distill(src, dst) == 3
    assert [r.timestamp for r in load_quietly(dst)] == [3, 5, 8]
    with pytest.warns(RecordWarning):
        assert len(load_records(src)) == 8

    with pytest.warns(RecordWarning):
        assert distill(src, src) == 3  # in place
    assert load_quietly(src) == load_quietly(dst)
    assert distill(src, src) == 3
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_best_record_and_its_errors(tmp_path: Path, task: Task) -> None:
    log = tmp_path / "log.jsonl"
    key, target = task.workload.key, str(task.target)
    failed = make_record((1e-3,), key=key, target=target, error=MeasureErrorNo.RUNTIME_ERROR)
    append_records(log, [make_record(key="other#9"), failed])
    for source, where in ((log, str(log)), (load_quietly(log), "the given records")):
        with pytest.raises(NoRecordError, match=r"no valid record for matmul\(32,48,40") as err:
            best_record(source, task)
        assert isinstance(err.value, LookupError)
        message = str(err.value)
        assert where in message and "RUNTIME_ERROR: 1" in message
        assert "other#9 on c -cc=gcc (1 records, 1 valid)" in message

    mine = [make_record(costs, key=key, target=target) for costs in ((5e-3,), (4e-3,))]
    append_records(log, mine)
    assert best_record(log, task).costs == (4e-3,)
    assert best_record(load_quietly(log), task).costs == (4e-3,)

    empty = tmp_path / "empty.jsonl"
    empty.touch()
    with pytest.raises(NoRecordError, match="it has no records"):
        best_record(empty, task)


@pytest.mark.requires("gcc")
def test_build_best_builds_the_best_program(
    tmp_path: Path, task: Task, sampled_steps: list[tuple[Step, ...]]
) -> None:
    log = tmp_path / "log.jsonl"
    slow, fast = sampled_steps[0], sampled_steps[1]
    append_records(
        log,
        [
            Record.from_measure(MeasureInput(task, slow), MeasureResult(costs=(2e-5,)), compiler="gcc"),
            Record.from_measure(MeasureInput(task, fast), MeasureResult(costs=(1e-5,)), compiler="gcc"),
        ],
    )
    assert best_record(log, task).steps == fast
    kernel = build_best(log, task, cache_dir=tmp_path / "cache")
    inputs = task.workload.random_inputs(0)
    (out,) = [np.zeros(t.shape, dtype=np.float32) for t in task.workload.outputs]
    kernel(*inputs, out)
    np.testing.assert_allclose(out, task.workload.reference(*inputs)[0], rtol=1e-4, atol=1e-4)
    assert list((tmp_path / "cache").glob("*.so"))
