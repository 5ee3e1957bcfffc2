"""Vector nodes of the loop-nest IR (TVM-like): what :mod:`.vectorize` turns a ``vectorized`` loop
into, and what each dialect's printer prints (C vector extensions, CUDA ``float4``, OpenCL
``vloadN``/``vstoreN``) without deciding anything again.

A vector expression has ``lanes`` values of its element ``dtype``. Index vectors are
:class:`Ramp` nodes; a load or store at a ramp of stride 1 is contiguous, at another stride a
gather. Loop-invariant operands are :class:`Broadcast`; arithmetic and math calls are
:class:`VecOp`; a vector assembled from per-lane scalars is :class:`Lanes`, whose scalars may name
lanes of a vector load with :class:`Extract`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..expr import BinOp, Const, Expr
from .ir import Buffer, Stmt


class VectorExpr(Expr):
    """Base of vector expressions: ``lanes`` values of ``dtype``."""

    __slots__ = ()

    @property
    def lanes(self) -> int:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Ramp(VectorExpr):
    """The indices ``base + offset + k * stride`` of lanes ``k < lanes``. The constant ``offset``
    is kept apart from ``base`` so that the vectors of one loop share one ``base`` expression (a
    printer prints it once)."""

    base: Expr
    stride: int
    count: int
    offset: int = 0

    @property
    def dtype(self) -> str:
        return "int32"

    @property
    def lanes(self) -> int:
        return self.count

    def index(self, lane: int) -> Expr:
        """The scalar index of ``lane``, simplified as the lowering's simplifier writes it."""
        k = self.offset + lane * self.stride
        if isinstance(self.base, Const):
            return Const(int(self.base.value) + k, "int32")
        if k == 0:
            return self.base
        return BinOp("add" if k > 0 else "sub", self.base, Const(abs(k), "int32"), "int32")

    def render(self, fmt: Callable[[Expr], str]) -> str:
        return f"ramp({fmt(self.base)} + {self.offset}, {self.stride}, {self.count})"


@dataclass(frozen=True, slots=True)
class Broadcast(VectorExpr):
    """``value`` (a loop-invariant scalar) in every lane."""

    value: Expr
    count: int

    @property
    def dtype(self) -> str:
        return self.value.dtype

    @property
    def lanes(self) -> int:
        return self.count

    def render(self, fmt: Callable[[Expr], str]) -> str:
        return f"x{self.count}({fmt(self.value)})"


@dataclass(frozen=True, slots=True)
class VecLoad(VectorExpr):
    """``buffer`` at the indices of ``index``: contiguous at stride 1 (``aligned``: its first index
    is provably a multiple of the lanes, whatever the other variables), else a gather."""

    buffer: Buffer
    index: Ramp
    aligned: bool = False

    @property
    def dtype(self) -> str:
        return self.buffer.dtype

    @property
    def lanes(self) -> int:
        return self.index.count

    def render(self, fmt: Callable[[Expr], str]) -> str:
        return f"{self.buffer.name}[{fmt(self.index)}]"


@dataclass(frozen=True, slots=True)
class VecOp(VectorExpr):
    """A binary operator (``add``, ``min``, ...) or a math function (``exp``, ``sigmoid``, ...)
    applied lane by lane to vector ``args`` of ``type``."""

    op: str
    args: tuple[Expr, ...]
    type: str
    count: int

    @property
    def dtype(self) -> str:
        return self.type

    @property
    def lanes(self) -> int:
        return self.count

    def render(self, fmt: Callable[[Expr], str]) -> str:
        return f"{self.op}x{self.count}({', '.join(fmt(a) for a in self.args)})"


@dataclass(frozen=True, slots=True)
class Lanes(VectorExpr):
    """The vector whose lane ``k`` is the scalar ``values[k]`` (loads at per-lane indices, values
    computed lane by lane)."""

    values: tuple[Expr, ...]

    @property
    def dtype(self) -> str:
        return self.values[0].dtype

    @property
    def lanes(self) -> int:
        return len(self.values)

    def render(self, fmt: Callable[[Expr], str]) -> str:
        return f"lanes({', '.join(fmt(v) for v in self.values)})"


@dataclass(frozen=True, slots=True)
class Extract(Expr):
    """Lane ``lane`` of the vector load ``vector``, inside a :class:`Lanes` value. A leaf for
    traversals: the load is evaluated once per statement, before its lanes are used."""

    vector: VecLoad
    lane: int

    @property
    def dtype(self) -> str:
        return self.vector.dtype

    def render(self, fmt: Callable[[Expr], str]) -> str:
        return f"{fmt(self.vector)}.{self.lane}"


@dataclass(frozen=True, slots=True)
class VecStore(Stmt):
    """Store the vector ``value`` at the indices of ``index`` (stride 1: contiguous)."""

    buffer: Buffer
    index: Ramp
    value: Expr
    aligned: bool = False

    def format_lines(self) -> list[str]:
        """The statement as ``print(asc.lower(...))`` shows it."""
        return [f"{self.buffer.name}[{self.index}] = {self.value}"]
