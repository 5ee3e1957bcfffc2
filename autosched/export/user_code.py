"""The user C of an exported kernel: the Makefile lines that link what its extern calls need.

The kernel's own file carries the user's C source and ``#include`` lines (the emitter prints them
before the kernel, in ``kernel.c`` and ``reference.c`` alike); what is left for the Makefile is
where to find headers and libraries and which libraries to link. Each name was checked when the
workload was defined (:class:`~autosched.te.ccode.CCode`); it is checked again here and written
single-quoted, so no name can become a make or shell word. The lines ``override`` the variables,
so ``make CPPFLAGS=...`` adds to them rather than dropping what the kernel needs.
"""

from __future__ import annotations

import re

from ..diagnostics import printable
from ..te.ccode import DIR_NAME, LIB_NAME, CCode

#: the line of the export's Makefile after which the user's link lines go
ANCHOR = "LDLIBS += -lm\n"


def _words(flag: str, names: tuple[str, ...], pattern: re.Pattern[str]) -> str:
    """``'-Lname' ...``: each name checked against ``pattern``, then single-quoted."""
    for n in names:
        if not pattern.fullmatch(n):
            raise ValueError(f"refusing to write {printable(n, 80)!r} into a Makefile: not a plain name")
    return " ".join(f"'{flag}{n}'" for n in names)


def link_lines(code: CCode) -> str:
    """``CPPFLAGS``/``LDFLAGS``/``LDLIBS`` additions for ``code`` ("" when it needs none)."""
    lines = []
    if code.include_dirs:
        lines.append(f"override CPPFLAGS += {_words('-I', code.include_dirs, DIR_NAME)}")
    if code.lib_dirs:
        lines.append(f"override LDFLAGS += {_words('-L', code.lib_dirs, DIR_NAME)}")
    if code.libs:
        lines.append(f"override LDLIBS += {_words('-l', code.libs, LIB_NAME)}")
    return "".join(line + "\n" for line in lines)


def with_code(makefile: str, code: CCode) -> str:
    """``makefile`` (the export's) also linking what ``code`` needs."""
    extra = link_lines(code)
    if not extra:
        return makefile
    if ANCHOR not in makefile:
        raise RuntimeError("the export's Makefile has no LDLIBS line to extend")
    return makefile.replace(ANCHOR, ANCHOR + extra, 1)
