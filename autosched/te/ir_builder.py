"""``ir_builder``: the body of an extern stage written as loops, conditions, stores and C calls.

The subset of TVM's ``tir.ir_builder`` that extern stages use::

    def fcompute(ins, outs):
        ib = asc.ir_builder.create()
        a, b = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, n, name="i") as i:
            with ib.if_scope(i > 0):
                b[i] = a[i] + a[i - 1]
            with ib.else_scope():
                b[i] = a[i]
        ib.emit(asc.call_extern("void", "log_done", n))
        return ib.get()

Pointers index flat (``p[i * m + j]``). ``ib.allocate(dtype, shape)`` gives a scratch array (a C
array on the stack, in the scope where it is called) indexed the same way; ``ib.let(name, value)``
evaluates ``value`` once, there, and gives an expression that reads it. The statements are the
frozen dataclasses of this module; lowering turns them into the loop-nest IR of the kernel.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..dtypes import dtype as _dtype
from .buffer import BufferRead, DeclBuffer, ExternCall
from .nodes import Expr, ExprLike, Extent, Var, as_expr, cast, to_str

MAX_SCRATCH_BYTES = 1 << 20
"""The largest ``ib.allocate`` array (it is a C stack array)."""


class ExternStmt:
    """Base of the statements of an extern stage's body."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Evaluate(ExternStmt):
    """Evaluate ``value`` for its effect (a C call as a statement)."""

    value: Expr


@dataclass(frozen=True, slots=True)
class BufferStore(ExternStmt):
    """``buffer[index] = value`` (flat index)."""

    buffer: DeclBuffer
    index: Expr
    value: Expr


@dataclass(frozen=True, slots=True)
class Loop(ExternStmt):
    """``for var in [begin, begin + extent)``; ``kind`` is "serial" or "parallel"."""

    var: Var
    begin: Extent
    extent: Extent
    kind: str
    body: ExternStmt


@dataclass(frozen=True, slots=True)
class Branch(ExternStmt):
    """``if cond: then else: otherwise``."""

    cond: Expr
    then: ExternStmt
    otherwise: ExternStmt | None = None


@dataclass(frozen=True, slots=True)
class AllocBuffer(ExternStmt):
    """A scratch array ``buffer`` for the rest of the enclosing block (``ib.allocate``)."""

    buffer: DeclBuffer


@dataclass(frozen=True, slots=True)
class Block(ExternStmt):
    """Statements in order."""

    stmts: tuple[ExternStmt, ...]


def format_extern(s: ExternStmt) -> str:
    """One line that spells ``s`` (part of an extern stage's definition, hence of its DAG key)."""
    if isinstance(s, Evaluate):
        return to_str(s.value)
    if isinstance(s, BufferStore):
        return f"{s.buffer.name}[{to_str(s.index)}] = {to_str(s.value)}"
    if isinstance(s, Loop):
        return f"for {s.var.name} in [{s.begin}, +{s.extent}) {s.kind} {{ {format_extern(s.body)} }}"
    if isinstance(s, Branch):
        other = "" if s.otherwise is None else f" else {{ {format_extern(s.otherwise)} }}"
        return f"if {to_str(s.cond)} {{ {format_extern(s.then)} }}{other}"
    if isinstance(s, Block):
        return "; ".join(format_extern(x) for x in s.stmts)
    if isinstance(s, AllocBuffer):
        return f"allocate {s.buffer.name}: {s.buffer.dtype}[{', '.join(str(d) for d in s.buffer.shape)}]"
    raise TypeError(f"not an extern statement: {s!r}")


def block(stmts: list[ExternStmt]) -> ExternStmt:
    """One statement for ``stmts`` (an empty block for none)."""
    return stmts[0] if len(stmts) == 1 else Block(tuple(stmts))


class BufferPtr:
    """A buffer seen as a flat pointer: ``p[i]`` reads an element, ``p[i] = x`` stores one."""

    def __init__(self, builder: IRBuilder, buffer: DeclBuffer) -> None:
        self._builder = builder
        self.buffer = buffer

    @staticmethod
    def _index(index: ExprLike) -> Expr:
        if isinstance(index, tuple):
            raise IndexError("a buffer pointer takes one flat index (p[i * m + j])")
        e = as_expr(index)
        if _dtype(e.dtype).is_float or e.dtype == "bool":
            raise TypeError(f"a buffer index must be an integer, got {e.dtype}: {e}")
        return e

    def __getitem__(self, index: ExprLike) -> BufferRead:
        return BufferRead(self.buffer, self._index(index))

    def __setitem__(self, index: ExprLike, value: ExprLike) -> None:
        v = cast(as_expr(value, self.buffer.dtype), self.buffer.dtype)
        self._builder.emit(BufferStore(self.buffer, self._index(index), v))


class IRBuilder:
    """Collects statements; ``with`` blocks open loops and conditions (see the module docstring)."""

    def __init__(self) -> None:
        self._stack: list[list[ExternStmt]] = [[]]
        self._names: set[str] = set()

    def buffer_ptr(self, buf: DeclBuffer) -> BufferPtr:
        """Element access to ``buf`` (an ``ins[i]`` or ``outs[j]`` of the extern stage)."""
        if not isinstance(buf, DeclBuffer):
            raise TypeError(f"buffer_ptr takes a buffer (ins[i], outs[j]), got {type(buf).__name__}")
        return BufferPtr(self, buf)

    def emit(self, stmt: ExternStmt | ExprLike) -> None:
        """Append a statement, or a call evaluated as one."""
        if isinstance(stmt, ExternStmt):
            self._stack[-1].append(stmt)
        elif isinstance(stmt, ExternCall):
            self._stack[-1].append(Evaluate(stmt))
        else:
            raise TypeError(f"emit takes a statement or a call_extern, got {stmt!r}")

    def _unique(self, name: str) -> str:
        unique, n = name, 1
        while unique in self._names:
            unique, n = f"{name}_{n}", n + 1
        self._names.add(unique)
        return unique

    def allocate(
        self, dtype: str, shape: Extent | tuple[Extent, ...], name: str = "buf", scope: str = ""
    ) -> BufferPtr:
        """A scratch array of ``shape`` (fixed sizes) for the rest of the current block, indexed
        flat like ``buffer_ptr``; it lives on the C stack whatever ``scope`` says (at most
        :data:`MAX_SCRATCH_BYTES`: larger temporaries belong in a stage of their own)."""
        dims = shape if isinstance(shape, tuple) else (shape,)
        if not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims):
            raise ValueError(f"ib.allocate {name!r}: the shape must be positive ints, got {dims}")
        d = _dtype(dtype)
        size = math.prod(dims) * d.bytes
        if size > MAX_SCRATCH_BYTES:
            raise ValueError(
                f"ib.allocate {name!r}: {size} bytes is more than a stack array may take "
                f"({MAX_SCRATCH_BYTES}); compute the temporary in a stage of its own"
            )
        buf = DeclBuffer(dims, d.name, self._unique(name))
        self.emit(AllocBuffer(buf))
        return BufferPtr(self, buf)

    def let(self, name: str, value: ExprLike) -> Expr:
        """``value`` evaluated here, once (into a one-element scratch array), and an expression
        that reads it (te's ``ib.let`` gives a variable; this reads the same value)."""
        v = as_expr(value)
        p = self.allocate(v.dtype, 1, name)
        p[0] = v
        return p[0]

    @contextmanager
    def for_range(
        self, begin: ExprLike, end: ExprLike, name: str = "i", dtype: str = "int32", kind: str = "serial"
    ) -> Iterator[Var]:
        """A loop over ``[begin, end)``; yields its variable (named ``name``, made unique)."""
        if kind not in ("serial", "parallel"):
            raise ValueError(f"for_range kind {kind!r}: extern loops are 'serial' or 'parallel'")
        v = Var(self._unique(name), _dtype(dtype).name)
        b, e = as_expr(begin), as_expr(end)
        extent = e - b if b != as_expr(0) else e
        self._stack.append([])
        yield v
        body = block(self._stack.pop())
        self._stack[-1].append(Loop(v, b, extent, kind, body))

    @contextmanager
    def if_scope(self, cond: ExprLike) -> Iterator[None]:
        """Statements run where ``cond`` holds."""
        self._stack.append([])
        yield
        then = block(self._stack.pop())
        self._stack[-1].append(Branch(as_expr(cond), then))

    @contextmanager
    def else_scope(self) -> Iterator[None]:
        """Statements run where the ``if_scope`` just closed did not hold."""
        last = self._stack[-1][-1] if self._stack[-1] else None
        if not isinstance(last, Branch) or last.otherwise is not None:
            raise ValueError("else_scope must directly follow an if_scope")
        self._stack.append([])
        yield
        otherwise = block(self._stack.pop())
        self._stack[-1][-1] = Branch(last.cond, last.then, otherwise)

    def get(self) -> ExternStmt:
        """The statements built so far (what ``fcompute`` returns)."""
        if len(self._stack) != 1:
            raise ValueError("get() inside an open for_range/if_scope")
        if not self._stack[0]:
            raise ValueError("the ir_builder holds no statement")
        return block(list(self._stack[0]))


def create() -> IRBuilder:
    """A new builder (TVM's ``ir_builder.create()``)."""
    return IRBuilder()
