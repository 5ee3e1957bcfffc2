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
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import struct
import threading
from pathlib import Path

from ..records import Record
from ..records.io import RecordError

__all__ = ["SharedLog"]

#: claims live at byte offsets in [BASE, BASE + 2**60): never reached by a real log
_BASE = 1 << 62

# struct flock: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid (+ padding)
_FLOCK = struct.Struct("hhqqi4x")
_OFD_SETLK = getattr(fcntl, "F_OFD_SETLK", None)


def _offset(key: str) -> int:
    return _BASE + int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % (1 << 60)


class SharedLog:
    """One run's view of a log shared with other runs: program claims and records read back.

    ``claim(key)`` is True when this run may measure the program (nobody else is measuring it);
    ``release(key)`` after its record is written; ``news()`` returns the records of ``workload_key``
    and ``target`` that were appended to the log since the last call (by anyone). Threads of one
    process each need their own ``SharedLog`` (locks are per open file).
    """

    def __init__(self, path: Path, workload_key: str, target: str) -> None:
        self.path = path
        self.workload_key, self.target = workload_key, target
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._offset = os.fstat(self._fd).st_size  # the records before were loaded as history
        self._lock = threading.Lock()

    def _lock_byte(self, key: str, kind: int) -> bool:
        if _OFD_SETLK is None:
            return True
        request = _FLOCK.pack(kind, os.SEEK_SET, _offset(f"{self.workload_key}|{self.target}|{key}"), 1, 0)
        try:
            fcntl.fcntl(self._fd, _OFD_SETLK, request)
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise
        return True

    def claim(self, key: str) -> bool:
        """Claim program ``key``; False when another run holds it."""
        with self._lock:
            return self._lock_byte(key, fcntl.F_WRLCK)

    def release(self, key: str) -> None:
        """Give the claim on ``key`` back."""
        with self._lock:
            self._lock_byte(key, fcntl.F_UNLCK)

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
