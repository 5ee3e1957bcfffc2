"""The tuning log: JSON lines, one measurement per line, append-only, resumable.

One line (keys in this order)::

    {"v": 1, "autosched": "0.1.0", "workload": ["matmul", [64, 64, 64, "float32", false]],
     "workload_key": "matmul(64,64,64,'float32',False)#3f2a...", "target": "c -cc=gcc ...",
     "compiler": "gcc (Debian 12.2.0-14) 12.2.0", "steps": [...], "costs": [1.2e-05, ...],
     "error": "NO_ERROR", "error_msg": "", "all_cost": 0.84, "timestamp": 1796000000.0,
     "program": {"space": "sketch", ...}}

``costs`` are seconds per run, every repeat; ``all_cost`` the wall seconds the measurement took
(build and run); ``program`` says which point of which space the steps came from (optional);
``calibration`` (optional) the seconds per call of the calibration kernel timed beside the
measurement (:mod:`autosched.runner.calibration`: how fast the machine was then; the costs stay as
measured); ``machine`` is the fingerprint of the machine measured on (optional; see
:mod:`autosched.database.machine`): ``asc.load_best`` and ``asc.compile`` apply only the records
of the machine the target runs on (this host's, or for a cross target its boards'), and
``asc.load_best(..., machine=FP)`` those of the machine asked for.

:func:`append_records` writes whole lines under a file lock (tuning processes may share a log);
:func:`load_records` reads a log back, skipping damaged or crafted lines with a
:class:`RecordWarning` that names the file and line; which record is the best is decided in
:mod:`autosched.records.best`. Logs are untrusted input:
what each line is checked for is in :mod:`autosched.records.check`. The line codec and file
handling live in :mod:`autosched.records.io`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..diagnostics import printable
from ..runner.measure import Costs, MeasureErrorNo, MeasureInput, MeasureResult
from ..schedule.steps import Step, steps_to_json
from ..target import Target
from ..version import __version__
from .check import (
    check_costs,
    check_machine,
    check_number,
    check_speed,
    check_target,
    check_text,
    check_workload,
)
from .io import (
    FORMAT_VERSION,
    RecordError,
    RecordWarning,
    check_object,
    json_steps,
    line_steps,
    open_for_append,
    open_log,
    scan,
    split_line,
    steps_text,
    write_all,
)
from .io import check as check_found

__all__ = [
    "FORMAT_VERSION",
    "Record",
    "RecordError",
    "RecordWarning",
    "append_records",
    "load_records",
    "read_records",
    "record_builder",
    "steps_key",
]

_encode = json.JSONEncoder(separators=(",", ":")).encode  # compact JSON
_ERROR_KINDS = MeasureErrorNo.__members__
_NO_ERROR = MeasureErrorNo.NO_ERROR

#: bounds of a record's wall seconds (``all_cost``) and of its ``timestamp`` (year 5138)
MAX_SECONDS = 1e9
MAX_TIMESTAMP = 1e11
#: the bound of a record's calibration figure, seconds per call of the calibration kernel (it takes
#: about 0.2 ms on one core; an hour would be no measurement)
MAX_CALIBRATION = 3600.0
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
    #: fingerprint of the machine it was measured on (:mod:`autosched.database.machine`); empty in
    #: records written before autosched recorded it
    machine: str = ""
    #: where the record was read from (``FILE:LINE``), for messages; empty for a record made here
    origin: str = field(default="", compare=False, repr=False)
    #: seconds per call of the calibration kernel beside the measurement; 0 where none was timed
    calibration: float = 0.0

    @property
    def program_key(self) -> str:
        """:func:`steps_key` of the steps."""
        return steps_key(self.steps)

    @classmethod
    def from_measure(
        cls,
        inp: MeasureInput,
        res: MeasureResult,
        compiler: str = "",
        program: dict[str, Any] | None = None,
        machine: str = "",
    ) -> Record:
        """The record of measuring ``inp`` with result ``res``."""
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
            machine=machine,
            calibration=float(getattr(res, "calibration", 0.0)),
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
        if self.program is not None:
            tail["program"] = self.program
        if self.machine:
            tail["machine"] = self.machine
        if self.calibration > 0:
            tail["calibration"] = self.calibration
        return tail

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
    def _from_fields(cls, data: dict[str, Any], steps: tuple[Step, ...], origin: str = "") -> Record:
        """The record of a decoded line (its version checked) whose steps are already decoded; every
        field checked (:mod:`autosched.records.check`), :class:`RecordError` if one is not valid."""
        try:
            error = data["error"]
            error_no = _ERROR_KINDS.get(error) if type(error) is str else None
            if error_no is None:
                raise RecordError(f"unknown error kind {printable(error, 60)}")
            program = data.get("program")
            if program is not None and type(program) is not dict:
                raise RecordError(f"program must be an object, got {type(program).__name__}")
            key = data["workload_key"]
            record = cls(
                workload=check_workload(data["workload"], key),
                workload_key=key,
                target=check_target(data["target"]),
                compiler=check_text(data.get("compiler", ""), "compiler"),
                steps=steps,
                costs=check_costs(data["costs"], error_no is _NO_ERROR),
                error_no=error_no,
                error_msg=check_text(data.get("error_msg", ""), "error_msg"),
                all_cost=check_number(data.get("all_cost", 0.0), "all_cost", 0.0, MAX_SECONDS),
                timestamp=check_number(data.get("timestamp", 0.0), "timestamp", 0.0, MAX_TIMESTAMP),
                version=check_text(data.get("autosched", ""), "the autosched version"),
                program=program,
                machine=check_machine(data.get("machine", "")),
                origin=origin,
                calibration=check_number(data.get("calibration", 0.0), "calibration", 0.0, MAX_CALIBRATION),
            )
            if error_no is _NO_ERROR:
                check_speed(record.costs, record.workload, key, record.target)
            return record
        except RecordError:
            raise
        except (KeyError, TypeError, ValueError) as err:
            raise RecordError(f"malformed record: {type(err).__name__}: {printable(err, 200)}") from None

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


def record_builder(path: Path) -> Callable[[dict[str, Any], tuple[Step, ...], int], Record]:
    """:func:`~autosched.records.io.scan`'s ``build`` for the log at ``path``."""
    where = str(path)
    return lambda data, steps, lineno: Record._from_fields(data, steps, f"{where}:{lineno}")


def read_records(
    path: str | os.PathLike[str], *, workload_key: str | None = None, target: str | Target | None = None
) -> tuple[list[Record], int]:
    """:func:`load_records`, and the size of the log it read (bytes, whole appends): where a run
    that then follows the log's new records (:class:`~autosched.search.shared_log.SharedLog`)
    starts, so that it misses none and reads none twice."""
    path = Path(path)
    with open_log(path) as (f, size):
        found = scan(f, size, record_builder(path), workload_key, _target_str(target))
    check_found(found, path)
    return found.items, size


def load_records(
    path: str | os.PathLike[str], *, workload_key: str | None = None, target: str | Target | None = None
) -> list[Record]:
    """The records of the log at ``path``, in log order; only those of ``workload_key`` and
    ``target`` (compared as canonical target strings) when given.

    Every line is checked (:mod:`autosched.records.check`: field types, finite positive costs,
    a target of known options, workload arguments that re-create the key). Lines that are not
    valid records (a truncated last line, garbage, a crafted line) are skipped with a
    :class:`RecordWarning` naming the file and line; lines of other workloads or targets are
    decoded only as far as the filter needs. Raises ``FileNotFoundError`` for a missing file and
    :class:`RecordError` for a file in which no line is a record.
    """
    path = Path(path)
    with open_log(path) as (f, size):
        found = scan(f, size, record_builder(path), workload_key, _target_str(target))
    check_found(found, path)  # warns at the caller's line
    return found.items
