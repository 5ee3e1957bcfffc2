"""Text that autosched writes into Makefiles: plain words only, safe comments, and the settings
(compiler, flags, C standard, OpenMP) shared by the exported kernel and the exported network."""

from __future__ import annotations

import re

from ..backends.c import openmp_flag
from ..diagnostics import printable
from ..target import Target


def make_comment(text: str) -> str:
    """``text`` made safe as the rest of a Makefile comment line: printable (no newline), and no
    backslash at its end (a backslash-newline would continue the comment onto the next line)."""
    safe = printable(text, limit=400)
    return safe + "." if safe.endswith("\\") else safe


#: the characters of a word autosched writes into a Makefile: none is special to make or a shell
MAKE_WORD = re.compile(r"[A-Za-z0-9_.+/=,:@%-]+")


def make_words(words: list[str]) -> str:
    """Words as a Makefile variable value. Each must be of :data:`MAKE_WORD` (targets read from a
    log are checked to be: see :mod:`autosched.records.check`); anything else is refused."""
    for word in words:
        if not MAKE_WORD.fullmatch(word):
            raise ValueError(f"refusing to write {printable(word, 80)!r} into a Makefile: not a plain word")
    return " ".join(words)


#: glibc's vector math (libmvec), which the kernels call where gcc builds them for x86_64 glibc: linked
#: only while ``CC`` builds for that (``make CC=aarch64-linux-gnu-gcc`` of the same export links none)
_MVEC = "LDLIBS += $(if $(findstring x86_64-linux-gnu,$(shell $(CC) -dumpmachine)),-lmvec)\n"


def make_settings(target: Target, portable: bool, openmp: bool) -> str:
    """The Makefile lines choosing the compiler (the target's unless ``CC`` is given), the flags
    (the target's unless ``CFLAGS`` is given), the C standard, OpenMP and ``RUN_WITH``."""
    dropped = {"-fPIC", "-shared", openmp_flag(target)}
    cflags = [f for f in target.cflags(shared=False) if f not in dropped and not f.startswith("-std=")]
    mvec = _MVEC if "-lmvec" in target.libs() else ""
    return f"""\
ifeq ($(origin CC),default)
CC = {make_words([target.cc or "gcc"])}
endif
CFLAGS ?= {make_words(cflags)}
STD = {"-std=c99" if portable else "-std=gnu11"}
OPENMP = {openmp_flag(target) if openmp else ""}
{mvec}LDLIBS += -lm
RUN_WITH ?=
"""
