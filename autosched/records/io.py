"""Low-level I/O of the tuning log, for :mod:`autosched.records` (which re-exports the public names).

Decoding is fast because a log holds many programs built from few distinct steps: a sampled
program differs from the next in a few split factors, and each
``{"kind":"cache_write","stage":"C","scope":"local"}`` recurs thousands of times. So steps are
encoded and decoded one at a time through caches keyed by the step (encoding) and by its exact JSON
text (decoding); a hit costs a dict lookup instead of a dataclass round trip, and equal steps read
from a log are one shared (immutable) object. A line's steps list is cut out of the text before
``json.loads`` (see :func:`split_line`), which leaves a small object to decode.

Files: appends take an exclusive ``flock`` and write whole lines in one ``write``; reads take a
snapshot (the size under a shared lock) and read up to it; rewrites replace the file atomically.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import os
import secrets
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Generic, TypeVar

from ..diagnostics import AutoschedWarning, warn
from ..schedule.steps import Step, steps_from_json

FORMAT_VERSION = 1

_R = TypeVar("_R")


class RecordError(ValueError):
    """A log line that is not a valid record, or a file that is not a tuning log."""


class RecordWarning(AutoschedWarning):
    """A line of a tuning log that was skipped (truncated by a killed process, garbled or crafted),
    or a record passed over (its program does not replay)."""


#: cache sizes; a cache that grows past its limit is emptied (entries are cheap to rebuild)
_CACHE_LIMIT = 1 << 16

_ENCODED: dict[Step, tuple[str, str]] = {}  # step -> (text in to_json key order, text with sorted keys)
_DECODED: dict[str, Step] = {}  # text between the braces of a step object -> step
_HEADS: dict[str, dict[str, Any]] = {}  # opening of a line up to "steps": -> its members (read-only)

_KEY = '"steps":'
_AFTER_STEPS = '],"costs":'
_encode = json.JSONEncoder(separators=(",", ":")).encode
_encode_sorted = json.JSONEncoder(separators=(",", ":"), sort_keys=True).encode


def _encoded(step: Step) -> tuple[str, str]:
    texts = _ENCODED.get(step)
    if texts is None:
        data = step.to_json()
        texts = (_encode(data), _encode_sorted(data))
        _remember(_ENCODED, step, texts)
    return texts


def steps_text(steps: Sequence[Step], sort_keys: bool = False) -> str:
    """``json.dumps(steps_to_json(steps), separators=(",", ":"), sort_keys=sort_keys)``, from the cache."""
    i = 1 if sort_keys else 0
    return "[" + ",".join([_encoded(s)[i] for s in steps]) + "]"


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise RecordError(f"not JSON: {err}") from None


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[key] = value


def _head(text: str) -> dict[str, Any] | None:
    """The members of ``text``, the opening of a line's object up to its ``"steps":`` key (which
    becomes None); None if that is not what it is. Cached: all lines of a task share it."""
    head = _HEADS.get(text)
    if head is None:
        try:
            head = json.loads(text + '"steps":null}')
        except json.JSONDecodeError:
            return None
        if not isinstance(head, dict):
            return None
        _remember(_HEADS, text, head)
    return head


def split_line(line: str) -> tuple[Any, str | None]:
    """One log line decoded but for its steps: ``(value, steps)``.

    Where the line's object has a ``"steps"`` list of objects, ``value`` is the object with that
    list replaced by ``None`` and ``steps`` the text inside the list's brackets, for
    :func:`line_steps`. Otherwise ``value`` is the whole line decoded and ``steps`` is None.
    Raises :class:`RecordError` for a line that is not JSON.

    The line is cut in three: the object's opening up to ``"steps":`` (the same for every line of
    a task: decoded once, then cached), the list, and the members after it. The cut is checked,
    not trusted: the opening must decode when closed by ``"steps":null}`` (so the key cut at is a
    key of the top-level object), the rest when opened by ``{``, and :func:`decode_steps` checks
    that the list holds JSON objects joined by commas; the three parts put together are then
    valid JSON, and decode to the same. Any other line is decoded whole.
    """
    start = line.find(_KEY + "[")
    if start > 0:
        begin = start + len(_KEY) + 1  # just after "["
        end = line.rfind(_AFTER_STEPS, begin)  # this writer's layout: the costs follow the steps
        if end < 0:
            end = begin if line.startswith("]", begin) else line.find("}]", begin) + 1
        head = _head(line[:start]) if end > 0 else None
        if head is not None:
            rest = line[end + 1 :].rstrip()
            try:  # a bad line, or the cut fell inside a string: decode it whole
                tail = json.loads("{" + rest[1:]) if rest.startswith(",") else {} if rest == "}" else None
            except json.JSONDecodeError:
                tail = None
            if isinstance(tail, dict) and "steps" not in tail:
                return {**head, **tail}, line[begin:end]
    return _loads(line), None


def decode_steps(text: str) -> tuple[Step, ...] | None:
    """The steps of the text :func:`split_line` cut out; None if it is not a list of JSON objects.

    Raises ``ValueError`` for objects that are not valid steps.
    """
    if not text:
        return ()
    if not (text.startswith("{") and text.endswith("}")):
        return None
    bodies = text[1:-1].split("},{")
    steps = list(map(_DECODED.get, bodies))
    if not all(steps):  # decode the steps not seen yet
        for i, step in enumerate(steps):
            if step is None:
                try:
                    data = json.loads("{" + bodies[i] + "}")
                except json.JSONDecodeError:
                    return None  # "},{" inside a string, or not JSON: let the whole line decide
                steps[i] = Step.from_json(data)
                _remember(_DECODED, bodies[i], steps[i])
    return tuple(steps)  # type: ignore[arg-type]  # no None left


def check_object(data: Any) -> dict[str, Any]:
    """``data`` if it is a JSON object of this format version, else :class:`RecordError`."""
    if not isinstance(data, dict):
        raise RecordError(f"a record is a JSON object, got {type(data).__name__}")
    version = data.get("v")
    if version != FORMAT_VERSION:
        raise RecordError(f"unsupported record format version {version!r} (this reader: {FORMAT_VERSION})")
    return data


def json_steps(data: dict[str, Any]) -> tuple[Step, ...]:
    """The steps of a decoded line object."""
    try:
        return steps_from_json(data["steps"])
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise RecordError(f"malformed record: {type(err).__name__}: {err}") from None


def line_steps(line: str, data: dict[str, Any], text: str | None) -> tuple[Step, ...]:
    """The steps of ``line``, from what :func:`split_line` returned for it."""
    try:
        steps = decode_steps(text) if text is not None else None
    except (TypeError, ValueError) as err:
        raise RecordError(f"malformed record: {type(err).__name__}: {err}") from None
    if steps is not None:
        return steps
    return json_steps(_loads(line) if text is not None else data)


# ---------------------------------------------------------------------------------------------
# Reading a log


#: bad lines warned about one by one; the rest are counted in one last warning
_MAX_WARNINGS = 10


@dataclass
class Scan(Generic[_R]):
    """What reading a log found."""

    items: list[_R] = field(default_factory=list)
    #: lines left out by the filter, by (workload key, target): [lines, valid measurements]
    others: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    bad: list[tuple[int, str]] = field(default_factory=list)  # (line number, why)
    torn: int = 0  # number of the last line if it lacks its newline (a writer was killed mid-line)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: decoding allocates many containers but no cycles, and
    the collections they would trigger, each walking every live object, take half the time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _lines(f: BinaryIO, size: int, found: Scan[Any]) -> Iterator[tuple[int, str]]:
    """The numbered non-blank lines of the first ``size`` bytes of ``f``; notes a torn last line."""
    pos = 0
    for lineno, raw in enumerate(f, 1):
        pos += len(raw)
        if pos > size:  # appended after the size was taken: keep only the part before it
            raw = raw[: len(raw) - (pos - size)]
        if not raw.endswith(b"\n"):
            found.torn = lineno
        if raw and not raw.isspace():
            yield lineno, raw.decode("utf-8", "replace")
        if pos >= size:
            return


def scan(
    f: BinaryIO,
    size: int,
    build: Callable[[dict[str, Any], tuple[Step, ...], int], _R],
    workload_key: str | None = None,
    target: str | None = None,
) -> Scan[_R]:
    """Decode the first ``size`` bytes of log ``f`` into ``build(object, steps, line number)`` per line.

    Lines of other workload keys or targets than those given are decoded only as far as the
    filter needs, and counted. ``build`` raises :class:`RecordError` for a bad line.
    """
    found: Scan[_R] = Scan()
    with _gc_paused():
        for lineno, line in _lines(f, size, found):
            try:
                data, text = split_line(line)
                check_object(data)
                if (workload_key is None or data.get("workload_key") == workload_key) and (
                    target is None or data.get("target") == target
                ):
                    found.items.append(build(data, line_steps(line, data, text), lineno))
                    continue
                counts = found.others.setdefault(
                    (str(data.get("workload_key")), str(data.get("target"))), [0, 0]
                )
                counts[0] += 1
                counts[1] += data.get("error") == "NO_ERROR" and bool(data.get("costs"))
            except RecordError as err:
                found.bad.append((lineno, str(err)))
    return found


def check(found: Scan[Any], path: Path) -> None:
    """Warn about the lines skipped (:class:`RecordWarning`); raise :class:`RecordError` if no line
    at all was a record (unless the only line is one truncated by a killed writer)."""
    bad = found.bad
    only_torn = len(bad) == 1 and bad[0][0] == found.torn
    if bad and not found.items and not found.others and not only_torn:
        raise RecordError(f"{path} is not an autosched tuning log: line {bad[0][0]}: {bad[0][1]}")
    for lineno, why in bad[:_MAX_WARNINGS]:
        what = "a truncated last line (a writer killed mid-line?)" if lineno == found.torn else "a bad line"
        warn(f"{path}:{lineno}: skipped {what}: {why}", RecordWarning, stacklevel=3)
    if len(bad) > _MAX_WARNINGS:
        warn(f"{path}: skipped {len(bad) - _MAX_WARNINGS} more bad lines", RecordWarning, stacklevel=3)


# ---------------------------------------------------------------------------------------------
# The file (locks, appends, atomic replaces)


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (one ``write`` call unless the system writes less)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def open_for_append(path: Path) -> int:
    """``path`` opened for appending (and reading) and locked exclusively; created if missing.

    After waiting for the lock, the file is checked to still be the one at ``path``: a distill in
    place replaces the file while appenders wait, and they must then append to the new file, not
    to the replaced one.
    """
    while True:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.path.samestat(os.fstat(fd), os.stat(path)):
                return fd
        except FileNotFoundError:  # unlinked while we waited: open it again
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


@contextlib.contextmanager
def open_log(path: Path, *, exclusive: bool = False) -> Iterator[tuple[BinaryIO, int]]:
    """The log opened for reading, and the size of its prefix made of whole appends.

    The size is taken under a shared lock, so no append is half-written up to it; the lock is then
    released, and appenders go on while the file is read. With ``exclusive``, an exclusive lock is
    taken instead and held until the context exits. A missing file raises ``FileNotFoundError``
    saying so.
    """
    try:
        f = open(path, "rb")  # noqa: SIM115 (closed by the with below)
    except FileNotFoundError:
        raise FileNotFoundError(f"tuning log {path} does not exist") from None
    with f:
        fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        size = os.fstat(f.fileno()).st_size
        if not exclusive:
            fcntl.flock(f, fcntl.LOCK_UN)
        yield f, size


def write_atomic(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Replace ``path`` by a file holding ``data``, atomically (a temporary file, then ``os.replace``).

    The new file gets the usual permissions (``0o666`` less the umask), not a temporary file's.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        try:
            write_all(fd, data)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
