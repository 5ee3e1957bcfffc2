"""Buffers and C calls for extern stages: ``decl_buffer``, ``call_extern``, ``call_pure_extern``.

A :class:`DeclBuffer` is what an extern stage's ``fcompute(ins, outs)`` receives for each input
and output (TVM's ``Buffer``): its ``shape``, ``dtype``, ``strides`` (row-major),
``elem_offset`` (0) and ``data`` (the pointer to its first element, for a C call). Expressions
over buffers are nodes of this module: :class:`BufferData` (a pointer), :class:`BufferRead`
(an element read through ``ib.buffer_ptr``) and :class:`ExternCall` (a call of a C function,
which may also appear in an ordinary ``compute``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..dtypes import dtype as _dtype
from .ccode import NO_CODE, CCode, c_symbol
from .extent import check_extent
from .nodes import Const, Expr, ExprLike, Extent, as_expr, const


class DeclBuffer:
    """A buffer of ``shape`` and ``dtype`` (what ``decl_buffer`` makes): compact and row-major
    unless ``declared`` strides say otherwise (tensor intrinsics take strided regions; extern stages
    need compact buffers); compared by identity."""

    __slots__ = ("name", "shape", "dtype", "declared")

    def __init__(
        self, shape: Sequence[Extent], dtype: str, name: str, declared: Sequence[Extent] | None = None
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"buffer names must be non-empty strings, got {name!r}")
        raw = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        self.name = name
        self.shape: tuple[Extent, ...] = tuple(check_extent(d, f"buffer {name!r}") for d in raw)
        self.dtype = _dtype(dtype).name
        if declared is not None and len(tuple(declared)) != len(self.shape):
            n = len(tuple(declared))
            raise ValueError(f"buffer {name!r}: {n} strides for {len(self.shape)} dimensions")
        self.declared: tuple[Extent, ...] | None = None if declared is None else tuple(declared)

    @property
    def data(self) -> BufferData:
        """The pointer to the buffer's first element (pass it to a C function)."""
        return BufferData(self, const(0))

    @property
    def strides(self) -> tuple[Extent, ...]:
        """Element strides: the declared ones, else row-major (``(shape[1] * shape[2], shape[2], 1)``
        for three dims)."""
        return self.declared if self.declared is not None else self.compact_strides

    @property
    def compact_strides(self) -> tuple[Extent, ...]:
        """The row-major strides of the buffer's shape."""
        out: list[Extent] = [1] * len(self.shape)
        for d in range(len(self.shape) - 2, -1, -1):
            a, b = out[d + 1], self.shape[d + 1]
            out[d] = a * b if isinstance(a, int) and isinstance(b, int) else as_expr(b) * a
        return tuple(out)

    @property
    def elem_offset(self) -> Const:
        """Elements before the first one: always 0 here (buffers are whole arrays)."""
        return const(0)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def access_ptr(
        self, access_mask: object = "rw", ptr_type: str = "handle", offset: ExprLike = 0
    ) -> BufferData:
        """The pointer to element ``offset`` (TVM's ``access_ptr``; the access mask is not needed)."""
        return BufferData(self, as_expr(offset))

    def __repr__(self) -> str:
        return f"DeclBuffer({self.name}, shape=({', '.join(str(d) for d in self.shape)}), dtype={self.dtype})"


def decl_buffer(
    shape: Sequence[Extent] | Extent,
    dtype: str = "float32",
    name: str = "buffer",
    data: object = None,
    strides: Sequence[Extent] | None = None,
    elem_offset: ExprLike | None = None,
    scope: str = "",
    data_alignment: int = -1,
    offset_factor: int = 0,
) -> DeclBuffer:
    """A buffer for ``extern(..., in_buffers=, out_buffers=)`` or for a tensor intrinsic's
    ``decl_tensor_intrin(..., binds={tensor: buffer})`` (TVM's ``decl_buffer``).

    Extern buffers are the kernel's whole, compact arrays (their ``strides``, if given, must be
    row-major); an intrinsic's buffer may declare ``strides`` with ``asc.var`` variables, which
    become ``int`` parameters of its C. ``elem_offset`` must be 0 (the pointer always points at
    the first element); ``data``, ``scope``, ``data_alignment`` and ``offset_factor`` are accepted
    for te's signature and not needed.
    """
    if data is not None:
        raise ValueError(f"buffer {name!r}: data= is not supported (the pointer is always the tensor's)")
    buf = DeclBuffer(shape if isinstance(shape, (tuple, list)) else (shape,), dtype, name, strides)
    if elem_offset is not None and as_expr(elem_offset) != Const(0):
        raise ValueError(f"buffer {name!r}: elem_offset must be 0 (extern buffers are whole arrays)")
    return buf


@dataclass(frozen=True, slots=True)
class BufferAccess(Expr):
    """A buffer at a flat element ``index``: the base of reads and pointers, here (over a
    :class:`DeclBuffer`) and in the lowered IR (over its buffers)."""

    buffer: Any
    index: Expr

    @property
    def dtype(self) -> str:
        return str(self.buffer.dtype)

    def children(self) -> tuple[Expr, ...]:
        return (self.index,)

    def map_children(self, fn: Callable[[Expr], Expr]) -> BufferAccess:
        index = fn(self.index)
        return self if index is self.index else type(self)(self.buffer, index)

    def render(self, fmt: Callable[[Expr], str]) -> str:
        return f"{self.buffer.name}[{fmt(self.index)}]"


@dataclass(frozen=True, slots=True)
class BufferData(BufferAccess):
    """The address of element ``index`` of ``buffer`` (``buffer.data``, ``access_ptr``)."""

    @property
    def dtype(self) -> str:
        return "handle"

    def render(self, fmt: Callable[[Expr], str]) -> str:
        return f"&{self.buffer.name}[{fmt(self.index)}]"


@dataclass(frozen=True, slots=True)
class BufferRead(BufferAccess):
    """Element ``index`` (flat) of ``buffer`` (``p[i]`` of ``ib.buffer_ptr(buffer)``)."""


@dataclass(frozen=True, slots=True)
class ExternCall(Expr):
    """A call of the C function ``name`` returning ``type`` (``void`` for a statement); ``code`` is
    the C it needs (its source, header, library)."""

    name: str
    args: tuple[Expr, ...]
    type: str
    pure: bool = False
    code: CCode = NO_CODE

    @property
    def dtype(self) -> str:
        return self.type

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def map_children(self, fn: Callable[[Expr], Expr]) -> ExternCall:
        args = tuple(fn(a) for a in self.args)
        if all(a is b for a, b in zip(args, self.args, strict=True)):
            return self
        return ExternCall(self.name, args, self.type, self.pure, self.code)

    def render(self, fmt: Callable[[Expr], str]) -> str:
        tag = f" /*c:{self.code.digest()}*/" if self.code.sources or self.code.libs else ""
        return f"{self.name}({', '.join(fmt(a) for a in self.args)}){tag}"


def _arg(x: Any) -> Expr:
    if isinstance(x, DeclBuffer):
        return x.data
    return as_expr(x)


def _call(dtype: str, func_name: str, args: Sequence[Any], pure: bool, code: dict[str, Any]) -> ExternCall:
    name = c_symbol(func_name)
    rtype = dtype if dtype in ("void", "handle") else _dtype(dtype).name
    return ExternCall(name, tuple(_arg(a) for a in args), rtype, pure, CCode.of(**code))


def call_extern(dtype: str, func_name: str, *args: Any, **code: Any) -> ExternCall:
    """A call of the C function ``func_name`` returning ``dtype`` (``"void"`` or ``"handle"`` for a
    statement): in an extern stage's ``fcompute`` or ir_builder (buffers pass as pointers), or in
    a ``compute`` (applied per element). Keywords give the C it needs: ``c_source`` (text, e.g.
    ``static inline float my_act(float x) {...}``), ``headers``, ``libs``, ``include_dirs``,
    ``lib_dirs`` (see :class:`~autosched.te.ccode.CCode`)."""
    return _call(dtype, func_name, args, False, code)


def call_pure_extern(dtype: str, func_name: str, *args: Any, **code: Any) -> ExternCall:
    """:func:`call_extern` of a function without side effects (same code here)."""
    return _call(dtype, func_name, args, True, code)

