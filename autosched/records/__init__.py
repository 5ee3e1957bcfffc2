"""The tuning log and what reads it: JSON lines, one measurement per line, append-only, resumable.

The modules import one way, each only from those listed before it:

    io       low-level I/O: the line format's fast step codec, locked appends, snapshots, atomic
             replaces, scanning a file into records (RecordError, RecordWarning)
    check    checks of what a line says (a log is untrusted input): types, costs, target, workload
    log      Record, append_records, load_records
    best     which record wins (re-measurements supersede trials), distill, load_best
    charts   inline SVG line charts and a palette of distinct colours
    report   summaries of a log: the table of best programs and errors, tuning curves as a PNG
    report_network  a network's latency, weights and speed-ups from its log (weights from its model)
    report_html     the report as one self-contained HTML page

The log's public names are importable from here (``from autosched.records import Record,
load_records``); ``report`` is imported by name (``autosched.records.report``). Writing a record
out as C (a kernel, a network) is :mod:`autosched.export`'s work, one floor up.
"""

from __future__ import annotations

from .best import (
    BASELINE_KEY,
    BASELINE_MARGIN,
    REMEASURE_KEY,
    NoRecordError,
    best_record,
    best_records,
    build_best,
    distill,
    is_baseline,
    is_remeasurement,
    pick_best,
    ranked,
)
from .log import (
    FORMAT_VERSION,
    Record,
    RecordError,
    RecordWarning,
    append_records,
    load_records,
    steps_key,
)

__all__ = [
    "BASELINE_KEY",
    "BASELINE_MARGIN",
    "FORMAT_VERSION",
    "REMEASURE_KEY",
    "NoRecordError",
    "Record",
    "RecordError",
    "RecordWarning",
    "append_records",
    "best_record",
    "best_records",
    "distill",
    "is_baseline",
    "is_remeasurement",
    "build_best",
    "load_records",
    "pick_best",
    "ranked",
    "steps_key",
]
