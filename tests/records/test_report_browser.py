"""``autosched report LOG --html``, opened in a real headless Chromium (driven by Selenium): logs
of a real operator tuning and a real network tuning, the numbers on the page read from the DOM and
compared with ``autosched best --json``, no JavaScript error in the console, hostile names shown as
text, and a screenshot that is a real picture."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs onnx (pip install onnx)")

import graph_models as gm  # noqa: E402  (needs onnx)

import autosched as asc  # noqa: E402
from autosched.cli import main  # noqa: E402
from autosched.graph import extract_tasks  # noqa: E402
from autosched.records import Record, append_records, is_baseline, is_remeasurement, load_records  # noqa: E402
from autosched.runner.measure import MeasureErrorNo  # noqa: E402

pytestmark = pytest.mark.requires("gcc", "chromium")

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WINDOW = (1280, 1000)
EVIL = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium through /usr/bin/chromedriver (no Selenium Manager), console logged."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    with tempfile.TemporaryDirectory(prefix="asc-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for flag in [*FLAGS, f"--user-data-dir={profile}"]:
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        try:
            driver.set_window_size(*WINDOW)
            yield driver
        finally:
            driver.quit()


@pytest.fixture(scope="module")
def op_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real tuning log: matmul 64x64x64, 16 trials, then the final re-measurements."""
    log = tmp_path_factory.mktemp("op") / "matmul.jsonl"
    asc.tune(asc.Task("matmul", (64, 64, 64), target="c"), trials=16, log=str(log), seed=0)
    return log


@pytest.fixture(scope="module")
def small_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real tuning log of two trials (a small matmul): records to rename and break."""
    log = tmp_path_factory.mktemp("small") / "matmul.jsonl"
    asc.tune(asc.Task("matmul", (8, 8, 8), target="c"), trials=2, log=str(log), seed=0)
    return log


@pytest.fixture(scope="module")
def net_log(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A real network tuning log of a small MLP (two layers of the same shape: a task that runs
    twice) and the model."""
    folder = tmp_path_factory.mktemp("net")
    model = folder / "mlp.onnx"
    onnx.save(gm.mlp(batch=2, dims=(8, 16, 16, 16, 4)), model)
    log = folder / "mlp.jsonl"
    asc.tune_network(asc.from_onnx(str(model)), trials=10, log=log, round_trials=2)
    return log, model


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def best_json(log: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    shown = json.loads(run_cli(["best", str(log), "--json"], capsys))
    return shown if isinstance(shown, list) else [shown]


def open_page(driver: Any, page: Path) -> None:
    """Load ``page`` and check the console has no error (severe entry) for it."""
    driver.get_log("browser")  # drop what an earlier page logged
    driver.get(page.as_uri())
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe


def value(driver: Any, css: str) -> float:
    """The ``data-value`` of the element ``css`` selects, as a float."""
    from selenium.webdriver.common.by import By

    return float(driver.find_element(By.CSS_SELECTOR, css).get_attribute("data-value"))


def test_operator_page_shows_what_best_says(
    browser: Any, op_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from selenium.webdriver.common.by import By

    page = tmp_path / "op.html"
    run_cli(["report", str(op_log), "--html", str(page)], capsys)
    (best,) = best_json(op_log, capsys)
    records = load_records(op_log)
    programs = {r.program_key for r in records}
    assert any(is_remeasurement(r) for r in records) and len(programs) < len(records)
    open_page(browser, page)
    assert value(browser, "#task-0 td.best-ms") == best["best_time_ms"]
    assert value(browser, "#task-0 td.gflops") == best["best_gflops"]
    assert value(browser, "#task-0 td.trials") == best["trials"] == len(programs) == 16
    assert value(browser, "#task-0 td.valid") == best["valid_trials"]
    assert value(browser, "#task-0 td.measurements") == len(records)
    for chart in ("curve-trials", "curve-time"):  # each curve ends at the table's best
        line = f'#{chart} polyline[data-key="{records[0].workload_key}"]'
        last = browser.find_element(By.CSS_SELECTOR, line).get_attribute("data-last")
        assert float(last) == best["best_gflops"]
    rows = browser.find_elements(By.CSS_SELECTOR, "#model-quality-table tbody tr")
    sidecar = op_log.with_name("matmul.model.jsonl").read_text().splitlines()
    assert len(rows) == len(sidecar) >= 1


def test_network_page_shows_latency_weights_and_speedups(
    browser: Any, net_log: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from selenium.webdriver.common.by import By

    log, model = net_log
    page = tmp_path / "net.html"
    run_cli(["report", str(log), "--html", str(page), "--model", str(model)], capsys)
    best = {b["workload"]: b for b in best_json(log, capsys)}
    records = load_records(log)
    target = records[0].target
    weights = {str(t.workload): t.weight for t in extract_tasks(asc.from_onnx(str(model)), target)}
    assert max(weights.values()) > 1 and set(weights) == set(best)  # a task that runs twice
    open_page(browser, page)
    expected = sum(weights[w] * b["best_time_ms"] for w, b in best.items())
    assert value(browser, "#network-0-latency") == pytest.approx(expected, rel=1e-12)
    chart = browser.find_element(By.CSS_SELECTOR, "#network-0-latency-chart polyline")
    assert float(chart.get_attribute("data-last")) == pytest.approx(expected)
    shares = 0.0
    for row in browser.find_elements(By.CSS_SELECTOR, "#network-0-tasks tbody tr"):
        key = row.get_attribute("data-workload-key")
        name = key.split("#", 1)[0]
        cell = {c: float(row.find_element(By.CSS_SELECTOR, f"td.{c}").get_attribute("data-value"))
                for c in ("weight", "trials", "best-ms", "share", "untuned-ms", "speedup")}
        mine = [r for r in records if r.workload_key == key]
        base = next(r for r in mine if is_baseline(r))  # tune_network re-measures each default schedule
        assert cell["weight"] == weights[name] and cell["best-ms"] == best[name]["best_time_ms"]
        assert cell["trials"] == best[name]["trials"] == len({r.program_key for r in mine})
        assert cell["untuned-ms"] == base.median * 1e3
        assert cell["speedup"] == pytest.approx(base.median * 1e3 / cell["best-ms"], rel=1e-12)
        shares += cell["share"]
    assert shares == pytest.approx(1.0)
    # the inline script runs: a click on a column head sorts the table by it
    heads = browser.find_elements(By.CSS_SELECTOR, "#network-0-tasks thead th")
    next(h for h in heads if h.text.startswith("best ms")).click()
    shown = [float(c.get_attribute("data-value")) for c in
             browser.find_elements(By.CSS_SELECTOR, "#network-0-tasks tbody td.best-ms")]
    assert shown == sorted(shown) and len(shown) == len(weights)
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def test_hostile_names_are_text(
    browser: Any, small_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    log = tmp_path / "evil.jsonl"
    log.write_bytes(small_log.read_bytes())
    first: Record = load_records(small_log)[0]
    evil = dataclasses.replace(first, workload=(EVIL, (1,)), workload_key=f"{EVIL}#0", costs=(),
                               error_no=MeasureErrorNo.RUNTIME_ERROR,
                               error_msg='<img src=x onerror="alert(2)">')
    append_records(log, [evil])
    page = tmp_path / "evil.html"
    run_cli(["report", str(log), "--html", str(page)], capsys)
    open_page(browser, page)
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018
    assert browser.execute_script("return document.scripts.length") == 1
    assert browser.find_elements(By.TAG_NAME, "img") == []
    assert EVIL in browser.find_element(By.ID, "task-1").text
    assert '<img src=x onerror="alert(2)">' in browser.find_element(By.ID, "errors").text


def test_screenshot_is_a_real_picture(
    browser: Any, net_log: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from PIL import Image

    log, model = net_log
    page = tmp_path / "shot.html"
    run_cli(["report", str(log), "--html", str(page), "--model", str(model)], capsys)
    open_page(browser, page)
    shot = tmp_path / "report.png"
    assert browser.save_screenshot(str(shot))
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    width, height, ratio = browser.execute_script(
        "return [window.innerWidth, window.innerHeight, window.devicePixelRatio]")
    image = Image.open(io.BytesIO(data))
    assert image.size == (round(width * ratio), round(height * ratio))
    assert 0 < width <= WINDOW[0] and 0 < height <= WINDOW[1]
    pixels = np.asarray(image.convert("L"), dtype=np.float64)
    inked = float((pixels < 200).mean())  # text, lines, swatches on a white page
    assert pixels.std() > 20 and 0.01 < inked < 0.6 and math.isfinite(inked), (pixels.std(), inked)
    print(f"screenshot: {shot}", file=sys.stderr)
