"""Safe C identifiers for tensor, buffer and loop names: nothing a user names can inject code."""

from __future__ import annotations

import re

C_KEYWORDS = frozenset(
    [
        "auto",
        "break",
        "case",
        "char",
        "const",
        "continue",
        "default",
        "do",
        "double",
        "else",
        "enum",
        "extern",
        "float",
        "for",
        "goto",
        "if",
        "inline",
        "int",
        "long",
        "register",
        "restrict",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "struct",
        "switch",
        "typedef",
        "union",
        "unsigned",
        "void",
        "volatile",
        "while",
        "_Bool",
        "_Complex",
        "_Imaginary",
        "bool",
        "true",
        "false",
        "NULL",
        "main",
        "kernel",
        "global",
        "local",
        "constant",
        "private",
        "half",
    ]
)


class Namer:
    """Maps names to distinct C identifiers, stable for the life of one printer."""

    def __init__(self, reserved: set[str] | None = None) -> None:
        self._map: dict[object, str] = {}
        self._used: set[str] = set(reserved or ())

    def __call__(self, key: object, hint: str) -> str:
        got = self._map.get(key)
        if got is not None:
            return got
        base = re.sub(r"[^A-Za-z0-9_]", "_", hint)[:48].strip("_") or "v"
        if base[0].isdigit() or base in C_KEYWORDS or base.startswith(("asc_", "_")):
            base = "v_" + base
        name, n = base, 1
        while name in self._used:
            name = f"{base}_{n}"
            n += 1
        self._used.add(name)
        self._map[key] = name
        return name
