"""The machine's drift as a run and a log state it: the records' calibration figure (an optional
field: older logs load), ``autosched report`` (text and HTML), and the tuning summary
(``TuneResult``, ``autosched tune`` and its ``--json``) of a real run."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from record_cases import CONV, MATMUL, rec, write_log

import autosched as asc
from autosched.cli import main
from autosched.records import Record, is_remeasurement, load_records
from autosched.records.report import drift_table, summarize
from autosched.records.report_html import html_report

FAST = asc.MeasureOption(repeat=2, min_repeat_ms=2)
CALIBRATED = (1e-4, 1.1e-4, 0.9e-4, 1.2e-4)  # median 1.05e-4


def calibrated_log(path: Path) -> Path:
    """Four calibrated measurements of matmul, one uncalibrated one of a convolution (an older
    autosched's, or a board's)."""
    records = [dataclasses.replace(rec(MATMUL, (2e-6,), program=i + 1), calibration=c)
               for i, c in enumerate(CALIBRATED)]
    return write_log(path, [*records, rec(CONV, (1e-5,))])


def test_the_calibration_field_is_optional_and_round_trips(tmp_path: Path) -> None:
    plain = rec(MATMUL, (2e-6,))
    assert "calibration" not in plain.to_line()  # a record without one is written as before
    calibrated = dataclasses.replace(plain, calibration=2.5e-4)
    line = calibrated.to_line()
    assert json.loads(line)["calibration"] == 2.5e-4 and Record.from_line(line) == calibrated
    old = json.loads(plain.to_line())
    assert "calibration" not in old and Record.from_line(json.dumps(old)).calibration == 0.0
    loaded = load_records(calibrated_log(tmp_path / "log.jsonl"))
    assert [r.calibration for r in loaded] == [*CALIBRATED, 0.0]


def test_the_report_states_how_much_the_machine_drifted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = calibrated_log(tmp_path / "log.jsonl")
    matmul, conv = summarize(load_records(log))
    drift = matmul.to_json()["drift"]
    assert drift["samples"] == 4 and drift["median_s"] == pytest.approx(1.05e-4)
    assert (drift["low_pct"], drift["high_pct"]) == pytest.approx((100 * 0.9 / 1.05, 100 * 1.2 / 1.05))
    assert drift["spread_pct"] == pytest.approx(100 * 0.3 / 1.05) and conv.to_json()["drift"] is None
    table = drift_table(load_records(log))
    assert table is not None
    head, row = table.splitlines()
    assert head.split() == ["workload", "calibrated", "median", "ms", "fastest", "slowest", "spread"]
    assert row.split() == [matmul.workload, "4", "0.105", "-14.3%", "+14.3%", "28.6%"]

    assert main(["report", str(log), "--out", str(tmp_path / "c.png")]) == 0
    out = capsys.readouterr().out
    assert "machine drift while measuring" in out and row in out
    plain = write_log(tmp_path / "plain.jsonl", [rec(MATMUL, (2e-6,))])
    assert main(["report", str(plain), "--out", str(tmp_path / "p.png")]) == 0
    assert "machine drift" not in capsys.readouterr().out and drift_table(load_records(plain)) is None


def test_the_html_report_has_a_drift_column(tmp_path: Path) -> None:
    page = html_report(load_records(calibrated_log(tmp_path / "log.jsonl")))
    assert "<th>machine drift</th>" in page
    cells = re.findall(r'<td class="num drift"[^>]*>[^<]*</td>', page)
    assert len(cells) == 2
    spread = re.search(r'data-value="([^"]+)"', cells[0])
    assert spread is not None and float(spread.group(1)) == pytest.approx(100 * 0.3 / 1.05)
    assert cells[0].endswith(">28.6%</td>") and 'title="calibration kernel 0.105 ms median' in cells[0]
    assert cells[1] == '<td class="num drift">-</td>'  # the convolution: not calibrated


@pytest.mark.requires("gcc")
def test_a_tuning_run_states_its_drift(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    task = asc.Task("matmul", (16, 16, 16), target="c -num-threads=1")
    log = tmp_path / "t.jsonl"
    result = asc.tune(task, trials=4, log=log, tuner="random", seed=0, option=FAST, remeasure=2,
                      remeasure_repeat=3, progress=False)
    records = load_records(log)
    trials = [r for r in records if not is_remeasurement(r)]
    again = [r for r in records if is_remeasurement(r)]
    assert len(trials) == 4 and all(r.calibration > 0 for r in records if r.ok)
    assert result.drift is not None and result.drift["samples"] >= 4 + 3 + 1  # trials, then the rounds
    assert result.drift["low_pct"] <= 100 <= result.drift["high_pct"]
    best = next(r for r in again if r.median * 1e3 == result.best_time_ms)
    assert result.best_calibration_ms == best.calibration * 1e3 > 0
    assert main(["tune", "matmul", "16", "16", "16", "--target", "c -num-threads=1", "--trials", "2",
                 "--log", str(tmp_path / "cli.jsonl"), "--tuner", "random", "--repeat", "2",
                 "--min-repeat-ms", "2", "--remeasure", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  drift  : calibration kernel [\d.]+ ms median, [-+][\d.]+% / [-+][\d.]+% "
                     r"\([\d.]+% spread, \d+ samples\)", out, re.M), out
    assert main(["tune", "matmul", "16", "16", "16", "--target", "c -num-threads=1", "--trials", "2",
                 "--log", str(tmp_path / "cli2.jsonl"), "--tuner", "random", "--repeat", "2",
                 "--min-repeat-ms", "2", "--remeasure", "1", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["drift"]["samples"] >= 2 and summary["best_calibration_ms"] > 0
