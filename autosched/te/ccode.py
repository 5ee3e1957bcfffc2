"""User C that a kernel carries: source text at file scope, headers, libraries to link.

A :class:`CCode` is plain data on an extern stage, on a ``call_extern`` node and, gathered, on the
lowered function; the C emitter prints its headers and source before the kernel, the builder passes
its directories and libraries to the compiler as separate argv items (never through a shell), and
the export writes them into the Makefile. Every name is checked here, once, against a strict
pattern, so none can carry a flag or a shell word: a bad one is a one-line ``ValueError``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

#: a library name for ``-l``: ``openblas``, ``m``, ``stdc++``, ``foo-1.2``; never a flag
LIB_NAME = re.compile(r"[A-Za-z0-9_.+][A-Za-z0-9_.+-]*")
#: a directory for ``-I`` / ``-L``: a plain path (no spaces, quotes or shell characters), not a flag
DIR_NAME = re.compile(r"[A-Za-z0-9_./+][A-Za-z0-9_./+-]*")
#: a header for ``#include <...>``: ``cblas.h``, ``sys/time.h``
HEADER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./+-]*")
#: a C function name
C_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _checked(values: Iterable[str] | str | None, pattern: re.Pattern[str], what: str) -> tuple[str, ...]:
    if values is None:
        return ()
    items = (values,) if isinstance(values, str) else tuple(values)
    for v in items:
        if not isinstance(v, str) or not pattern.fullmatch(v):
            raise ValueError(
                f"refusing {what} {v!r}: it must match {pattern.pattern} (a plain name, not a flag "
                "or a shell word)"
            )
    return tuple(dict.fromkeys(items))


def c_symbol(name: object, what: str = "C function name") -> str:
    """``name`` if it is a C identifier, else a one-line ``ValueError``."""
    if not isinstance(name, str) or not C_SYMBOL.fullmatch(name):
        raise ValueError(f"refusing {what} {name!r}: a C identifier is letters, digits and _")
    return name


@dataclass(frozen=True, slots=True)
class CCode:
    """C a kernel needs: ``sources`` (file-scope text: functions the kernel calls; define them
    ``static`` so that a kernel and its exported reference may both carry them), ``headers``
    (``#include <h>``), ``libs`` (``-l``), ``include_dirs`` (``-I``), ``lib_dirs`` (``-L``) and
    ``symbols`` (the C functions the kernel calls, kept out of its own identifiers)."""

    sources: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()
    libs: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()
    lib_dirs: tuple[str, ...] = ()
    symbols: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        c_source: str | Iterable[str] | None = None,
        headers: Iterable[str] | str | None = None,
        libs: Iterable[str] | str | None = None,
        include_dirs: Iterable[str] | str | None = None,
        lib_dirs: Iterable[str] | str | None = None,
    ) -> CCode:
        """A checked :class:`CCode` from user arguments (a name that fails its pattern is a
        ``ValueError``)."""
        sources = (c_source,) if isinstance(c_source, str) else tuple(c_source or ())
        if not all(isinstance(s, str) for s in sources):
            raise TypeError("c_source must be C source text (a str or a list of them)")
        return cls(
            tuple(dict.fromkeys(s for s in sources if s.strip())),
            _checked(headers, HEADER_NAME, "header"),
            _checked(libs, LIB_NAME, "library"),
            _checked(include_dirs, DIR_NAME, "include directory"),
            _checked(lib_dirs, DIR_NAME, "library directory"),
        )

    def __bool__(self) -> bool:
        return any((self.sources, self.headers, self.libs, self.include_dirs, self.lib_dirs, self.symbols))

    def merge(self, *others: CCode) -> CCode:
        """Everything of ``self`` and ``others``, in order, each item once."""
        parts = (self, *others)

        def union(field: str) -> tuple[str, ...]:
            return tuple(dict.fromkeys(x for p in parts for x in getattr(p, field)))

        return CCode(*(union(f) for f in CCode.__slots__))

    def with_symbols(self, *names: str) -> CCode:
        """``self`` also naming the called functions ``names``."""
        return self.merge(CCode(symbols=tuple(c_symbol(n) for n in names)))

    def compile_args(self) -> list[str]:
        """Compiler argv items before the source: ``-I DIR`` pairs."""
        return [a for d in self.include_dirs for a in ("-I", d)]

    def link_args(self) -> list[str]:
        """Linker argv items after the source: ``-L DIR`` pairs, then ``-l LIB`` pairs."""
        return [a for d in self.lib_dirs for a in ("-L", d)] + [a for lib in self.libs for a in ("-l", lib)]

    def text(self) -> str:
        """The file-scope C: the ``#include`` lines, then each source."""
        includes = "\n".join(f"#include <{h}>" for h in self.headers)
        return "\n\n".join(x for x in (includes, *self.sources) if x)

    def digest(self) -> str:
        """A short content hash (part of a DAG's structural key)."""
        data = "\0".join("\x1f".join(getattr(self, f)) for f in CCode.__slots__)
        return hashlib.sha256(data.encode()).hexdigest()[:12]


NO_CODE = CCode()
