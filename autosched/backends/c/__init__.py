"""The ``c`` target kind: its options, defaults and compiler flags, and the backend (gcc/clang,
cffi, the isolated local runner)."""

from .backend import CBackend
from .target_kind import CKind, math_libs, openmp_flag

__all__ = ["CBackend", "CKind", "math_libs", "openmp_flag"]
