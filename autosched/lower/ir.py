"""The loop-nest IR that lowering produces and every emitter prints.

Statements are frozen dataclasses. Buffers are flat: a ``Store``/``BufLoad`` carries one linear
index. The IR already carries what GPU dialects need: thread-bound loops, memory scopes and
barriers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..expr import NO_CODE, BinOp, BufferAccess, CCode, Expr, Extent, Var, as_expr, to_str
from ..te.extent import ext_mul
from .simplify import loop_end, simplify

# "unrolled" loops are expanded by lowering; "unroll_hint" loops are left to the C compiler's
# unroller (``#pragma GCC unroll``), which keeps big auto-unrolled nests cheap to lower
LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled", "unroll_hint", "thread")


@dataclass(frozen=True, slots=True)
class Buffer:
    """A flat array: an argument (global), a heap temporary (global), or a local/shared tile."""

    name: str
    shape: tuple[Extent, ...]
    dtype: str
    scope: str = "global"
    is_arg: bool = False
    strides: tuple[int, ...] | None = None  # padded row strides (storage_align); None: row-major

    @property
    def size(self) -> Extent:
        """Elements: an int, or an expression of shape variables (rows padded by storage_align:
        the first dimension times its stride)."""
        if self.strides is not None and self.shape:
            return ext_mul(self.shape[0], self.strides[0])
        n: Extent = 1
        for s in self.shape:
            n = ext_mul(n, s) if n != 1 else s
        return n

    def row_strides(self) -> tuple[Extent, ...]:
        """The element stride of each dimension (row-major unless padded by storage_align;
        expressions where the shape is symbolic)."""
        return self.strides if self.strides is not None else tuple(strides(self.shape))


def strides(shape: Sequence[Extent]) -> list[Extent]:
    """Row-major strides of ``shape`` (expressions where the shape is symbolic)."""
    out: list[Extent] = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        a, b = out[d + 1], shape[d + 1]
        if isinstance(a, int) and isinstance(b, int):
            out[d] = a * b
        else:
            out[d] = simplify(BinOp("mul", as_expr(a), as_expr(b), "int32")) if a != 1 else b
    return out


@dataclass(frozen=True, slots=True)
class BufLoad(BufferAccess):
    """Read ``buffer[index]``."""

    buffer: Buffer
    index: Expr


@dataclass(frozen=True, slots=True)
class BufPtr(BufferAccess):
    """The address of element ``index`` of ``buffer`` (a pointer passed to a C call)."""

    buffer: Buffer
    index: Expr

    @property
    def dtype(self) -> str:
        return "handle"

    def render(self, fmt: Callable[[Expr], str]) -> str:
        return f"&{self.buffer.name}[{fmt(self.index)}]"


class Stmt:
    """Base of statements."""

    __slots__ = ()

    def __str__(self) -> str:
        return "\n".join(format_stmt(self))


@dataclass(frozen=True, slots=True)
class Store(Stmt):
    buffer: Buffer
    index: Expr
    value: Expr


@dataclass(frozen=True, slots=True)
class For(Stmt):
    """``for var in [begin, begin + extent)``; kind is one of :data:`LOOP_KINDS`."""

    var: Var
    begin: Extent
    extent: Extent
    kind: str
    body: Stmt
    thread: str | None = None
    auto_unroll: int | None = None


@dataclass(frozen=True, slots=True)
class IfThenElse(Stmt):
    cond: Expr
    then: Stmt
    otherwise: Stmt | None = None


@dataclass(frozen=True, slots=True)
class Seq(Stmt):
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True)
class Allocate(Stmt):
    """Declare ``buffer`` for the rest of the enclosing block (global scope = heap)."""

    buffer: Buffer


@dataclass(frozen=True, slots=True)
class Barrier(Stmt):
    """Synchronize the threads of a block (GPU) on memory of ``scope``."""

    scope: str = "shared"


@dataclass(frozen=True, slots=True)
class Evaluate(Stmt):
    """Evaluate ``value`` for its effect (a C call)."""

    value: Expr


@dataclass(frozen=True, slots=True)
class PrimFunc:
    """A lowered kernel: its arguments in call order, its body, and the shape variables its
    buffers' shapes use (``int`` parameters after the buffers, in order of first appearance), the
    user C it calls (``code``: printed before it, linked with it), and its scalar arguments
    (``scalars``: parameters of their dtypes after the sizes)."""

    name: str
    args: tuple[Buffer, ...]
    body: Stmt
    sizes: tuple[Var, ...] = ()
    code: CCode = NO_CODE
    scalars: tuple[Var, ...] = ()

    def __str__(self) -> str:
        sig = ", ".join(f"{b.name}: {b.dtype}{shape_str(b.shape)}" for b in self.args)
        sig += "".join(f", {v.name}: {v.dtype}" for v in (*self.sizes, *self.scalars))
        return "\n".join([f"func {self.name}({sig}) {{", *("  " + ln for ln in format_stmt(self.body)), "}"])


# ---------------------------------------------------------------------------- calls (tensorize)


class CFunction(Protocol):
    """A file-scope C function a :class:`Call` statement calls (a tensor intrinsic's part)."""

    @property
    def requires(self) -> tuple[str, ...]:
        """The CPU extensions its C needs outside portable builds."""
        ...

    def c_name(self, part: str) -> str: ...

    def c_helpers(self, part: str, portable: bool) -> list[tuple[str, str]]:
        """(key, file-scope C text) pairs the call needs, each printed once per file."""
        ...


@dataclass(frozen=True, slots=True)
class BufAddress(Expr):
    """The address of ``buffer[index]`` (a pointer argument of a :class:`CallStmt`)."""

    buffer: Buffer
    index: Expr

    @property
    def dtype(self) -> str:
        return "handle"

    def children(self) -> tuple[Expr, ...]:
        return (self.index,)

    def map_children(self, fn: Callable[[Expr], Expr]) -> BufAddress:
        index = fn(self.index)
        return self if index is self.index else BufAddress(self.buffer, index)

    def render(self, fmt: Callable[[Expr], str]) -> str:
        return f"&{self.buffer.name}[{fmt(self.index)}]"


@dataclass(frozen=True, slots=True)
class CallStmt(Stmt):
    """A call of part ``part`` of ``func`` (defined once per file) with ``args``."""

    func: CFunction
    part: str
    args: tuple[Expr, ...]


def seq(stmts: Iterable[Stmt]) -> Stmt:
    """A flat sequence; one statement stands alone."""
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, Seq):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


EMPTY = Seq(())


def stmt_children(s: Stmt) -> tuple[Stmt, ...]:
    """The statements directly inside ``s``: a loop's body, an if's branches, a sequence's items."""
    if isinstance(s, For):
        return (s.body,)
    if isinstance(s, IfThenElse):
        return (s.then,) if s.otherwise is None else (s.then, s.otherwise)
    if isinstance(s, Seq):
        return s.stmts
    return ()


def map_children(s: Stmt, fn: Callable[[Stmt], Stmt]) -> Stmt:
    """``s`` rebuilt with ``fn`` applied to each of its :func:`stmt_children` (``s`` itself when
    ``fn`` returns every child unchanged, so that passes keep unchanged subtrees shared)."""
    if isinstance(s, For):
        body = fn(s.body)
        return s if body is s.body else For(s.var, s.begin, s.extent, s.kind, body, s.thread, s.auto_unroll)
    if isinstance(s, IfThenElse):
        then = fn(s.then)
        other = None if s.otherwise is None else fn(s.otherwise)
        return s if then is s.then and other is s.otherwise else IfThenElse(s.cond, then, other)
    if isinstance(s, Seq):
        items = [fn(x) for x in s.stmts]
        return s if all(a is b for a, b in zip(items, s.stmts, strict=True)) else seq(items)
    return s


def format_stmt(s: Stmt) -> list[str]:
    """Readable lines of a statement (for debugging and ``print(asc.lower(...))``)."""
    if isinstance(s, Store):
        return [f"{s.buffer.name}[{to_str(s.index)}] = {to_str(s.value)}"]
    if isinstance(s, For):
        extra = f" {s.thread}" if s.thread else ""
        extra += f" auto_unroll={s.auto_unroll}" if s.auto_unroll is not None else ""
        head = f"for {s.var.name} in [{s.begin}, {loop_end(s.begin, s.extent)}) {s.kind}{extra}:"
        return [head, *("  " + ln for ln in format_stmt(s.body))]
    if isinstance(s, IfThenElse):
        out = [f"if {to_str(s.cond)}:", *("  " + ln for ln in format_stmt(s.then))]
        if s.otherwise is not None:
            out += ["else:", *("  " + ln for ln in format_stmt(s.otherwise))]
        return out
    if isinstance(s, Seq):
        return [ln for x in s.stmts for ln in format_stmt(x)]
    if isinstance(s, Allocate):
        b = s.buffer
        return [f"allocate {b.name}: {b.dtype}{shape_str(b.shape)} {b.scope}"]
    if isinstance(s, Barrier):
        return [f"barrier({s.scope})"]
    if isinstance(s, CallStmt):
        return [f"{s.func.c_name(s.part)}({', '.join(to_str(a) for a in s.args)})"]
    if isinstance(s, Evaluate):
        return [to_str(s.value)]
    if hasattr(s, "format_lines"):  # statements of later modules (vector stores)
        return list(s.format_lines())
    raise TypeError(f"not a statement: {s!r}")


def shape_str(shape: tuple[Extent, ...]) -> str:
    """``[4, n, (m - 2)]``: a shape as the IR printout shows it."""
    return "[" + ", ".join(str(d) for d in shape) + "]"
