"""The log summaries (``report_table``, ``write_report``) and the ``best`` / ``report`` / ``export``
commands, including every kind of bad input: one error line, exit status 2."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from record_cases import CONV, MATMUL, TARGET, rec, write_log

from autosched.cli import main
from autosched.records import load_records
from autosched.records.report import report_table, summarize, tuning_curve, write_report
from autosched.runner.measure import MeasureErrorNo

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
@pytest.fixture
def log(tmp_path: Path) -> Path:
    """Two registered workloads (with failures; five distinct programs of matmul) and one that is
    not registered here."""
    return write_log(
        tmp_path / "tune.jsonl",
        [
            rec(MATMUL, error=MeasureErrorNo.COMPILE_ERROR, program=1),
            rec(MATMUL, (4e-6, 4e-6, 4e-6), program=2),
            rec(MATMUL, error=MeasureErrorNo.WRONG_ANSWER, program=3),
            rec(MATMUL, (2e-6, 1e-6, 3e-6)),  # median 2 us: 8192 flops -> 4.096 GFLOP/s
            rec(MATMUL, (5e-6,), program=4),
            rec(CONV, (1e-5,)),
            rec(("not_registered_op", (3,)), (1e-3,)),
        ],
    )


def test_summaries_pick_the_best_and_count_errors(log: Path) -> None:
    matmul, conv, other = summarize(load_records(log))
    assert matmul.workload == "matmul(16,16,16,'float32',False)" and matmul.target == TARGET
    assert matmul.best is not None and matmul.best.median == 2e-6
    assert (len(matmul.records), matmul.valid_trials) == (5, 3)
    assert matmul.errors == {"COMPILE_ERROR": 1, "WRONG_ANSWER": 1}
    assert matmul.to_json()["best_gflops"] == pytest.approx(4.096)
    assert conv.flops is not None and conv.flops > 0
    assert other.flops is None and other.to_json()["best_gflops"] is None


def test_table_has_one_row_per_workload(log: Path) -> None:
    lines = report_table(load_records(log)).splitlines()
    assert lines[0].split() == ["workload", "best", "ms", "GFLOP/s", "trials", "valid", "errors", "target"]
    assert len(lines) == 4
    matmul = lines[1].split()
    assert matmul[:5] == ["matmul(16,16,16,'float32',False)", "0.0020", "4.10", "5", "3"]
    assert "COMPILE_ERROR=1, WRONG_ANSWER=1" in lines[1] and lines[1].endswith(TARGET)
    assert lines[3].split()[:6] == ["not_registered_op(3)", "1.0000", "n/a", "1", "1", "-"]


def test_tuning_curve_is_the_best_so_far(log: Path) -> None:
    matmul = summarize(load_records(log))[0]
    trials, wall, curve = tuning_curve(matmul)
    assert trials == [1, 2, 3, 4, 5] and wall == [0.5, 1.0, 1.5, 2.0, 2.5]
    assert math.isnan(curve[0])
    assert curve[1:] == pytest.approx([2.048, 2.048, 4.096, 4.096])


def test_write_report_makes_a_png(log: Path, tmp_path: Path) -> None:
    png = write_report(load_records(log), tmp_path / "curves.png")
    data = png.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 1000


def test_write_report_without_matplotlib_says_what_to_install(
    log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        write_report(load_records(log), tmp_path / "x.png")


# -- the commands


def test_best_prints_each_workload(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["best", str(log)]) == 0
    out = capsys.readouterr().out
    assert f"matmul(16,16,16,'float32',False) on {TARGET}" in out
    assert "best: 0.0020 ms  4.10 GFLOP/s  0 steps" in out and "(3 valid of 5 trials)" in out
    assert "best: 1.0000 ms  n/a GFLOP/s" in out


def test_best_json(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["best", str(log), "--json"]) == 0
    everything = json.loads(capsys.readouterr().out)
    assert [o["workload"].split("(")[0] for o in everything] == ["matmul", "conv2d_nchw", "not_registered_op"]
    assert main(["best", str(log), "--json", "--workload", "matmul", "16", "16"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["best_time_ms"] == pytest.approx(0.002) and one["best_gflops"] == pytest.approx(4.096)
    assert one["trials"] == 5 and one["valid_trials"] == 3 and one["steps"] == 0
    assert one["errors"] == {"COMPILE_ERROR": 1, "WRONG_ANSWER": 1} and one["target"] == TARGET


def test_report_prints_the_table_and_writes_the_png(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = log.with_name("curves.png")
    assert main(["report", str(log), "--out", str(png)]) == 0
    out = capsys.readouterr().out
    assert "COMPILE_ERROR=1, WRONG_ANSWER=1" in out and str(png) in out
    assert png.read_bytes().startswith(PNG_SIGNATURE)
    assert main(["report", str(log)]) == 0  # default: beside the log
    assert log.with_suffix(".png").read_bytes().startswith(PNG_SIGNATURE)


def test_a_truncated_last_line_is_a_warning(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log.write_text(log.read_text() + rec(MATMUL, (1e-7,)).to_line()[:40])
    assert main(["best", str(log), "--workload", "matmul"]) == 0
    captured = capsys.readouterr()
    assert "0.0020 ms" in captured.out
    assert captured.err.startswith("autosched: warning:") and len(captured.err.splitlines()) == 1


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The one line a failed command printed on stderr."""
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "Traceback" not in "\n".join(err)
    assert err[-1].startswith("autosched: error: ")
    return err[-1]


@pytest.mark.parametrize("command", ["best", "export", "report"])
def test_a_missing_log_is_one_error_line(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        command,
        str(tmp_path / "nope.jsonl"),
        *(["--out", str(tmp_path / "o")] if command == "export" else []),
    ]
    assert main(argv) == 2
    assert "nope.jsonl" in error_line(capsys)


def test_a_garbled_line_is_skipped_with_a_warning(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join([lines[0], "this is not json\n", *lines[1:]]))
    assert main(["best", str(log), "--workload", "matmul"]) == 0
    captured = capsys.readouterr()
    assert "(3 valid of 5 trials)" in captured.out
    assert captured.err.startswith("autosched: warning:") and ":2: skipped a bad line" in captured.err


@pytest.mark.parametrize("command", ["best", "report"])
def test_a_corrupt_log_is_one_error_line(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "corrupt.jsonl"
    log.write_text("\x00\x01garbage\n" * 3)
    assert main([command, str(log)]) == 2
    assert "not an autosched tuning log" in error_line(capsys)


def test_an_empty_log_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "empty.jsonl"
    log.write_text("")
    assert main(["best", str(log)]) == 2
    assert "holds no records" in error_line(capsys)


def test_no_valid_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_log(tmp_path / "bad.jsonl", [rec(MATMUL, error=MeasureErrorNo.COMPILE_ERROR)] * 2)
    assert main(["best", str(log)]) == 2
    assert "no valid record" in error_line(capsys)
    assert main(["export", str(log), "--out", str(tmp_path / "o")]) == 2
    assert "no valid record" in error_line(capsys)
    assert not (tmp_path / "o").exists()


def test_export_needs_a_workload_when_the_log_has_several(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", str(log), "--out", str(log.parent / "o")]) == 2
    line = error_line(capsys)
    assert (
        "several workloads" in line
        and "matmul(16,16,16,'float32',False)" in line
        and "not_registered_op" in line
    )
    assert main(["export", str(log), "--out", str(log.parent / "o"), "--workload", "nosuch"]) == 2
    assert "no records of nosuch" in error_line(capsys)
    assert main(["export", str(log), "--out", str(log.parent / "o"), "--workload", "not_registered_op"]) == 2
    assert "unknown workload 'not_registered_op'" in error_line(capsys)


def test_the_command_line_itself_exits_2_without_a_traceback(tmp_path: Path) -> None:
    log = tmp_path / "garbage.jsonl"
    log.write_text('{"v": 1}\n{"v": 1}\n')
    out = subprocess.run(
        [sys.executable, "-m", "autosched", "best", str(log)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("autosched: error: ")
