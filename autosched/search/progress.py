"""Counters of a tuning run, the progress bar drawn from them, and the model-quality sidecar.

Whether a run shows progress at all is :func:`show_progress`'s choice: by default on a terminal
and in a notebook, never into a pipe or a file.

With a cost model, the bar also shows how well the model ranked the last batch before it was
trained on it (pairwise accuracy, recall@k), and :class:`QualityLog` appends the same figures to
``LOG.model.jsonl`` next to the tuning log (one JSON object per refit).
"""

from __future__ import annotations

import collections
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..records.io import open_for_append, write_all
from ..runner.measure import MeasureErrorNo, MeasureResult

if TYPE_CHECKING:
    from .tuner import Tuner
    from .tuning_space import Candidate


class TuneStats:
    """Valid and failed measurements (earlier runs included) and where this run's time went."""

    def __init__(self, flops: int) -> None:
        self.flops = flops
        self.valid = 0
        self.errors: collections.Counter[str] = collections.Counter()
        self.build_time = 0.0
        self.run_time = 0.0
        self.calibrations: list[float] = []  # this run's calibration figures (seconds per call)

    def add(self, error_no: MeasureErrorNo) -> None:
        """Count one measurement."""
        if error_no == MeasureErrorNo.NO_ERROR:
            self.valid += 1
        else:
            self.errors[error_no.name] += 1


def _figure(value: float | None) -> str:
    return "-" if value is None or value != value else f"{value:.2f}"


def model_text(tuner: Tuner) -> str:
    """``  model acc 0.81 r@4 0.50`` for the model's last scored batch; "" without a model."""
    if tuner.learner is None:
        return ""
    scored = [q for q in tuner.model_quality if q.pairwise_accuracy is not None]
    if not scored:
        return "  model -"
    q = scored[-1]
    return f"  model acc {_figure(q.pairwise_accuracy)} r@{q.k} {_figure(q.recall_at_k)}"


class QualityLog:
    """A tuner callback: appends each new :class:`~autosched.search.learning.ModelQuality` of the
    tuner to the sidecar ``path`` (JSON lines), with the task, tuner and model named. Batch indices
    continue those of earlier runs of the task in the file."""

    def __init__(self, path: Path, meta: dict[str, Any]) -> None:
        self.path, self.meta = path, meta
        self.written = 0
        self.offset = 0
        if path.exists():
            for line in path.read_text(errors="replace").splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict) and entry.get("workload_key") == meta.get("workload_key"):
                    self.offset = max(self.offset, int(entry.get("batch", -1)) + 1)

    def __call__(
        self, tuner: Tuner, candidates: Sequence[Candidate], results: Sequence[MeasureResult]
    ) -> None:
        fresh = tuner.model_quality[self.written :]
        if not fresh:
            return
        lines = []
        for q in fresh:
            entry = {**q.to_json(), **self.meta, "timestamp": time.time()}
            entry["batch"] = q.batch + self.offset
            lines.append(json.dumps(entry) + "\n")
        fd = open_for_append(self.path)  # one locked write: runs in threads of one process never interleave
        try:
            write_all(fd, "".join(lines).encode())
        finally:
            os.close(fd)
        self.written += len(fresh)


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (ipykernel) running a notebook's cells."""
    ipython = sys.modules.get("IPython")
    get_ipython = getattr(ipython, "get_ipython", None)
    shell = get_ipython() if get_ipython is not None else None
    return getattr(shell, "kernel", None) is not None


def show_progress(progress: bool | None, stream: TextIO | None = None) -> bool:
    """Whether a run draws its progress: ``progress`` when given (True or False); None (the
    default of :func:`autosched.tune` and :func:`autosched.tune_network`): when ``stream``
    (stderr) is a terminal or the run is in a notebook, so that scripts, pipes and logs stay quiet."""
    if progress is not None:
        return bool(progress)
    stream = stream if stream is not None else sys.stderr
    try:
        tty = bool(stream.isatty())
    except (AttributeError, ValueError):  # no stream (pythonw), or a closed one
        tty = False
    return tty or in_notebook()


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def timing_text(elapsed: float, done: int, total: int, first: int = 0) -> str:
    """``elapsed H:MM:SS  ETA H:MM:SS``: ``elapsed`` seconds into a run now at ``done`` trials of
    ``total``, of which ``first`` were done before it started (resumed from a log); the ETA goes
    by this run's rate so far (``?`` before there is one)."""
    rate = (done - first) / elapsed if elapsed > 0 else 0.0
    eta = _clock(max(0, total - done) / rate) if rate > 0 else "?"
    return f"elapsed {_clock(elapsed)}  ETA {eta}"


class ProgressBar:
    """A tuner callback: trials done/total, best GFLOP/s so far, errors, elapsed time and ETA.

    On a terminal the line is redrawn in place; otherwise one line per batch is printed.
    """

    WIDTH = 24

    def __init__(self, total: int, stats: TuneStats, stream: TextIO | None = None) -> None:
        self.total = total
        self.stats = stats
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.start = time.monotonic()
        self.first_trial: int | None = None
        self.last = ""

    def __call__(
        self, tuner: Tuner, candidates: Sequence[Candidate], results: Sequence[MeasureResult]
    ) -> None:
        done = tuner.trials
        if self.first_trial is None:
            self.first_trial = done - len(results)
        timing = timing_text(time.monotonic() - self.start, done, self.total, self.first_trial)
        filled = self.WIDTH * min(done, self.total) // max(1, self.total)
        best = (
            f"{self.stats.flops / tuner.best_cost / 1e9:8.2f} GFLOP/s"
            if tuner.best_candidate is not None and self.stats.flops
            else "       - GFLOP/s"
        )
        errors = sum(self.stats.errors.values())
        self.last = (
            f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {done:>{len(str(self.total))}}/{self.total}"
            f"  best {best}  errors {errors}{model_text(tuner)}  {timing}"
        )
        self.stream.write(("\r" + self.last) if self.tty else self.last + "\n")
        self.stream.flush()

    def finish(self, reason: str) -> None:
        """End the bar with why tuning stopped."""
        if self.tty and self.last:
            self.stream.write("\n")
        if reason:
            self.stream.write(f"stopped: {reason}\n")
        self.stream.flush()
