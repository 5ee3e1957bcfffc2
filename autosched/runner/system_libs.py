"""System libraries that autosched's own extern calls need, looked for before anything compiles.

``call_packed("tvm.contrib.cblas.matmul", ...)`` (and :func:`autosched.contrib.cblas.matmul`)
includes ``cblas.h`` and links OpenBLAS. Where OpenBLAS's development files are missing, the
compiler would stop on ``fatal error: cblas.h: No such file or directory`` deep in a build log;
:func:`check_system_libraries` asks the target's compiler where it searches for headers and
libraries (``-E -v`` and ``-print-search-dirs``, once per compiler command) and says in one line
what to install instead. Only headers and libraries named in :data:`PROVIDERS` are looked for: a
user's own ``headers=`` / ``libs=`` reach the compiler as given.
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ..target import Target
from ..te.ccode import CCode
from .compile import BuildError

OPENBLAS = "the OpenBLAS development files (Debian/Ubuntu: apt-get install libopenblas-dev)"

#: a header or library (``-l`` name) autosched's extern calls use -> what to install to get it
PROVIDERS = {"cblas.h": OPENBLAS, "openblas": OPENBLAS}

_INCLUDES_START = "#include <...> search starts here:"
_INCLUDES_END = "End of search list."


class MissingLibrary(BuildError):
    """A header or library that a kernel's extern call needs is not where the compiler looks; the
    one-line message says what to install. Raised before the kernel is compiled."""


def find_header(header: str, include_dirs: Sequence[str | os.PathLike[str]]) -> Path | None:
    """The first ``DIR/header`` of ``include_dirs`` that exists, or None."""
    for folder in include_dirs:
        path = Path(folder, header)
        if path.is_file():
            return path
    return None


def find_library(lib: str, lib_dirs: Sequence[str | os.PathLike[str]]) -> Path | None:
    """The first shared or static library ``lib`` (``-l`` name: ``libNAME.so`` or ``libNAME.a``) in
    ``lib_dirs``, or None."""
    for folder in lib_dirs:
        for name in (f"lib{lib}.so", f"lib{lib}.a"):
            path = Path(folder, name)
            if path.is_file():
                return path
    return None


@functools.cache
def compiler_dirs(command: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The directories the compiler ``command`` (the compiler and its flags) searches for
    ``#include <...>`` headers and for libraries, in order; ``((), ())`` when it cannot be asked
    (not installed, or it does not answer as gcc and clang do)."""
    try:
        pre = subprocess.run([*command, "-E", "-v", "-x", "c", os.devnull], capture_output=True,
                             text=True, timeout=60)
        dirs = subprocess.run([*command, "-print-search-dirs"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return (), ()
    lines = pre.stderr.splitlines()
    if _INCLUDES_START not in lines or _INCLUDES_END not in lines:
        return (), ()
    start, end = lines.index(_INCLUDES_START), lines.index(_INCLUDES_END)
    includes = tuple(line.strip() for line in lines[start + 1 : end])
    libs: tuple[str, ...] = ()
    for line in dirs.stdout.splitlines():
        if line.startswith("libraries: "):
            libs = tuple(d for d in line.partition("=")[2].split(os.pathsep) if d)
    return includes, libs


def check_system_libraries(code: CCode, target: Target) -> None:
    """Raise :class:`MissingLibrary` when a header or library of ``code`` that :data:`PROVIDERS`
    names is not found where ``target``'s compiler (with ``code``'s ``-I``/``-L`` directories)
    looks. Nothing is run when ``code`` names none of them; a compiler that cannot be asked is let
    be (its compile then says what is wrong)."""
    headers = [h for h in code.headers if h in PROVIDERS]
    libs = [lib for lib in code.libs if lib in PROVIDERS]
    if not headers and not libs:
        return
    cc = target.cc or "gcc"
    includes, lib_dirs = compiler_dirs((cc, *target.cflags(shared=True)))
    if not includes:
        return
    for header in headers:
        if find_header(header, [*code.include_dirs, *includes]) is None:
            raise MissingLibrary(f"{header} is not in the include path of {cc}: install {PROVIDERS[header]}")
    for lib in libs:
        if lib_dirs and find_library(lib, [*code.lib_dirs, *lib_dirs]) is None:
            raise MissingLibrary(f"lib{lib} is not in the library path of {cc}: install {PROVIDERS[lib]}")
