"""The ONNX operator table as text: the README's list (between the ``onnx-ops`` markers) and
``autosched ops --onnx``, written from :data:`.onnx_table.OPS` once every converter registered."""

from __future__ import annotations

from . import onnx_import  # noqa: F401  (imports every converter module, filling OPS)
from .onnx_table import OPS


def _rows() -> list[tuple[list[str], tuple[str, ...], str]]:
    """(operators, attributes, forms) of each row: operators of equal attributes and forms share one."""
    rows: dict[tuple[tuple[str, ...], str], list[str]] = {}
    for op, spec in OPS.items():
        rows.setdefault((spec.attrs, spec.doc), []).append(op)
    table = [(sorted(ops, key=str.lower), attrs, doc) for (attrs, doc), ops in rows.items()]
    return sorted(table, key=lambda row: row[0][0].lower())


def table_markdown() -> str:
    """The supported operators as a Markdown table (the README section between the
    ``onnx-ops`` markers), one row per converter."""
    rows = ["| operator | attributes | supported forms |", "|---|---|---|"]
    for ops, attrs, doc in _rows():
        listed = ", ".join(f"`{a}`" for a in attrs) or "-"
        rows.append(f"| {', '.join(ops)} | {listed} | {doc} |")
    return "\n".join(rows) + "\n"


def table_text() -> str:
    """The supported operators as plain text (``autosched ops --onnx``), one paragraph per converter."""
    lines = []
    for ops, attrs, doc in _rows():
        lines.append(", ".join(ops))
        if attrs:
            lines.append(f"    attributes: {', '.join(attrs)}")
        lines.append(f"    {doc.replace('`', '')}")
    return "\n".join(lines) + "\n"


#: the README lines around the generated table
MARKERS = ("<!-- onnx-ops:start -->\n", "<!-- onnx-ops:end -->\n")


def with_table(text: str) -> str:
    """``text`` (the README) with the part between the ``onnx-ops`` markers replaced by
    :func:`table_markdown`; ValueError if the markers are missing."""
    start, end = text.find(MARKERS[0]), text.find(MARKERS[1])
    if start < 0 or end < start:
        raise ValueError(f"the markers {MARKERS[0].strip()} and {MARKERS[1].strip()} are missing")
    return text[: start + len(MARKERS[0])] + table_markdown() + text[end:]
