"""The ONNX operators ``from_onnx`` reads: one table, from operator to converter and the attributes
it honours, from which the README's list and ``autosched ops --onnx`` are written.

Converters register with :func:`converter`; an attribute a converter does not list is refused in
one line naming the node, the operator and the attribute (:meth:`.onnx_context.Importer.convert`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .onnx_context import Importer
    from .onnx_rewrite import OnnxNode

#: what a converter gives for each output of its node: a builder value's name or a constant array
Result = str | np.ndarray
Converter = Callable[["Importer", "OnnxNode"], Sequence[Result]]


@dataclass(frozen=True, slots=True)
class OpSpec:
    """How an operator is imported: ``convert`` (node -> its outputs), the attributes it honours,
    and the supported forms in a few words (the README's table)."""

    convert: Converter
    attrs: tuple[str, ...]
    doc: str


#: operator -> its spec (several operators may share one spec)
OPS: dict[str, OpSpec] = {}


def converter(*ops: str, attrs: Sequence[str] = (), doc: str = "") -> Callable[[Converter], Converter]:
    """Register the decorated function as the converter of ONNX operators ``ops``."""

    def register(fn: Converter) -> Converter:
        spec = OpSpec(fn, tuple(sorted(attrs)), doc)
        for op in ops:
            if op in OPS:
                raise ValueError(f"ONNX operator {op!r} has two converters")
            OPS[op] = spec
        return fn

    return register


def attr_text(value: Any) -> str:
    """An attribute value as ONNX's helper decodes it, as text (bytes decoded)."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(attr_text(v) for v in value) + "]"
    return value.decode() if isinstance(value, bytes) else str(value)

