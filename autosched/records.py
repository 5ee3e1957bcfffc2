"""The tuning log: JSON lines, one measurement per line, append-only, resumable.

One line (keys in this order)::

    {"v": 1, "autosched": "0.1.0", "workload": ["matmul", [64, 64, 64, "float32", false]],
     "workload_key": "matmul(64,64,64,'float32',False)#3f2a...", "target": "c -cc=gcc ...",
     "compiler": "gcc (Debian 12.2.0-14) 12.2.0", "steps": [...], "costs": [1.2e-05, ...],
     "error": "NO_ERROR", "error_msg": "", "all_cost": 0.84, "timestamp": 1796000000.0,
     "program": {"space": "sketch", ...}}

``costs`` are seconds per run, every repeat; ``all_cost`` the wall seconds the measurement took
(build and run); ``program`` says which point of which space the steps came from (optional).

:func:`append_records` writes whole lines under a file lock (tuning processes may share a log);
:func:`load_records` reads a log back, skipping damaged lines with a :class:`RecordWarning`;
:func:`best_records`, :func:`best_record` and :func:`distill` pick the fastest valid program per
(workload, target); :func:`load_best` builds it. The line codec and file handling live in
:mod:`autosched.records_io`.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .records_io import (
    FORMAT_VERSION,
    RecordError,
    RecordWarning,
    Scan,
    check,
    check_object,
    json_steps,
    line_steps,
    open_for_append,
    open_log,
    scan,
    split_line,
    steps_text,
    write_all,
    write_atomic,
)
from .runner.compile import compile_shared
from .runner.kernel import Kernel
from .runner.load import load_kernel
from .runner.measure import Costs, MeasureErrorNo, MeasureInput, MeasureResult
from .steps import Step, steps_to_json
from .target import Target

if TYPE_CHECKING:
    from .task import Task

__all__ = [
    "FORMAT_VERSION",
    "NoRecordError",
    "Record",
    "RecordError",
    "RecordWarning",
    "append_records",
    "best_record",
    "best_records",
    "distill",
    "load_best",
    "load_records",
    "steps_key",
]

_encode = json.JSONEncoder(separators=(",", ":")).encode  # compact JSON


class NoRecordError(LookupError):
    """A tuning log (or list of records) has no valid record for the task asked for."""


def steps_key(steps: Sequence[Step]) -> str:
    """A short stable hash identifying a program (its steps)."""
    return hashlib.sha1(steps_text(steps, sort_keys=True).encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Record(Costs):
    """One measurement of one program of one task (one line of the log)."""

    workload: tuple[str, tuple[Any, ...]]  # (name, normalized args)
    workload_key: str
    target: str
    compiler: str
    steps: tuple[Step, ...]
    costs: tuple[float, ...]
    error_no: MeasureErrorNo
    error_msg: str
    all_cost: float
    timestamp: float
    version: str = ""
    program: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def program_key(self) -> str:
        """:func:`steps_key` of the steps."""
        return steps_key(self.steps)

    @classmethod
    def from_measure(
        cls, inp: MeasureInput, res: MeasureResult, compiler: str = "", program: dict[str, Any] | None = None
    ) -> Record:
        """The record of measuring ``inp`` with result ``res``."""
        from . import __version__

        wl = inp.task.workload
        return cls(
            workload=(wl.name, tuple(wl.args)),
            workload_key=wl.key,
            target=str(inp.task.target),
            compiler=compiler,
            steps=tuple(inp.steps),
            costs=tuple(float(c) for c in res.costs),
            error_no=MeasureErrorNo(res.error_no),
            error_msg=res.error_msg,
            all_cost=float(res.all_cost),
            timestamp=float(res.timestamp),
            version=__version__,
            program=program,
        )

    def _head(self) -> dict[str, Any]:
        """The keys before the steps."""
        return {
            "v": FORMAT_VERSION,
            "autosched": self.version,
            "workload": [self.workload[0], list(self.workload[1])],
            "workload_key": self.workload_key,
            "target": self.target,
            "compiler": self.compiler,
        }

    def _tail(self) -> dict[str, Any]:
        """The keys after the steps."""
        tail = {
            "costs": list(self.costs),
            "error": self.error_no.name,
            "error_msg": self.error_msg,
            "all_cost": self.all_cost,
            "timestamp": self.timestamp,
        }
        return tail if self.program is None else {**tail, "program": self.program}

    def to_json(self) -> dict[str, Any]:
        """The record as one JSON object (the keys of the module docstring, in order)."""
        return {**self._head(), "steps": steps_to_json(self.steps), **self._tail()}

    def to_line(self) -> str:
        """One log line, newline included: :meth:`to_json` as compact JSON (steps encoded by a cache)."""
        head, tail = _encode(self._head()), _encode(self._tail())
        return f'{head[:-1]},"steps":{steps_text(self.steps)},{tail[1:]}\n'

    @classmethod
    def from_json(cls, data: Any) -> Record:
        """The record of one decoded log line; :class:`RecordError` if it is not one."""
        return cls._from_fields(check_object(data), json_steps(data))

    @classmethod
    def _from_fields(cls, data: dict[str, Any], steps: tuple[Step, ...]) -> Record:
        """The record of a decoded line (its version checked) whose steps are already decoded."""
        try:
            name, args = data["workload"]
            error = data["error"]
            if error not in MeasureErrorNo.__members__:
                raise RecordError(f"unknown error kind {error!r}")
            return cls(
                workload=(str(name), tuple(args)),
                workload_key=str(data["workload_key"]),
                target=str(data["target"]),
                compiler=str(data.get("compiler", "")),
                steps=steps,
                costs=tuple(map(float, data["costs"])),
                error_no=MeasureErrorNo[error],
                error_msg=str(data.get("error_msg", "")),
                all_cost=float(data.get("all_cost", 0.0)),
                timestamp=float(data.get("timestamp", 0.0)),
                version=str(data.get("autosched", "")),
                program=data.get("program"),
            )
        except RecordError:
            raise
        except (KeyError, TypeError, ValueError) as err:
            raise RecordError(f"malformed record: {type(err).__name__}: {err}") from None

    @classmethod
    def from_line(cls, line: str) -> Record:
        """The record of one log line; :class:`RecordError` if it is not one."""
        data, text = split_line(line)
        return cls._from_fields(check_object(data), line_steps(line, data, text))


def append_records(path: str | os.PathLike[str], records: Sequence[Record], *, fsync: bool = True) -> None:
    """Append ``records`` to the log at ``path`` (created if missing), all in one write.

    The write happens under an exclusive ``flock``, so processes appending to one log never
    interleave lines, and readers never see half of it. If the file does not end with a newline (a
    writer was killed mid-line), a newline is written first, so the broken fragment stays a line of
    its own (skipped by :func:`load_records`) and the new records start on lines of their own.
    ``fsync`` (default on) makes the records durable before returning; it costs about 0.2 ms
    on a local SSD (a few ms while the disk is busy), small against any measurement.
    """
    data = "".join([r.to_line() for r in records]).encode()
    if not data:
        return
    path = Path(path)
    fd = open_for_append(path)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        write_all(fd, data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)  # releases the lock


def _target_str(target: str | Target | None) -> str | None:
    return None if target is None else str(Target.parse(target))


def load_records(
    path: str | os.PathLike[str], *, workload_key: str | None = None, target: str | Target | None = None
) -> list[Record]:
    """The records of the log at ``path``, in log order; only those of ``workload_key`` and
    ``target`` (compared as canonical target strings) when given.

    Lines that are not records (a truncated last line, garbage) are skipped with a
    :class:`RecordWarning` naming the file and line; lines of other workloads or targets are
    decoded only as far as the filter needs. Raises ``FileNotFoundError`` for a missing file and
    :class:`RecordError` for a file in which no line is a record.
    """
    path = Path(path)
    with open_log(path) as (f, size):
        found = scan(f, size, Record._from_fields, workload_key, _target_str(target))
    check(found, path)
    return found.items


def best_records(records: Iterable[Record]) -> dict[tuple[str, str], Record]:
    """The best valid record per (workload key, target): the lowest median; the earliest on ties."""
    best: dict[tuple[str, str], Record] = {}
    medians: dict[tuple[str, str], float] = {}
    for r in records:
        if r.ok:
            key, median = (r.workload_key, r.target), r.median
            if median < medians.get(key, float("inf")):
                best[key], medians[key] = r, median
    return best


def _no_record(task: Task, where: str, mine: list[Record], others: dict[tuple[str, str], list[int]]) -> str:
    """Why ``where`` has no valid record for ``task``, and what it has instead."""
    text = f"no valid record for {task} in {where}"
    if mine:
        errors = collections.Counter(r.error_no.name for r in mine)
        failed = ", ".join(f"{kind}: {n}" for kind, n in errors.items())
        text += f"; its {len(mine)} records of this task all failed ({failed})"
    if others:
        listed = [f"{wk} on {tg} ({n} records, {v} valid)" for (wk, tg), (n, v) in list(others.items())[:5]]
        if len(others) > 5:
            listed.append(f"and {len(others) - 5} more")
        text += "; it has records of: " + "; ".join(listed)
    elif not mine:
        text += "; it has no records"
    return text


def best_record(log: str | os.PathLike[str] | Iterable[Record], task: Task) -> Record:
    """The best valid record of ``task`` in a log file or among records.

    Raises :class:`NoRecordError` (a ``LookupError``) naming the task and the log, and listing the
    workloads and targets the log does have records of.
    """
    key, target = task.workload.key, str(task.target)
    found: Scan[Record]
    if isinstance(log, (str, os.PathLike)):
        path = Path(log)
        with open_log(path) as (f, size):
            found = scan(f, size, Record._from_fields, key, target)
        check(found, path)
        where = str(path)
    else:
        found, where = Scan(), "the given records"
        for r in log:
            if (r.workload_key, r.target) == (key, target):
                found.items.append(r)
            else:
                counts = found.others.setdefault((r.workload_key, r.target), [0, 0])
                counts[0] += 1
                counts[1] += r.ok
    best = best_records(found.items).get((key, target))
    if best is None:
        raise NoRecordError(_no_record(task, where, found.items, found.others))
    return best


def distill(src: str | os.PathLike[str], dst: str | os.PathLike[str], *, fsync: bool = True) -> int:
    """Write to ``dst`` the best line of each (workload, target) of log ``src``; return how many.

    The lines keep their order in ``src``. ``dst`` is replaced atomically (a temporary file, then
    ``os.replace``), so it may be ``src`` itself: the source is then locked from reading to
    replacing, and appends that wait meanwhile go to the distilled file.
    """
    src, dst = Path(src), Path(dst)
    try:
        in_place = os.path.samefile(src, dst)
    except FileNotFoundError:
        in_place = False
    with open_log(src, exclusive=in_place) as (f, size):
        found = scan(f, size, Record._from_fields)
        check(found, src)
        best = best_records(found.items)
        kept = [r for r in found.items if best.get((r.workload_key, r.target)) is r]
        write_atomic(dst, "".join([r.to_line() for r in kept]).encode(), fsync=fsync)
    return len(kept)


def load_best(
    log: str | os.PathLike[str] | Iterable[Record], task: Task, *, cache_dir: Path | None = None
) -> Kernel:
    """The best program of ``task`` in ``log``, built and loaded: a callable over numpy arrays.

    The program is re-emitted from the record's steps, compiled for ``task.target`` (into
    ``cache_dir``, by default the kernel cache) and loaded. Raises :class:`NoRecordError` when the
    log has no valid record of the task.
    """
    record = best_record(log, task)
    lib = compile_shared(task.source(record.steps), task.target, cache_dir=cache_dir)
    return load_kernel(lib, task.func_name, task.arg_specs())
