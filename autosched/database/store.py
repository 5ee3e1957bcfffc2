"""The tuning database: one directory of tuning logs, per machine and per target.

    DB/                                  $AUTOSCHED_DB, else $XDG_CACHE_HOME/autosched/db,
                                         else ~/.cache/autosched/db
      x86_64-3f2a9c1b7d4e/               one directory per machine (see machine.py)
        machine.json                     what that machine is (CPU model, ISA, vector width)
        c_cc-gcc_num-threads-1_..._9e0f1a2b.jsonl    one tuning log per target string

Logs are ordinary tuning logs (:mod:`autosched.records`): appends are whole lines under a file
lock, so processes and threads share a database safely. A record is looked up only in the log of
its machine and target, so records measured on another CPU are never applied to this one.

Nothing acts through a symbolic link inside the database (the database's own path may be one): a
machine folder, log or file that is a link is skipped when reading, listing and collecting garbage
(with one warning line), and writing into one is refused, so gc never deletes or rewrites a file
outside the database.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import records
from ..diagnostics import warn
from ..records.io import RecordError, open_log, scan, write_atomic
from ..target import Target
from ..task import Task
from .interface import TuningStore
from .machine import describe, fingerprint, fingerprint_for

__all__ = ["Database", "GcAction", "GcReport", "default_path", "target_slug"]

#: the environment variable naming the database directory
ENV = "AUTOSCHED_DB"
MACHINE_FILE = "machine.json"
LOG_SUFFIX = ".jsonl"
#: model-quality files next to the logs (autosched.search.learning.sidecar_path) are not logs
SIDECAR_SUFFIX = ".model.jsonl"
#: temporary files of interrupted atomic rewrites older than this many seconds are removed by gc
STALE_TMP_SECONDS = 3600.0
#: how records.io says a line is a record of another format version
_OTHER_VERSION = "unsupported record format version"


def default_path() -> Path:
    """``$AUTOSCHED_DB``, else ``$XDG_CACHE_HOME/autosched/db``, else ``~/.cache/autosched/db``."""
    env = os.environ.get(ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    cache = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return cache / "autosched" / "db"


def target_slug(target: str | Target) -> str:
    """A file name stem for a target string: its options as ``name-value`` words joined by ``_``
    (other characters become ``_``, cut at 80 characters), then a hash of the canonical string."""
    text = str(Target.parse(target))
    words = [w.lstrip("-").replace("=", "-") for w in text.split()]
    readable = re.sub(r"[^A-Za-z0-9.+-]+", "_", "_".join(words)).strip("_")[:80]
    return f"{readable}_{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def _target_of(task_or_target: Task | str | Target) -> Target:
    return task_or_target.target if isinstance(task_or_target, Task) else Target.parse(task_or_target)


@dataclass(frozen=True)
class GcAction:
    """What gc did (or, in a dry run, would do) to one file."""

    path: Path
    action: str  # "distilled", "removed" or "kept"
    why: str
    bytes_before: int
    bytes_after: int
    records_before: int = 0
    records_after: int = 0

    @property
    def freed(self) -> int:
        """Bytes freed."""
        return self.bytes_before - self.bytes_after


@dataclass
class GcReport:
    """What :meth:`Database.gc` did, file by file."""

    dry_run: bool
    actions: list[GcAction] = field(default_factory=list)

    @property
    def freed(self) -> int:
        """Bytes freed in all."""
        return sum(a.freed for a in self.actions)

    @property
    def removed(self) -> int:
        """Files removed."""
        return sum(a.action == "removed" for a in self.actions)


class Database(TuningStore):
    """A tuning database directory (see the module docstring); ``path`` None: :func:`default_path`."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_path()
        self._warned = False  # a link skipped: said once

    def __repr__(self) -> str:
        return f"Database({str(self.path)!r})"

    @classmethod
    def resolve(cls, db: TuningStore | str | os.PathLike[str] | None) -> TuningStore:
        """``db`` itself (any :class:`TuningStore`), the database at the path ``db``, or (None) the
        default database."""
        return db if isinstance(db, TuningStore) else cls(db)

    def describe(self) -> str:
        """``the database at PATH``."""
        return f"the database at {self.path}"

    # -- where things are -------------------------------------------------------------------

    def machine_dir(self, task_or_target: Task | str | Target) -> Path:
        """The directory of the machine the target's records are valid for."""
        return self.path / fingerprint_for(_target_of(task_or_target))

    def log_for(self, task_or_target: Task | str | Target, *, create: bool = False) -> Path:
        """The log of a task's (or target's) records on its machine. With ``create``, the machine's
        directory and ``machine.json`` are made (safely, if other processes do the same), and a
        symbolic link on the way to the log is a one-line ``ValueError`` (nothing is written
        through one)."""
        target = _target_of(task_or_target)
        folder = self.path / fingerprint_for(target)
        log = folder / f"{target_slug(target)}{LOG_SUFFIX}"
        if create:
            self._writable(log)
            self._make_machine_dir(folder, target)
        return log

    # -- links ------------------------------------------------------------------------------

    def inside(self, path: Path) -> bool:
        """Whether ``path`` lies in the database with no symbolic link between the database's
        directory and it (itself included), so that acting on it acts inside the database."""
        try:
            parts = path.relative_to(self.path).parts
        except ValueError:
            return False
        here = self.path
        for part in parts:
            here = here / part
            if part in ("", ".", "..") or here.is_symlink():
                return False
        return path.resolve().is_relative_to(self.path.resolve())

    def _skip(self, path: Path) -> None:
        """Say (once per Database) that ``path``, a link, is left alone."""
        if not self._warned:
            self._warned = True
            warn(f"tuning database {self.path}: skipped {path}, a symbolic link (nothing in the database "
                 "is read, listed, collected or written through a link; replace it with the real folder "
                 "or file)", stacklevel=3)

    def _usable(self, path: Path) -> bool:
        """Whether ``path`` may be acted on (:meth:`inside`); a link found on the way is reported."""
        if self.inside(path):
            return True
        if path.is_relative_to(self.path):
            self._skip(path)
        return False

    def _writable(self, path: Path) -> None:
        """Refuse, in one line, to write ``path`` if a link stands on its way (missing parts are fine:
        they are made as folders)."""
        here = self.path
        for part in path.relative_to(self.path).parts:
            here = here / part
            if here.is_symlink() or part in ("", ".", ".."):
                raise ValueError(f"tuning database {self.path}: {here} is a symbolic link (or leaves the "
                                 "database): autosched writes nothing through it; replace it with a real "
                                 "folder or file")

    def _make_machine_dir(self, folder: Path, target: Target) -> None:
        info = folder / MACHINE_FILE
        if info.is_file() and not info.is_symlink():
            return
        self._writable(info)
        folder.mkdir(parents=True, exist_ok=True)
        description = describe(target)
        data = {"fingerprint": fingerprint(description), **description, "created": time.time()}
        write_atomic(info, (json.dumps(data, indent=1) + "\n").encode(), fsync=False)

    def machines(self) -> dict[str, dict[str, Any]]:
        """Every machine directory's fingerprint and its ``machine.json`` ({} if unreadable)."""
        found: dict[str, dict[str, Any]] = {}
        if not self.path.is_dir():
            return found
        for folder in sorted(p for p in self.path.iterdir() if self._usable(p) and p.is_dir()):
            info = folder / MACHINE_FILE
            try:
                data = json.loads(info.read_text()) if self._usable(info) else {}
            except (OSError, ValueError):
                data = {}
            found[folder.name] = data if isinstance(data, dict) else {}
        return found

    def logs(self, fingerprint: str | None = None) -> list[Path]:
        """The logs of the database (of one machine's directory when ``fingerprint`` is given)."""
        folders = [self.path / fingerprint] if fingerprint else [self.path / f for f in self.machines()]
        found = (p for d in folders if d.is_dir() and self._usable(d) for p in d.glob(f"*{LOG_SUFFIX}"))
        logs = (p for p in found if not p.name.endswith(SIDECAR_SUFFIX))
        return sorted(p for p in logs if self._usable(p) and p.is_file())

    # -- lookups ----------------------------------------------------------------------------

    def best(self, task: Task) -> records.Record | None:
        """The best valid record of ``task`` measured on its machine; None if there is none.

        A log that is not a tuning log is skipped with a warning.
        """
        path = self.log_for(task)
        if os.path.lexists(path) and not self._usable(path):
            return None
        try:
            return records.best_record(path, task)
        except (FileNotFoundError, records.NoRecordError):
            return None
        except RecordError as err:
            warn(f"tuning database: {err}")
            return None

    def elsewhere(self, task: Task) -> dict[tuple[str, str], list[int]]:
        """Records of ``task``'s workload that :meth:`best` does not use: by (machine fingerprint,
        target string), [records, valid records]. Reads every log; meant for messages."""
        key, target, mine = task.workload.key, str(task.target), self.log_for(task)
        found: dict[tuple[str, str], list[int]] = {}
        for path in self.logs():
            for tgt, valid in workload_targets(path, key):
                if path == mine and tgt == target:
                    continue
                counts = found.setdefault((path.parent.name, tgt), [0, 0])
                counts[0] += 1
                counts[1] += valid
        return found

    # -- gc ---------------------------------------------------------------------------------

    def gc(self, *, dry_run: bool = False) -> GcReport:
        """Distill every log to its best record per (workload, target) (:func:`records.distill`),
        remove logs that hold no valid record (empty, garbage, or only failed trials) and stale
        temporary files. Safe while other processes append: they wait, then append to the new
        file. ``dry_run`` changes nothing and reports what would be done. Links are skipped: gc
        acts on nothing outside the database."""
        report = GcReport(dry_run)
        for folder in (self.path / f for f in self.machines()):
            now = time.time()
            for tmp in sorted(folder.glob(".*.tmp")):
                if not self._usable(tmp):
                    continue
                with contextlib.suppress(OSError):
                    st = tmp.stat()
                    if now - st.st_mtime > STALE_TMP_SECONDS:
                        if not dry_run:
                            tmp.unlink()
                        report.actions.append(GcAction(tmp, "removed", "stale temporary file", st.st_size, 0))
        for path in self.logs():
            if not self._usable(path):  # checked again just before acting on it
                continue
            with contextlib.suppress(FileNotFoundError):  # removed meanwhile by another gc
                report.actions.append(_gc_log(path, dry_run))
        return report


def workload_targets(path: Path, workload_key: str) -> list[tuple[str, bool]]:
    """(target, valid) of each record of ``workload_key`` in the log at ``path``, without warnings
    ([] for a missing file or one that is not a log)."""
    try:
        with open_log(path) as (f, size):
            found = scan(
                f,
                size,
                lambda d, _steps, _line: (
                    str(d.get("target")),
                    d.get("error") == "NO_ERROR" and bool(d.get("costs")),
                ),
                workload_key,
            )
    except OSError:
        return []
    return found.items


def _count_records(path: Path) -> tuple[int, bool]:
    """How many lines of the log are records, and whether some line is a record of another format
    version (written by another autosched: gc leaves such a log alone)."""
    with open_log(path) as (f, size):
        found = scan(f, size, lambda d, _steps, _line: None)
    return len(found.items), any(_OTHER_VERSION in why for _, why in found.bad)


def _remove_if_empty(path: Path, dry_run: bool) -> str | None:
    """Remove the log at ``path`` if no line of it is a record (of any format version), checked
    and done under its exclusive lock (so no append is lost); why it was (or would be) removed."""
    with open_log(path, exclusive=True) as (f, size):
        found = scan(f, size, lambda d, _steps, _line: None)
        if found.items or found.others or any(_OTHER_VERSION in why for _, why in found.bad):
            return None
        if not dry_run:
            os.unlink(path)
        return "empty" if not found.bad else "not a tuning log"


def _gc_log(path: Path, dry_run: bool) -> GcAction:
    before = path.stat().st_size
    why = _remove_if_empty(path, dry_run)
    if why is not None:
        return GcAction(path, "removed", why, before, 0)
    count, other_version = _count_records(path)
    if other_version:
        return GcAction(path, "kept", "holds records of another format version", before, before, count, count)
    if dry_run:
        with tempfile.TemporaryDirectory(prefix="autosched-gc-") as tmp:
            out = Path(tmp) / path.name
            kept = records.distill(path, out, fsync=False)
            after = out.stat().st_size
    else:
        kept = records.distill(path, path)  # bad lines are dropped (with a warning each)
        after = path.stat().st_size
    if kept == 0 and (dry_run or _remove_if_empty(path, dry_run) is not None):  # only failed trials
        return GcAction(path, "removed", "no valid record", before, 0, count, 0)
    if after == before:
        return GcAction(path, "kept", "already distilled", before, after, count, kept)
    return GcAction(path, "distilled", f"the best of {count} records", before, after, count, kept)
