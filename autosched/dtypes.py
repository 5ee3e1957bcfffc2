"""Scalar data types: one table that the expression layer, the emitters and the runners share.

``bfloat16`` has no numpy type of its own: arrays use ``ml_dtypes.bfloat16`` (or ``uint16`` views
of the same bits, which the runners accept too), and C stores it as ``uint16_t`` bits that the
emitter converts exactly to float32 and back (round half to even). ``ml_dtypes`` is imported when
a bfloat16 array is first needed: its import takes over a second (its extension registers many
types with numpy), which every process would otherwise pay at ``import autosched``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class DType:
    """A scalar type: its name, its C spelling, its numpy equivalent and its size."""

    name: str
    c_name: str
    numpy: str
    bits: int
    is_float: bool

    @property
    def bytes(self) -> int:
        """Size of one element in bytes."""
        return self.bits // 8


_TABLE: dict[str, DType] = {
    d.name: d
    for d in (
        DType("float16", "_Float16", "float16", 16, True),
        DType("float32", "float", "float32", 32, True),
        DType("float64", "double", "float64", 64, True),
        DType("bfloat16", "uint16_t", "bfloat16", 16, True),
        DType("int8", "int8_t", "int8", 8, False),
        DType("uint8", "uint8_t", "uint8", 8, False),
        DType("int16", "int16_t", "int16", 16, False),
        DType("int32", "int32_t", "int32", 32, False),
        DType("int64", "int64_t", "int64", 64, False),
        DType("bool", "uint8_t", "bool", 8, False),
    )
}


def dtype(name: str) -> DType:
    """Look a dtype up by name; raise ``TypeError`` naming the known ones if it is unknown."""
    try:
        return _TABLE[str(name)]
    except KeyError:
        raise TypeError(f"unknown dtype {name!r}; known: {', '.join(_TABLE)}") from None


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype that holds values of ``name``."""
    d = dtype(name)
    if d.name == "bfloat16":
        return np.dtype(importlib.import_module("ml_dtypes").bfloat16)
    return np.dtype(d.numpy)


def accepts(name: str, arr_dtype: np.dtype) -> bool:
    """Whether an array of ``arr_dtype`` may be passed for a tensor of ``name`` (``bfloat16``:
    ``ml_dtypes.bfloat16`` or a ``uint16`` view of its bits)."""
    if name == "bfloat16" and arr_dtype == np.dtype(np.uint16):
        return True
    return arr_dtype == numpy_dtype(name)


def promote(a: str, b: str) -> str:
    """Result type of a binary arithmetic operation on ``a`` and ``b`` (the wider, floats first)."""
    if a == b:
        return a
    da, db = dtype(a), dtype(b)
    if da.is_float != db.is_float:
        return a if da.is_float else b
    return a if da.bits >= db.bits else b
