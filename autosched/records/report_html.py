"""The tuning report as one self-contained HTML page: ``autosched report LOG --html OUT.html``.

    write_html_report(load_records("mlp.jsonl"), "report.html",
                      quality=model_quality("mlp.model.jsonl"), networks=[network])

The page needs nothing but a browser, offline: its style, its SVG charts (:mod:`.charts`) and a
small script (click a column head to sort a table) are inline, and a Content-Security-Policy lets
nothing else load or run. A log is untrusted input: every text read from it (workload names, targets,
error messages) goes through :func:`html.escape`, so it shows as text and never becomes markup.

It shows the tuning curves (best GFLOP/s so far by trials and by wall time), per task its best,
trials, errors and the machine's drift while it was measured (the figures of ``autosched best``:
:class:`~autosched.records.report.Summary`),
the cost model's quality per batch (the ``LOG.model.jsonl`` sidecar), errors by kind, and for a
network (:mod:`.report_network`) the estimated end-to-end latency over trials and its share per task.
Numbers that tests read are in ``data-value`` attributes (exact, ``repr`` of the float) next to the
rounded text.
"""

from __future__ import annotations

import base64
import hashlib
import math
import os
from collections.abc import Iterable, Sequence
from html import escape
from pathlib import Path

from ..diagnostics import format_ms, printable
from ..version import __version__
from .best import BASELINE_MARGIN
from .charts import Line, line_chart, palette
from .log import Record
from .report import QualityEntry, Summary, summarize, tuning_curve
from .report_network import Network, TaskRow, latency, latency_curve, task_rows, untuned_record

__all__ = ["html_report", "write_html_report"]

_STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d2330;
       margin: 24px auto; max-width: 1180px; padding: 0 16px; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px;
     border-bottom: 1px solid #d8dce4; padding-bottom: 4px; }
.meta, .note { color: #59606e; } .note { font-size: 13px; max-width: 900px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { padding: 4px 9px; border-bottom: 1px solid #e6e8ee; text-align: left; vertical-align: top; }
th { background: #f3f5f9; cursor: pointer; user-select: none; white-space: nowrap; }
th[data-order="asc"]::after { content: " \\25B2"; } th[data-order="desc"]::after { content: " \\25BC"; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.name { max-width: 420px; overflow-wrap: anywhere; }
code { white-space: pre-wrap; overflow-wrap: anywhere; }
.swatch { display: inline-block; width: 11px; height: 11px; border-radius: 2px; margin-right: 6px;
          vertical-align: -1px; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; align-items: flex-start; }
svg.chart { width: 560px; max-width: 100%; height: auto; border: 1px solid #e6e8ee; border-radius: 4px; }
svg .grid { stroke: #e9ecf2; } svg text { fill: #3b4252; font-size: 11px; }
svg .chart-title { font-size: 13px; font-weight: 600; }
ul.legend { list-style: none; padding: 0; margin: 0; font-size: 12px; max-width: 360px;
            overflow-wrap: anywhere; } ul.legend li { margin: 2px 0; }
.figure { font-size: 20px; font-weight: 600; }
"""

_SCRIPT = """"use strict";
for (const table of document.querySelectorAll("table.sortable")) {
  const head = table.tHead.rows[0];
  for (const th of head.cells) {
    th.addEventListener("click", () => {
      const col = th.cellIndex, up = th.dataset.order !== "asc";
      for (const other of head.cells) delete other.dataset.order;
      th.dataset.order = up ? "asc" : "desc";
      const key = (row) => {
        const cell = row.cells[col];
        if (!cell) return null;
        return cell.dataset.value !== undefined ? Number(cell.dataset.value) : cell.textContent;
      };
      const body = table.tBodies[0];
      const rows = Array.from(body.rows).sort((a, b) => {
        const x = key(a), y = key(b);
        if (x === null || y === null) return (x === null) - (y === null);
        const d = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        return up ? d : -d;
      });
      for (const row of rows) body.appendChild(row);
    });
  }
}
"""

_DEFINITIONS = (
    "A <b>trial</b> is a distinct program of a task (by its steps): measuring the same program again "
    "(the final re-measurements, a re-timed or resumed run) adds a measurement, not a trial. The "
    "<b>best</b> of a task is the program <code>autosched best</code> names: the lowest median time "
    "among the measurements that count (a re-measured program counts by its re-measurements only; "
    f"where the default schedule was re-measured, another program must beat it by {BASELINE_MARGIN:.0%}), "
    "whose steps replay. The curves show that best after each measurement, so each ends at the "
    "table's best. <b>Untuned</b> is the task's default schedule (the program a network runs without "
    "a tuning record; in a log without one, the task's first program), timed by its re-measurement "
    "where it has one. Speed-up is untuned time / best time. <b>Machine drift</b> is the spread of "
    "the calibration kernel timed beside the measurements (slowest less fastest, as a share of its "
    "median): times measured minutes apart may differ by as much (-: not calibrated)."
)


def _num(value: float | None, text: str, cls: str) -> str:
    """A right-aligned cell showing ``text`` with the exact value in ``data-value``."""
    if value is None or not math.isfinite(value):
        return f'<td class="num {cls}">-</td>'
    return f'<td class="num {cls}" data-value="{value!r}">{escape(text)}</td>'


def _name(text: str, limit: int = 300) -> str:
    return escape(printable(text, limit))


def _message(text: str, lines: int = 12) -> str:
    """An error message for a ``<code>`` cell: its first ``lines`` lines, each made printable."""
    kept = text.splitlines()[:lines]
    more = "\n..." if len(text.splitlines()) > lines else ""
    return escape("\n".join(printable(line, 200) for line in kept) + more)


def _swatch(colour: str) -> str:
    return f'<span class="swatch" style="background:{escape(colour)}"></span>'


def _table(table_id: str, heads: Sequence[str], rows: Iterable[str]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in heads)
    return (f'<table id="{escape(table_id)}" class="sortable"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>')


def _task_table(summaries: Sequence[Summary], colours: dict[int, str]) -> str:
    several = len({s.target for s in summaries}) > 1
    rows = []
    for i, s in enumerate(summaries):
        info = s.to_json()
        untuned = untuned_record(s)
        best, base = info["best_time_ms"], None if untuned is None else untuned.median * 1e3
        speedup = None if best is None or base is None else base / best
        errors = ", ".join(f"{kind} {n}" for kind, n in sorted(s.errors.items())) or "-"
        target = f'<br><span class="meta">on {_name(s.target)}</span>' if several else ""
        rows.append(
            f'<tr id="task-{i}" data-workload-key="{escape(s.records[0].workload_key)}" '
            f'data-target="{escape(s.target)}"><td class="num" data-value="{i}">{i}</td>'
            f'<td class="name">{_swatch(colours[i]) if i in colours else ""}{_name(s.workload)}{target}</td>'
            + _num(s.trials, str(s.trials), "trials") + _num(s.valid_trials, str(s.valid_trials), "valid")
            + _num(len(s.records), str(len(s.records)), "measurements")
            + _num(best, "" if best is None else format_ms(best), "best-ms")
            + _num(info["best_gflops"], f"{info['best_gflops'] or 0:.2f}", "gflops")
            + _num(base, "" if base is None else format_ms(base), "untuned-ms")
            + _num(speedup, f"{speedup or 0:.2f}x", "speedup")
            + f"<td>{escape(errors)}</td>" + _drift_cell(s) + "</tr>"
        )
    heads = ["#", "workload", "trials", "valid", "measurements", "best ms", "GFLOP/s", "untuned ms",
             "speed-up", "failed trials", "machine drift"]
    return _table("tasks", heads, rows)


def _drift_cell(s: Summary) -> str:
    """The task's machine drift: the spread in % (exact in ``data-value``), the fastest and slowest
    calibration figure and their count in the cell's title."""
    d = s.drift
    if d is None:
        return _num(None, "", "drift")
    title = (f"calibration kernel {d.median_s * 1e3:.4g} ms median, {d.low_pct - 100:+.1f}% / "
             f"{d.high_pct - 100:+.1f}% over {d.samples} measurements")
    return (f'<td class="num drift" data-value="{d.spread_pct!r}" data-low="{d.low_pct!r}" '
            f'data-high="{d.high_pct!r}" title="{escape(title)}">{d.spread_pct:.1f}%</td>')


def _curves(summaries: Sequence[Summary], colours: dict[int, str]) -> str:
    by_trial, by_time, legend = [], [], []
    for i, s in enumerate(summaries):
        if i not in colours:
            continue
        trials, wall, gflops = tuning_curve(s)
        label = f"#{i} {printable(s.workload, 120)}"
        by_trial.append(Line(label, colours[i], trials, gflops, s.records[0].workload_key))
        by_time.append(Line(label, colours[i], wall, gflops, s.records[0].workload_key))
        legend.append(f"<li>{_swatch(colours[i])}{escape(label)}</li>")
    missing = [s.workload for i, s in enumerate(summaries) if i not in colours]
    note = ("" if not missing else '<p class="note">Not plotted (FLOP count unknown: workload not '
            f"registered here): {escape(printable('; '.join(missing), 600))}</p>")
    return ('<div class="charts">'
            + line_chart(by_trial, title="Best GFLOP/s so far, by trials",
                         xlabel="trials (distinct programs)", ylabel="GFLOP/s", chart_id="curve-trials")
            + line_chart(by_time, title="Best GFLOP/s so far, by wall time",
                         xlabel="measurement wall time (s)", ylabel="GFLOP/s", chart_id="curve-time")
            + f'<ul class="legend" id="curve-legend">{"".join(legend)}</ul></div>' + note)


def _network(n: int, network: Network, records: Sequence[Record], summaries: Sequence[Summary],
             colours: dict[tuple[str, str], str]) -> str:
    rows = task_rows(network, summaries)
    total = latency(rows)
    trials, curve = latency_curve(records, rows)
    ms = None if total is None else total * 1e3
    figure = (f'<p>Estimated end-to-end latency: <span class="figure" id="network-{n}-latency" '
              f'data-value="{ms!r}">{format_ms(ms)} ms</span></p>' if ms is not None else
              f'<p id="network-{n}-latency">Estimated end-to-end latency: unknown (a task has no valid '
              "program)</p>")
    line = Line(f"{network.name} on {network.target}", "#2b59c3", trials, [c * 1e3 for c in curve])
    chart = line_chart([line], title="Estimated end-to-end latency (ms)", xlabel="trials of all tasks",
                       ylabel="ms", chart_id=f"network-{n}-latency-chart", zero=False)
    table = _table(f"network-{n}-tasks", ["#", "workload", "weight", "trials", "best ms", "weight x best ms",
                                          "share of latency", "untuned ms", "speed-up"],
                   [_network_row(i, r, total, colours.get((r.task.workload_key, network.target)))
                    for i, r in enumerate(rows)])
    head = (f"<h2>Network {_name(network.name, 120)}: {len(rows)} tasks, "
            f"{sum(t.weight for t in network.tasks)} kernels</h2>"
            f'<p class="meta">target {_name(network.target)}; weights from the model (how often each task '
            "runs); latency = sum of weight x best time</p>")
    return f'<section id="network-{n}">{head}{figure}<div class="charts">{chart}</div>{table}</section>'


def _network_row(i: int, row: TaskRow, total: float | None, colour: str | None) -> str:
    s, best, weighted = row.summary, row.best, row.weighted
    share = None if weighted is None or not total else weighted / total
    speedup = row.speedup
    return (
        f'<tr data-workload-key="{escape(row.task.workload_key)}"><td class="num" data-value="{i}">{i}</td>'
        f'<td class="name">{_swatch(colour) if colour else ""}{_name(row.task.workload)}'
        f'{"" if s is not None else " <span class=meta>(no records)</span>"}</td>'
        + _num(row.task.weight, str(row.task.weight), "weight")
        + _num(None if s is None else s.trials, str(0 if s is None else s.trials), "trials")
        + _num(None if best is None else best * 1e3, format_ms((best or 0) * 1e3), "best-ms")
        + _num(None if weighted is None else weighted * 1e3, format_ms((weighted or 0) * 1e3), "weighted-ms")
        + _num(share, f"{(share or 0):.1%}", "share")
        + _num(None if row.untuned is None else row.untuned * 1e3, format_ms((row.untuned or 0) * 1e3),
               "untuned-ms")
        + _num(speedup, f"{speedup or 0:.2f}x", "speedup") + "</tr>"
    )


def _quality(entries: Sequence[QualityEntry], colours: dict[tuple[str, str], str], sidecar: str) -> str:
    if not entries:
        return (f'<p class="note" id="model-quality">No cost-model entries ({escape(sidecar)} is missing or '
                "empty: it is written by model-guided tuning).</p>")
    keys = list(dict.fromkeys(e.workload_key for e in entries))
    spare = dict(zip(keys, palette(len(keys)), strict=True))
    lines = []
    for key in keys:
        mine = [e for e in entries if e.workload_key == key]
        colour = next((c for (k, _), c in colours.items() if k == key), spare[key])
        accuracy = [math.nan if e.pairwise_accuracy is None else e.pairwise_accuracy for e in mine]
        lines.append(Line(printable(mine[0].workload, 120), colour, [e.batch for e in mine], accuracy, key))
    chart = line_chart(lines, title="Pairwise ranking accuracy per batch (before the model saw it)",
                       xlabel="batch", ylabel="accuracy", chart_id="model-quality", step=False)
    rows = [
        f'<tr><td class="num" data-value="{e.batch}">{e.batch}</td><td class="name">{_name(e.workload)}</td>'
        + _num(e.trials, str(e.trials), "trials")
        + _num(e.pairwise_accuracy, f"{e.pairwise_accuracy or 0:.3f}", "accuracy")
        + _num(e.recall_at_k, f"{e.recall_at_k or 0:.3f}", "recall")
        + _num(e.k, str(e.k), "k") + _num(e.fit_seconds or None, f"{e.fit_seconds:.2f}", "fit-s")
        + f"<td>{_name(e.model, 60)}</td></tr>"
        for e in entries
    ]
    table = _table("model-quality-table", ["batch", "workload", "trials", "pairwise acc", "recall@k", "k",
                                           "refit s", "model"], rows)
    note = ('<p class="note">Each batch of measured programs is scored before the model is refit on it: '
            "pairwise accuracy is the share of pairs of programs the model ordered as the measurements "
            "did; recall@k the share of the batch's k fastest among the model's top k.</p>")
    return f'<div class="charts">{chart}</div>{note}{table}'


def _errors(summaries: Sequence[Summary]) -> str:
    rows = []
    for i, s in enumerate(summaries):
        failed = [r for r in s.records if not r.ok]
        for kind in sorted({r.error_no.name for r in failed}):
            mine = [r for r in failed if r.error_no.name == kind]
            message = next((r.error_msg for r in mine if r.error_msg), "")
            rows.append(
                f'<tr data-task="{i}"><td class="num" data-value="{i}">{i}</td><td class="name">'
                f"{_name(s.workload)}</td><td>{escape(kind)}</td>"
                + _num(s.errors.get(kind, 0), str(s.errors.get(kind, 0)), "failed-trials")
                + _num(len(mine), str(len(mine)), "failed-measurements")
                + f"<td><code>{_message(message)}</code></td></tr>"
            )
    if not rows:
        return '<p class="note" id="errors">No measurement failed.</p>'
    note = ('<p class="note">Failed trials: programs with no valid measurement, by the error of their '
            "last one. Failed measurements count every failed line of the log.</p>")
    return note + _table("errors", ["#", "workload", "error", "failed trials", "failed measurements",
                                    "first message"], rows)


def html_report(
    records: Sequence[Record], *, title: str = "tuning log", quality: Sequence[QualityEntry] = (),
    networks: Sequence[Network] = (), sidecar: str = "LOG.model.jsonl",
) -> str:
    """The report page of ``records`` (a log's, in log order) as HTML text: ``quality`` the entries
    of its model-quality sidecar (named ``sidecar`` on the page), ``networks`` the networks whose
    tasks it tuned (see the module docstring)."""
    summaries = summarize(records)
    plotted = [i for i, s in enumerate(summaries) if s.flops is not None]
    colours = dict(zip(plotted, palette(len(plotted)), strict=True))
    by_key = {(summaries[i].records[0].workload_key, summaries[i].target): c for i, c in colours.items()}
    trials = sum(s.trials for s in summaries)
    body = [
        f"<h1>autosched tuning report: {_name(title, 200)}</h1>",
        f'<p class="meta">{len(summaries)} task{"s" * (len(summaries) != 1)}, <span id="total-trials" '
        f'data-value="{trials}">{trials}</span> trials, {len(records)} measurements; autosched '
        f"{escape(__version__)}</p>",
        f'<p class="note">{_DEFINITIONS}</p>',
        "<h2>Tasks</h2>", _task_table(summaries, colours),
        "<h2>Tuning curves</h2>", _curves(summaries, colours),
        *(_network(n, net, records, summaries, by_key) for n, net in enumerate(networks)),
        "<h2>Cost model quality</h2>", _quality(quality, by_key, sidecar),
        "<h2>Errors by kind</h2>", _errors(summaries),
    ]
    digest = base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()
    policy = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{digest}'"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>autosched report: {_name(title, 200)}</title><style>{_STYLE}</style></head>\n"
        f"<body>{''.join(body)}<script>{_SCRIPT}</script></body></html>\n"
    )


def write_html_report(
    records: Sequence[Record], path: str | os.PathLike[str], *, quality: Sequence[QualityEntry] = (),
    networks: Sequence[Network] = (), title: str | None = None, sidecar: str = "LOG.model.jsonl",
) -> Path:
    """Write :func:`html_report` to ``path`` (UTF-8); the path written."""
    out = Path(path)
    out.write_text(html_report(records, title=title or out.stem, quality=quality, networks=networks,
                               sidecar=sidecar), encoding="utf-8")
    return out
