"""The tuning log: JSON lines, one measurement per line, append-only, resumable.

One line (keys in this order)::

    {"v": 1, "autosched": "0.1.0", "workload": ["matmul", [64, 64, 64, "float32", false]],
     "workload_key": "matmul(64,64,64,'float32',False)#3f2a...", "target": "c -cc=gcc ...",
     "compiler": "gcc (Debian 12.2.0-14) 12.2.0", "steps": [...], "costs": [1.2e-05, ...],
     "error": "NO_ERROR", "error_msg": "", "all_cost": 0.84, "timestamp": 1796000000.0,
     "program": {"space": "sketch", ...}}

``costs`` are seconds per run, every repeat; ``all_cost`` the wall seconds the measurement took
(build and run); ``program`` says which point of which space the steps came from (optional);
``machine`` is the fingerprint of the machine measured on (optional; see
:mod:`autosched.database.machine`): ``asc.load_best`` and ``asc.compile`` never apply another
machine's records.

:func:`append_records` writes whole lines under a file lock (tuning processes may share a log);
:func:`load_records` reads a log back, skipping damaged or crafted lines with a
:class:`RecordWarning` that names the file and line; :func:`best_records`, :func:`best_record` and
:func:`distill` pick the fastest valid program per (workload, target), passing over programs that
do not replay; :func:`load_best` builds it with the task's own compiler. Logs are untrusted input:
what each line is checked for is in :mod:`autosched.records.check`. The line codec and file
handling live in :mod:`autosched.records.io`.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..diagnostics import printable, warn
from ..runner.compile import compile_shared
from ..runner.kernel import Kernel
from ..runner.load import load_kernel
from ..runner.measure import Costs, MeasureErrorNo, MeasureInput, MeasureResult
from ..schedule.steps import Step, steps_to_json
from ..target import Target
from ..version import __version__
from .check import (
    check_costs,
    check_machine,
    check_target,
    check_workload,
    number,
    replay_error,
    text,
)
from .io import (
    FORMAT_VERSION,
    RecordError,
    RecordWarning,
    Scan,
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
from .io import check as check_found

if TYPE_CHECKING:
    from ..task import Task

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
    "pick_best",
    "ranked",
    "steps_key",
]

_encode = json.JSONEncoder(separators=(",", ":")).encode  # compact JSON
_ERROR_KINDS = MeasureErrorNo.__members__
_NO_ERROR = MeasureErrorNo.NO_ERROR

#: bounds of a record's wall seconds (``all_cost``) and of its ``timestamp`` (year 5138)
MAX_SECONDS = 1e9
MAX_TIMESTAMP = 1e11
#: programs tried, best first, before giving up on a workload whose best programs do not replay
MAX_TRIES = 10


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
    #: fingerprint of the machine it was measured on (:mod:`autosched.database.machine`); empty in
    #: records written before autosched recorded it
    machine: str = ""
    #: where the record was read from (``FILE:LINE``), for messages; empty for a record made here
    origin: str = field(default="", compare=False, repr=False)

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
            return cls(
                workload=check_workload(data["workload"], key),
                workload_key=key,
                target=check_target(data["target"]),
                compiler=text(data.get("compiler", ""), "compiler"),
                steps=steps,
                costs=check_costs(data["costs"], error_no is _NO_ERROR),
                error_no=error_no,
                error_msg=text(data.get("error_msg", ""), "error_msg"),
                all_cost=number(data.get("all_cost", 0.0), "all_cost", 0.0, MAX_SECONDS),
                timestamp=number(data.get("timestamp", 0.0), "timestamp", 0.0, MAX_TIMESTAMP),
                version=text(data.get("autosched", ""), "the autosched version"),
                program=program,
                machine=check_machine(data.get("machine", "")),
                origin=origin,
            )
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


def _builder(path: Path) -> Callable[[dict[str, Any], tuple[Step, ...], int], Record]:
    """:func:`~autosched.records.io.scan`'s ``build`` for the log at ``path``."""
    where = str(path)
    return lambda data, steps, lineno: Record._from_fields(data, steps, f"{where}:{lineno}")


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
        found = scan(f, size, _builder(path), workload_key, _target_str(target))
    check_found(found, path)
    return found.items


def ranked(records: Iterable[Record]) -> list[Record]:
    """The valid records, fastest first (lowest median; the earliest of equals first)."""
    return sorted((r for r in records if r.ok), key=lambda r: r.median)


def pick_best(
    records: Iterable[Record], check: Callable[[Record], str | None] | None = replay_error
) -> Record | None:
    """The fastest valid record (the earliest of equals) whose program passes ``check`` (by default:
    its steps replay on its workload); None if there is none.

    A record that fails ``check`` (``check`` returns why) is passed over with a
    :class:`RecordWarning` naming where it was read, and the next best is tried, up to
    :data:`MAX_TRIES` records.
    """
    for tries, r in enumerate(ranked(records)):
        why = None if check is None else check(r)
        if why is None:
            return r
        where = r.origin or "a record"
        warn(
            f"{where}: passed over the best program of {r.workload_key} on {r.target}: {why}",
            RecordWarning,
        )
        if tries + 1 == MAX_TRIES:
            warn(
                f"gave up on {r.workload_key} on {r.target}: its {MAX_TRIES} best programs fail",
                RecordWarning,
            )
            break
    return None


def best_records(
    records: Iterable[Record], check: Callable[[Record], str | None] | None = replay_error
) -> dict[tuple[str, str], Record]:
    """The best valid record per (workload key, target): the lowest median, the earliest on ties,
    among those whose program passes ``check`` (by default: replays; see :func:`pick_best`)."""
    records = records if isinstance(records, list) else list(records)
    best: dict[tuple[str, str], Record] = {}
    medians: dict[tuple[str, str], float] = {}
    for r in records:
        if r.ok:
            key, median = (r.workload_key, r.target), r.median
            if median < medians.get(key, float("inf")):
                best[key], medians[key] = r, median
    if check is not None:
        for key, r in list(best.items()):
            if check(r) is not None:  # the slow way, for this workload only
                chosen = pick_best([x for x in records if (x.workload_key, x.target) == key], check)
                if chosen is None:
                    del best[key]
                else:
                    best[key] = chosen
    return best


def _no_record(task: Task, where: str, mine: list[Record], others: dict[tuple[str, str], list[int]]) -> str:
    """Why ``where`` has no valid record for ``task``, and what it has instead."""
    text = f"no valid record for {task} in {where}"
    if mine:
        errors = collections.Counter(r.error_no.name for r in mine)
        failed = ", ".join(f"{kind}: {n}" for kind, n in errors.items())
        text += f"; its {len(mine)} records of this task all failed ({failed})"
    if others:
        listed = [
            f"{printable(wk, 100)} on {printable(tg, 100)} ({n} records, {v} valid)"
            for (wk, tg), (n, v) in list(others.items())[:5]
        ]
        if len(others) > 5:
            listed.append(f"and {len(others) - 5} more")
        text += "; it has records of: " + "; ".join(listed)
    elif not mine:
        text += "; it has no records"
    return text


def best_record(
    log: str | os.PathLike[str] | Iterable[Record],
    task: Task,
    *,
    check: Callable[[Record], str | None] | None = replay_error,
) -> Record:
    """The best valid record of ``task`` in a log file or among records, among those whose
    program passes ``check`` (by default: its steps replay; see :func:`pick_best`).

    Raises :class:`NoRecordError` (a ``LookupError``) naming the task and the log, and listing the
    workloads and targets the log does have records of.
    """
    key, target = task.workload.key, str(task.target)
    found: Scan[Record]
    if isinstance(log, (str, os.PathLike)):
        path = Path(log)
        with open_log(path) as (f, size):
            found = scan(f, size, _builder(path), key, target)
        check_found(found, path)
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
    best = best_records(found.items, check).get((key, target))
    if best is None:
        raise NoRecordError(_no_record(task, where, found.items, found.others))
    return best


def distill(src: str | os.PathLike[str], dst: str | os.PathLike[str], *, fsync: bool = True) -> int:
    """Write to ``dst`` the best line of each (workload, target) of log ``src``; return how many.

    Lines that are not valid records are left out (with a warning), and so are programs that do
    not replay (see :func:`best_records`). The lines keep their order in ``src``. ``dst`` is
    replaced atomically (a temporary file, then ``os.replace``), so it may be ``src`` itself: the
    source is then locked from reading to replacing, and appends that wait meanwhile go to the
    distilled file.
    """
    src, dst = Path(src), Path(dst)
    try:
        in_place = os.path.samefile(src, dst)
    except FileNotFoundError:
        in_place = False
    with open_log(src, exclusive=in_place) as (f, size):
        found = scan(f, size, _builder(src))
        check_found(found, src)
        best = best_records(found.items)
        kept = [r for r in found.items if best.get((r.workload_key, r.target)) is r]
        write_atomic(dst, "".join([r.to_line() for r in kept]).encode(), fsync=fsync)
    return len(kept)


def load_best(
    log: str | os.PathLike[str] | Iterable[Record], task: Task, *, cache_dir: Path | None = None
) -> Kernel:
    """The best program of ``task`` in ``log``, built and loaded: a callable over numpy arrays.

    The program is re-emitted from the record's steps, compiled for ``task.target`` (into
    ``cache_dir``, by default the kernel cache) and loaded: the compiler is the one of
    ``task.target``, never one named by the log. A best program that does not replay or emit is
    passed over with a :class:`RecordWarning` for the next best. Raises :class:`NoRecordError`
    when the log has no valid record of the task.
    """
    sources: dict[tuple[Step, ...], str] = {}

    def emits(record: Record) -> str | None:
        why = replay_error(record)
        if why is None:
            try:
                sources[record.steps] = task.source(record.steps)
            except Exception as err:  # a crafted program may fail anywhere in lowering
                why = f"{type(err).__name__}: {err}"
        return why

    record = best_record(log, task, check=emits)
    lib = compile_shared(sources[record.steps], task.target, cache_dir=cache_dir)
    return load_kernel(lib, task.func_name, task.arg_specs())
