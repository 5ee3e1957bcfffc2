"""Trust in the kernel cache: its folder is private, and each library matches what autosched built.

Loading a shared library runs its code (constructors run at ``dlopen``), so a library is taken from
the cache only when

- the cache folder belongs to this user (or root) and no one else may write to it, as ssh checks
  ``~/.ssh`` (a folder made here is made ``0700``); otherwise :class:`CacheUntrusted` says, in one
  line, which folder and how to fix it; and
- its content has the sha256 recorded when autosched built or received it: a record file
  ``NAME.sha256`` beside it, written atomically, itself a regular file of this user (or root) that
  no one else may write. A library with no record is built again; one whose content changed since
  is built again with a one-line warning.

A library verified once is not hashed again in this process while its inode, size and times stay
the same.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import os
import pwd
import re
import stat
import tempfile
from pathlib import Path

from ..diagnostics import warn
from .errors import InfrastructureError

__all__ = ["CacheUntrusted", "State", "check_folder", "is_cache_entry", "private_folder", "record",
           "record_path", "say_changed", "sha256_of", "verify"]

#: the suffix of a library's content record
RECORD_SUFFIX = ".sha256"

#: the file names the kernel cache gives libraries (a content key, see compile.py)
_ENTRY = re.compile(r"[0-9a-f]{40}\.so")

_HEX = re.compile(r"[0-9a-f]{64}")

#: a file's device, inode, size, mtime and ctime (ns): any write or replacement changes it
_Stamp = tuple[int, int, int, int, int]
#: path -> (its stamp when it was hashed, its sha256)
_hashed: dict[str, tuple[_Stamp, str]] = {}


class CacheUntrusted(InfrastructureError):
    """The kernel cache folder may hold files that someone else put there: nothing is loaded from it."""


class State(enum.Enum):
    """What :func:`verify` found."""

    OK = "ok"  # the content matches its record
    MISSING = "missing"  # no such file
    UNRECORDED = "unrecorded"  # no trustworthy record of it (not built by autosched here)
    CHANGED = "changed"  # its content differs from the record (changed after it was built)


def _who(uid: int) -> str:
    with contextlib.suppress(KeyError):
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    return f"uid {uid}"


def _trusted_owner(uid: int) -> bool:
    return uid in (os.geteuid(), 0)


def check_folder(folder: Path) -> None:
    """Raise :class:`CacheUntrusted` unless ``folder`` is a directory of this user (or root) that no
    other user may write to; a missing folder is an ``OSError``."""
    st = os.stat(folder)
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(f"not a directory: {folder}")
    other = "set AUTOSCHED_CACHE to a folder of your own"
    if not _trusted_owner(st.st_uid):
        me = os.geteuid()
        raise CacheUntrusted(
            f"the kernel cache {folder} belongs to {_who(st.st_uid)}, not to you ({_who(me)}): nothing "
            f"is loaded from it; run chown {me} {folder} (as root) or {other}"
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheUntrusted(
            f"the kernel cache {folder} may be written by other users (mode {stat.S_IMODE(st.st_mode):04o}): "
            f"nothing is loaded from it; run chmod 700 {folder} or {other}"
        )


def private_folder(folder: Path) -> Path:
    """``folder``, made (mode ``0700``, and so are the missing folders above it) if missing, then
    checked by :func:`check_folder`. An ``OSError`` if it cannot be made."""
    missing = []
    here = folder
    while not here.exists() and here != here.parent:
        missing.append(here)
        here = here.parent
    for part in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by another process
            part.mkdir(mode=0o700)
    check_folder(folder)
    return folder


def is_cache_entry(path: Path) -> bool:
    """Whether ``path`` is named as the kernel cache names a library (its content key, ``.so``)."""
    return _ENTRY.fullmatch(path.name) is not None


def record_path(lib: Path) -> Path:
    """The file holding the sha256 of ``lib``."""
    return lib.with_name(lib.name + RECORD_SUFFIX)


def sha256_of(data: bytes) -> str:
    """The sha256 of ``data`` as hex."""
    return hashlib.sha256(data).hexdigest()


def _stamp(st: os.stat_result) -> _Stamp:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _file_digest(path: Path) -> str | None:
    """The sha256 of the regular file ``path`` (not a link), hashed once while it stays the same;
    None if there is no such file."""
    key = str(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    seen = _hashed.get(key)
    if seen is not None and seen[0] == _stamp(st):
        return seen[1]
    if not stat.S_ISREG(st.st_mode):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:  # gone, or replaced by a link meanwhile
        return None
    with os.fdopen(fd, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
        _hashed[key] = (_stamp(os.fstat(f.fileno())), digest)
    return digest


def _recorded(lib: Path) -> str | None:
    """The sha256 recorded for ``lib``, if its record is a regular file of this user (or root)
    that no one else may write, holding one digest."""
    path = record_path(lib)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or not _trusted_owner(st.st_uid):
            return None
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return None
        text = f.read(100).decode("ascii", "replace").strip()
    return text if _HEX.fullmatch(text) else None


def verify(lib: Path) -> State:
    """Whether ``lib`` is the library autosched recorded (see the module docstring)."""
    if not os.path.lexists(lib):
        return State.MISSING
    want = _recorded(lib)
    if want is None:
        return State.UNRECORDED
    got = _file_digest(lib)
    if got is None:
        return State.UNRECORDED
    return State.OK if got == want else State.CHANGED


def record(lib: Path, digest: str) -> None:
    """Record ``digest`` as the sha256 of ``lib`` (before ``lib`` is put in place), atomically."""
    path = record_path(lib)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(fd, "w") as f:
            f.write(digest + "\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def say_changed(lib: Path) -> None:
    """The one-line warning for a library whose content no longer matches its record."""
    warn(f"kernel cache: {lib} is not the library autosched built (its sha256 differs from the one "
         "recorded): not loaded, built again", stacklevel=3)
