"""Compiler and linker arguments for the user C a kernel carries, and the error when a C function
it calls exists nowhere.

Every directory and library name comes from a checked :class:`~autosched.te.ccode.CCode` and
goes to the compiler as its own argv item; nothing passes through a shell.
"""

from __future__ import annotations

import re

from ..te.ccode import CCode

#: what gcc, clang and ld say about a function that is declared nowhere or defined nowhere
_MISSING = (
    re.compile(r"implicit declaration of function [\W]?([A-Za-z_][A-Za-z0-9_]*)"),
    re.compile(r"call to undeclared function [\W]?([A-Za-z_][A-Za-z0-9_]*)"),
    re.compile(r"undefined reference to [\W]?([A-Za-z_][A-Za-z0-9_]*)"),
    re.compile(r"undefined symbol: ([A-Za-z_][A-Za-z0-9_]*)"),
)


def extern_flags(code: CCode) -> list[str]:
    """Compiler arguments before the source: include directories and, when the kernel calls user
    C, an error (not a warning) for a call of an undeclared function."""
    if not code:
        return []
    return [*code.compile_args(), "-Werror=implicit-function-declaration"]


def extern_link(code: CCode) -> list[str]:
    """Linker arguments after the source: library directories and libraries; a library that
    leaves a called function undefined fails the link (not the later load)."""
    if not code:
        return []
    return [*code.link_args(), "-Wl,--no-undefined"]


def missing_function(stderr: str, code: CCode) -> str | None:
    """The C function that the compiler or linker says is missing, when it is one the kernel calls."""
    for pattern in _MISSING:
        for m in pattern.finditer(stderr):
            if m.group(1) in code.symbols:
                return m.group(1)
    return None
