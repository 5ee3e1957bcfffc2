"""Records carry the machine they were measured on; an explicit log's records from another CPU are
never applied to this one (the tuning database keeps machines apart by directory)."""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import pytest

import autosched as asc
from autosched.database.apply import this_machine
from autosched.database.machine import fingerprint_for
from autosched.records import NoRecordError, Record, append_records, load_records

pytestmark = pytest.mark.requires("gcc")

TASK = asc.Task("relu", (16, 16), target="c -num-threads=1")
OTHER = "x86_64-000000000000"


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> list[Record]:
    log = tmp_path_factory.mktemp("tuned") / "relu.jsonl"
    asc.tune(TASK, trials=3, log=log, option=asc.MeasureOption(repeat=1, min_repeat_ms=1.0))
    return load_records(log)


def test_tuning_records_this_machine(tuned: list[Record]) -> None:
    assert {r.machine for r in tuned} == {fingerprint_for(TASK.target)}


def _log(tmp_path: Path, records: list[Record]) -> Path:
    path = tmp_path / "shared.jsonl"
    append_records(path, records)
    return path


def test_records_of_another_machine_are_not_applied(tmp_path: Path, tuned: list[Record]) -> None:
    log = _log(tmp_path, [dataclasses.replace(r, machine=OTHER) for r in tuned])
    with (
        pytest.warns(asc.AutoschedWarning, match=f"measured on another machine \\({OTHER}"),
        pytest.raises(NoRecordError, match="measured on this machine"),
    ):
        asc.load_best(log, TASK)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asc.compile(TASK, log=log, db=False)  # the default schedule, not the foreign record
    kinds = {w.category for w in caught}
    assert asc.NotTunedWarning in kinds and asc.AutoschedWarning in kinds, caught


def test_records_without_a_machine_and_of_this_one_are_applied(tmp_path: Path, tuned: list[Record]) -> None:
    older = [dataclasses.replace(r, machine="") for r in tuned]
    # 10x "faster" (a 16x16 relu runs in ~10-50 ns: 100x faster would fall below a call's shortest
    # plausible time, 1e-10 s, and be rejected as implausible, without the warning asked for here)
    foreign = [dataclasses.replace(r, machine=OTHER, costs=tuple(c / 10 for c in r.costs)) for r in tuned]
    log = _log(tmp_path, older + foreign)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asc.load_best(log, TASK)  # the foreign records are 10x "faster" but not used
    assert any("another machine" in str(w.message) for w in caught)
    assert not [w for w in caught if issubclass(w.category, asc.NotTunedWarning)]


def test_a_malformed_machine_field_skips_the_record(tmp_path: Path, tuned: list[Record]) -> None:
    line = json.loads(tuned[0].to_line())
    line["machine"] = "$(reboot)\n"
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(line) + "\n" + tuned[1].to_line())
    with pytest.warns(asc.AutoschedWarning, match="machine must be a fingerprint"):
        assert len(load_records(path)) == 1


def test_a_cross_targets_records_come_from_the_boards_that_measured_them(tuned: list[Record]) -> None:
    cross = asc.Task("relu", (16, 16), target="c -cc=aarch64-linux-gnu-gcc -num-threads=1")
    boards = ("aarch64-aaaaaaaaaaaa", "aarch64-bbbbbbbbbbbb")
    target = str(cross.target)
    logged = [dataclasses.replace(r, target=target, machine=boards[i % 2]) for i, r in enumerate(tuned)]
    with pytest.warns(asc.AutoschedWarning, match="measured on 2 machines .*pass machine= to choose one"):
        assert this_machine(logged, cross) == logged  # the target names the hardware: every board's
    with pytest.warns(asc.AutoschedWarning, match="asked for aarch64-aaaaaaaaaaaa"):
        assert this_machine(logged, cross, boards[0]) == logged[::2]
    with pytest.raises(ValueError, match="machine must be a fingerprint"):
        this_machine(logged, cross, "rpi4; rm -rf /")
