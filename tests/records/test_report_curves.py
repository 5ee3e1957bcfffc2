"""The report's figures agree with ``autosched best``: trials are distinct programs (a re-measurement
is no trial), a tuning curve's best so far is :func:`pick_best` of the log up to there (so it ends at
the table's best), the PNG's series end at the table's GFLOP/s in distinct colours, and the HTML
page escapes what it reads from a log. (The page in a real browser: tests/records/test_report_browser.py.)"""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path
from typing import Any

import pytest

from autosched.cli import main
from autosched.ops import Workload
from autosched.records import BASELINE_KEY, REMEASURE_KEY, Record, load_records, pick_best
from autosched.records.best import MAX_TRIES, best_so_far
from autosched.records.charts import palette, ticks
from autosched.records.report import plotted_series, report_table, summarize, tuning_curve, write_report
from autosched.records.report_html import html_report
from autosched.records.report_network import ModelTask, Network, latency, latency_curve, task_rows
from autosched.runner.measure import MeasureErrorNo
from autosched.schedule.steps import SplitStep

TARGET = "c -cc=gcc -num-threads=1"
MATMUL = ("matmul", (16, 16, 16, "float32", False))


def rec(
    program: int, median: float | None, *, again: bool = False, baseline: bool = False, default: bool = False,
    bad: bool = False, workload: tuple[str, tuple[Any, ...]] = MATMUL, t: float = 0.0, message: str = "",
) -> Record:
    """A measurement of program ``program`` of ``workload`` (0: no steps; n: C's axis i split by n;
    ``bad``: a split of an axis C lacks, which does not replay); ``median`` None: a failed run;
    ``again``: a final re-measurement (``baseline``: of the default schedule)."""
    name, args = workload
    steps = (SplitStep("C", "nope" if bad else "i", program, None),) if program else ()
    info: dict[str, object] = {"space": "default"} if default else {"space": "sketch"}
    if again:
        info[REMEASURE_KEY] = 10
        if baseline:
            info[BASELINE_KEY] = True
    key = Workload(name, args).key if name == "matmul" else f"{name}(1)#0"
    return Record(workload, key, TARGET, "gcc", steps, () if median is None else (median,),
                  MeasureErrorNo.NO_ERROR if median is not None else MeasureErrorNo.RUNTIME_ERROR, message,
                  0.25, 1.8e9 + t, "0.1.0", info)


def quiet_best(records: list[Record]) -> Record | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pick_best(records)


def assert_prefixes(records: list[Record]) -> None:
    so_far = best_so_far(records)
    assert len(so_far) == len(records)
    for i in range(len(records)):
        assert so_far[i] is quiet_best(records[: i + 1]), i


def test_best_so_far_is_pick_best_of_every_prefix() -> None:
    log = [
        rec(0, 4e-6, default=True),
        rec(2, None),
        rec(4, 1e-6),  # a lucky trial ...
        rec(8, 3e-6),
        rec(16, 5e-7, bad=True),  # the fastest, but it does not replay
        rec(4, 3.5e-6, again=True),  # ... re-measured slower: its trial no longer counts
        rec(8, 3.1e-6, again=True),
        rec(0, 3.2e-6, again=True, baseline=True),  # 8 must now beat it by the margin: it does not
        rec(4, 1e-7),  # a re-timed run of a re-measured program: its re-measurement still counts
    ]
    assert_prefixes(log)
    assert best_so_far(log)[-1] is log[7]  # the default schedule, by the margin


def test_best_so_far_gives_up_like_pick_best_when_the_best_programs_do_not_replay() -> None:
    log = [rec(k, 1e-6 * k, bad=True) for k in range(1, MAX_TRIES + 3)]
    log += [rec(100, 2e-6), rec(200, 2e-7), rec(300, 5e-8, bad=True), rec(400, 1e-8)]
    assert_prefixes(log)


@pytest.mark.parametrize("seed", range(6))
def test_best_so_far_on_random_logs(seed: int) -> None:
    rng = random.Random(seed)
    log = []
    for i in range(60):
        program = rng.randrange(1, 16)
        again = rng.random() < 0.2
        median = None if rng.random() < 0.15 else rng.choice([1e-6, 2e-6, 3e-6]) * rng.uniform(0.9, 1.1)
        log.append(rec(program, median, again=again, baseline=again and program == 1, bad=program > 12, t=i))
    assert_prefixes(log)


def test_re_measurements_are_no_trials_and_the_curve_ends_at_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [rec(0, 4e-6, default=True), rec(2, 1e-6), rec(4, None), rec(8, 2e-6),
               rec(2, 3e-6, again=True), rec(8, 2.1e-6, again=True), rec(8, 1.9e-6)]
    (s,) = summarize(records)
    assert (s.trials, s.valid_trials, s.errors, len(s.records)) == (4, 3, {"RUNTIME_ERROR": 1}, 7)
    trials, wall, gflops = tuning_curve(s)
    assert trials == [1, 2, 3, 4, 4, 4, 4] and wall == pytest.approx([0.25 * k for k in range(1, 8)])
    assert s.best is records[5] and gflops[-1] == s.gflops(records[5].median) == s.to_json()["best_gflops"]
    assert gflops[1] == s.gflops(1e-6)  # the lucky trial was the best until its re-measurement
    log = tmp_path / "t.jsonl"
    log.write_text("".join(r.to_line() for r in records))
    assert main(["best", str(log), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["trials"], shown["valid_trials"], shown["measurements"]) == (4, 3, 7)
    assert shown["best_time_ms"] == 2.1e-3 and shown["best_gflops"] == gflops[-1]
    assert report_table(records).splitlines()[1].split()[1:5] == ["0.0021", f"{gflops[-1]:.2f}", "4", "3"]


def test_png_series_end_at_the_table_in_distinct_colours(tmp_path: Path) -> None:
    workloads = [("matmul", (16 + k, 16, 16, "float32", False)) for k in range(18)]
    records = []
    for k, wl in enumerate(workloads):
        records += [rec(0, 5e-6, workload=wl), rec(2, 2e-6 + k * 1e-8, workload=wl),
                    rec(2, 3e-6, workload=wl, again=True), rec(0, 4e-6, workload=wl, again=True)]
    series = plotted_series(records)
    table = {s.workload: s.to_json()["best_gflops"] for s in summarize(records)}
    assert len(series) == 18 and len({s.colour for s in series}) == 18
    for line, (name, best) in zip(series, table.items(), strict=True):
        assert line.label == f"#{series.index(line)} {name}" and line.gflops[-1] == best
        assert line.trials[-1] == 2  # two programs, four measurements
    png = write_report(records, tmp_path / "many.png")
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_palette_and_ticks() -> None:
    for n in range(1, 120):
        colours = palette(n)
        assert len(set(colours)) == n and all(len(c) == 7 and c.startswith("#") for c in colours)
    assert ticks(0.0, 185.8) == [0.0, 50.0, 100.0, 150.0, 200.0]
    assert ticks(7, 12, integer=True) == [7, 8, 9, 10, 11, 12] and ticks(2, 2, integer=True) == [2, 3]


def test_network_latency_is_weighted_best_and_its_curve_ends_there() -> None:
    a, b = MATMUL, ("matmul", (8, 8, 8, "float32", False))
    records = [rec(0, 4e-6, workload=a, default=True), rec(0, 2e-6, workload=b, default=True),
               rec(2, 1e-6, workload=a), rec(2, 1.5e-6, workload=b),
               rec(2, 1.2e-6, workload=a, again=True), rec(0, 4.2e-6, workload=a, again=True, baseline=True)]
    summaries = summarize(records)
    key_a, key_b = (s.records[0].workload_key for s in summaries)
    net = Network("net", TARGET, (ModelTask(key_a, "a", 3), ModelTask(key_b, "b", 1),
                                  ModelTask("other#0", "missing", 1)))
    rows = task_rows(net, summaries)
    assert rows[2].summary is None and latency(rows) is None
    rows = rows[:2]
    assert latency(rows) == 3 * 1.2e-6 + 1.5e-6
    assert rows[0].untuned == 4.2e-6 and rows[0].speedup == 4.2e-6 / 1.2e-6  # the baseline's re-measurement
    assert rows[1].untuned == 2e-6  # its default's trial: it has no re-measurement
    trials, curve = latency_curve(records, rows)
    assert trials == [1, 2, 3, 4, 4, 4] and curve[-1] == latency(rows) and curve[2] == 3 * 1e-6 + 2e-6


def test_html_escapes_what_the_log_says() -> None:
    evil = ("<script>alert(1)</script>", (1,))
    records = [rec(0, 1e-6), rec(0, None, workload=evil, message='<img src=x onerror="alert(2)">')]
    page = html_report(records, title="<b>log</b>")
    assert page.count("<script") == 1 and "<img" not in page and "<b>log</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=&quot;alert(2)&quot;&gt;" in page
    assert "Content-Security-Policy" in page  # and nothing to fetch: the only URL is SVG's namespace
    assert "://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_report_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "t.jsonl"
    log.write_text("".join(r.to_line() for r in [rec(0, 1e-6), rec(2, 2e-6)]))
    assert main(["report", str(log), "--model", "m.onnx"]) == 2
    assert "--model gives the network's task weights to the HTML report" in capsys.readouterr().err
    assert main(["report", str(log), "--html", str(tmp_path / "r.html")]) == 0
    assert (tmp_path / "r.html").is_file() and not log.with_suffix(".png").exists()
    assert str(tmp_path / "r.html") in capsys.readouterr().out
    assert load_records(log)  # the log is untouched


def test_a_model_whose_tasks_the_log_lacks_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")
    import graph_models as gm

    model = tmp_path / "mlp.onnx"
    onnx.save(gm.mlp(batch=2, dims=(8, 16, 4)), model)
    log = tmp_path / "t.jsonl"
    log.write_text(rec(0, 1e-6).to_line())
    assert main(["report", str(log), "--html", str(tmp_path / "r.html"), "--model", str(model)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"autosched: error: {log} has no records of the ")
    assert f"tasks of {model}" in err[0] and not (tmp_path / "r.html").exists()
