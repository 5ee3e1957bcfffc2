"""One voice for what autosched tells a person: warnings and text that came from untrusted input.

Every warning autosched issues is an :class:`AutoschedWarning` (a ``UserWarning``, so the usual
``warnings`` filters apply) and is shown as one line ``autosched: warning: MESSAGE``. Text that comes
from a tuning log, a model file or a user's names goes through :func:`printable` before it reaches a
terminal, so escape codes and control characters are shown, never obeyed.
"""

from __future__ import annotations

import contextlib
import math
import sys
import warnings
from typing import Any, TextIO

__all__ = ["AutoschedWarning", "format_ms", "printable", "warn"]

PREFIX = "autosched: warning: "


class AutoschedWarning(UserWarning):
    """The base of every warning autosched issues."""


def format_ms(ms: float) -> str:
    """Milliseconds for people: four decimals, or three significant digits below 0.001 ms (a 0.4 µs
    kernel reads ``0.000412``, not ``0.0000``)."""
    return f"{ms:.4f}" if ms >= 0.001 or ms == 0 or not math.isfinite(ms) else f"{ms:#.3g}"


def printable(text: object, limit: int = 200) -> str:
    """``text`` made safe for a terminal: control characters (escape codes, newlines, carriage
    returns), format characters (bidi overrides, zero-width spaces), separators other than the
    space, lone surrogates (which no terminal encoding can write) and unassigned code points become
    ``\\x..``/``\\u....``/``\\U........`` escapes, and a backslash ``\\\\``; longer than ``limit``
    characters is cut with ``...``."""
    out = []
    for ch in str(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch.isprintable():
            out.append(ch)
        else:
            code = ord(ch)
            width = 2 if code < 0x100 else 4 if code < 0x10000 else 8
            out.append(f"\\{'x' if width == 2 else 'u' if width == 4 else 'U'}{code:0{width}x}")
    safe = "".join(out)
    return safe if len(safe) <= limit else safe[: limit - 3] + "..."


def warn(message: str, category: type[AutoschedWarning] = AutoschedWarning, stacklevel: int = 2) -> None:
    """Issue ``message`` (made printable) as a warning of ``category``."""
    warnings.warn(printable(message, limit=1000), category, stacklevel=stacklevel + 1)


_shown_before = warnings.showwarning


def _show(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` for autosched's warnings: one ``autosched: warning:`` line."""
    if not issubclass(category, AutoschedWarning):
        _shown_before(message, category, filename, lineno, file, line)
        return
    stream: Any = file if file is not None else sys.stderr
    with contextlib.suppress(OSError, AttributeError):  # no usable stderr: stay silent
        stream.write(f"{PREFIX}{message}\n")


warnings.showwarning = _show
