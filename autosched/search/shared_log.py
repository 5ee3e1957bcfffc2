"""Several tuning runs on one log: claims on programs being measured, and the others' new records.

Two processes (or threads) tuning the same task into the same log must not measure the same
program twice. Before measuring a program a run *claims* it with an open-file-description lock
(Linux ``F_OFD_SETLK``) on one byte of the log, far past its end, at an offset derived from the
task (workload and target) and the program's key; a run that finds the byte locked skips the
program. (Tasks of one network tuned at once may share a program key, e.g. two dense layers'
default schedules: each claims its own byte.) Such locks belong to the open
file, not to a lock file: they vanish when the run closes the log or dies (SIGKILL included), so
nothing is left behind. Where OFD locks are missing (not Linux), runs still skip every program that
another run has already logged, read back by :class:`SharedLog.news` after each batch.

Runs also share the task's trial budget: ``trials=N`` means N trials in the log, however many runs
measure them (see :meth:`~autosched.search.measurer.Measurer.reserve`). A measurement under way
holds one byte of the task's *slots*, a region of its own; a run decides how many programs it may
start under the task's *trial lock* (one more byte, taken with ``F_OFD_SETLKW``): it counts the
others' slots (``F_OFD_GETLK``), then reads their new records, and holds a slot per program it
starts. A run logs a record before it gives the slot back, so counted in this order a measurement
is never missed (it may be counted twice, which only makes the run wait).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import secrets
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

from ..records import Record
from ..records.io import RecordError

__all__ = ["SharedLog"]

#: claims live at byte offsets in [BASE, BASE + 2**60): never reached by a real log
_BASE = 1 << 62

# struct flock: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid (+ padding)
_FLOCK = struct.Struct("hhqqi4x")
_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", None)
_OFD_SETLKW = getattr(fcntl, "F_OFD_SETLKW", None)
_OFD_GETLK = getattr(fcntl, "F_OFD_GETLK", None)
#: the bytes of one task's trial lock and slots: [start, start + _SPAN), in [_BASE + 2**60, _BASE + 2**61)
_SPAN = 1 << 32


def _hash(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


def _offset(key: str) -> int:
    return _BASE + _hash(key) % (1 << 60)


class SharedLog:
    """One run's view of a log shared with other runs: program claims and records read back.

    ``claim(key)`` is True when this run may measure the program (nobody else is measuring it);
    ``release(key)`` after its record is written; ``news()`` returns the records of ``workload_key``
    and ``target`` that were appended to the log since the last call (by anyone), from ``start``
    (the size of the log read as history; default: its size now). :meth:`trial_lock`,
    :meth:`in_flight`, :meth:`hold` and :meth:`drop` share the trial budget (see the
    module docstring). Threads of one process each need their own ``SharedLog`` (locks are per open
    file).
    """

    def __init__(self, path: Path, workload_key: str, target: str, start: int | None = None) -> None:
        self.path = path
        self.workload_key, self.target = workload_key, target
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        # the records before were loaded as history (``start``: up to where they were read)
        self._offset = os.fstat(self._fd).st_size if start is None else start
        self._lock = threading.Lock()
        #: the trial lock's byte; the task's slots follow it
        self._trials = _BASE + (1 << 60) + _hash(f"{workload_key}|{target}") % (1 << 27) * _SPAN
        self._slots: list[int] = []  # the slots this run holds

    def _fcntl(self, command: int | None, kind: int, offset: int, length: int = 1) -> bool:
        """An OFD lock request (``kind`` F_WRLCK or F_UNLCK) on ``length`` bytes at ``offset``;
        False when another run holds one of them (non-blocking commands only)."""
        if command is None:
            return True
        try:
            fcntl.fcntl(self._fd, command, _FLOCK.pack(kind, os.SEEK_SET, offset, length, 0))
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise
        return True

    def _lock_byte(self, key: str, kind: int) -> bool:
        return self._fcntl(_OFD_SETLK, kind, _offset(f"{self.workload_key}|{self.target}|{key}"))

    def claim(self, key: str) -> bool:
        """Claim program ``key``; False when another run holds it."""
        with self._lock:
            return self._lock_byte(key, fcntl.F_WRLCK)

    def release(self, key: str) -> None:
        """Give the claim on ``key`` back."""
        with self._lock:
            self._lock_byte(key, fcntl.F_UNLCK)

    # -- the trial budget

    @property
    def counts_trials(self) -> bool:
        """Whether runs here can see each other's measurements under way (Linux OFD locks)."""
        return None not in (_OFD_SETLK, _OFD_SETLKW, _OFD_GETLK)

    @contextlib.contextmanager
    def trial_lock(self) -> Iterator[None]:
        """Hold the task's trial lock (waiting for it): one run at a time decides what it starts."""
        self._fcntl(_OFD_SETLKW, fcntl.F_WRLCK, self._trials)
        try:
            yield
        finally:
            self._fcntl(_OFD_SETLK, fcntl.F_UNLCK, self._trials)

    def in_flight(self) -> int:
        """How many measurements of the task other runs have under way (the slots they hold)."""
        if _OFD_GETLK is None:
            return 0
        count = 0
        todo = [(self._trials + 1, self._trials + _SPAN)]
        while todo:  # each answer names one lock in the range: count it, then look on either side
            low, high = todo.pop()
            if low >= high:
                continue
            request = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, low, high - low, 0)
            kind, _, start, length, _ = _FLOCK.unpack(fcntl.fcntl(self._fd, _OFD_GETLK, request))
            if kind == fcntl.F_UNLCK:
                continue
            start, end = max(start, low), min(start + length if length > 0 else high, high)
            count += end - start
            todo += [(low, start), (end, high)]
        return count

    def hold(self, n: int) -> None:
        """Hold ``n`` more slots (free bytes of the task's slots, at a random place)."""
        while n > 0:
            at = self._trials + 1 + secrets.randbelow(_SPAN - n - 1)
            if self._fcntl(_OFD_SETLK, fcntl.F_WRLCK, at, n):
                self._slots += range(at, at + n)
                return

    def drop(self, n: int = 1) -> None:
        """Give back ``n`` of the slots this run holds (fewer if it holds fewer)."""
        for _ in range(min(n, len(self._slots))):
            self._fcntl(_OFD_SETLK, fcntl.F_UNLCK, self._slots.pop())

    @property
    def held(self) -> int:
        """The slots this run holds."""
        return len(self._slots)

    # -- the records

    def news(self) -> list[Record]:
        """Records of this task appended since the last call (whole lines only)."""
        with self._lock:
            size = os.fstat(self._fd).st_size
            if size <= self._offset:
                return []
            data = os.pread(self._fd, size - self._offset, self._offset)
        end = data.rfind(b"\n") + 1
        self._offset += end
        found = []
        for line in data[:end].decode("utf-8", "replace").splitlines():
            if self.workload_key not in line:
                continue
            with contextlib.suppress(RecordError, ValueError):
                record = Record.from_line(line)
                if record.workload_key == self.workload_key and record.target == self.target:
                    found.append(record)
        return found

    def close(self) -> None:
        """Close the log (every claim of this run goes with it)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
