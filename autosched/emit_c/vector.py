"""Vectorized loops as GCC/Clang vector-extension code.

A loop marked ``vectorized`` whose body is straight-line stores with a contiguous store index is
printed as whole-vector statements: contiguous loads become unaligned vector loads, loads that do
not depend on the loop become broadcasts, other loads become gathers. The vector width comes from
the target; an extent that is a multiple of it becomes several vectors. Anything else falls back to
a scalar loop with ``#pragma omp simd``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..dtypes import dtype as dtype_info
from ..expr import BinOp, Const, Expr, Var, substitute, walk
from ..lower.ir import BufLoad, For, Seq, Store
from ..lower.simplify import linear, simplify

if TYPE_CHECKING:
    from .printer import CPrinter

MAX_UNROLLED_CHUNKS = 8
VECTOR_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
INT_OF = {"float32": "int32_t", "float64": "int64_t"}


def _depends(e: Expr, v: Var) -> bool:
    return any(n == v for n in walk(e))


class _VectorPrinter:
    def __init__(self, p: CPrinter, v: Var, dtype: str, lanes: int) -> None:
        self.p, self.v, self.dtype, self.lanes = p, v, dtype, lanes
        elem = p.ctype(dtype)
        self.vt = f"asc_{dtype}x{lanes}"
        nbytes = lanes * dtype_info(dtype).bytes
        ivt = f"asc_i{dtype}x{lanes}"
        self.ivt = ivt
        p.helpers[self.vt] = (
            f"typedef {elem} {self.vt} __attribute__((vector_size({nbytes})));\n"
            f"typedef {elem} {self.vt}u __attribute__((vector_size({nbytes}), aligned({dtype_info(dtype).bytes}), "
            f"may_alias));\n"
            f"typedef {INT_OF[dtype]} {ivt} __attribute__((vector_size({nbytes})));\n"
            f"static inline {self.vt} {self.vt}_bcast({elem} x) {{ return ({self.vt}){{{', '.join(['x'] * lanes)}}}; }}"
        )

    def at(self, e: Expr, base: Expr, lane: int = 0) -> Expr:
        return simplify(substitute(e, {self.v: BinOp("add", base, Const(lane), "int32")}))

    def coef(self, index: Expr) -> int | None:
        terms, _ = linear(index, {})
        c = terms.get(self.v, 0)
        if any(_depends(t, self.v) for t in terms if t != self.v):
            return None
        return c

    def expr(self, e: Expr, base: Expr) -> str | None:
        if not _depends(e, self.v):
            if e.dtype != self.dtype:
                return None
            return f"{self.vt}_bcast({self.p.expr(e)})"
        if isinstance(e, BufLoad):
            name = self.p.buf(e.buffer)
            if e.dtype != self.dtype:
                return None
            if self.coef(e.index) == 1:
                return f"(*(const {self.vt}u*)&{name}[{self.p.expr(self.at(e.index, base))}])"
            items = ", ".join(f"{name}[{self.p.expr(self.at(e.index, base, k))}]" for k in range(self.lanes))
            return f"(({self.vt}){{{items}}})"
        if isinstance(e, BinOp) and e.type == self.dtype:
            a, b = self.expr(e.a, base), self.expr(e.b, base)
            if a is None or b is None:
                return None
            if e.op in VECTOR_OPS:
                return f"({a} {VECTOR_OPS[e.op]} {b})"
            if e.op in ("min", "max"):
                return f"{self.minmax(e.op)}({a}, {b})"
        return None

    def minmax(self, op: str) -> str:
        name = f"{self.vt}_{op}"
        cmp = "<" if op == "min" else ">"
        self.p.helpers[name] = (
            f"static inline {self.vt} {name}({self.vt} a, {self.vt} b) {{ {self.ivt} m = a {cmp} b; "
            f"return ({self.vt})((m & ({self.ivt})a) | (~m & ({self.ivt})b)); }}"
        )
        return name

    def store(self, s: Store, base: Expr) -> str | None:
        if self.coef(s.index) != 1:
            return None
        value = self.expr(s.value, base)
        if value is None:
            return None
        return f"*({self.vt}u*)&{self.p.buf(s.buffer)}[{self.p.expr(self.at(s.index, base))}] = {value};"


def chunks_of(extent: int, width: int) -> list[int]:
    """Vector lengths covering ``extent``: full vectors, then halving powers of two (1 = scalar)."""
    out: list[int] = []
    rest = extent
    lanes = width
    while rest:
        while lanes > rest:
            lanes //= 2
        out.append(lanes)
        rest -= lanes
    return out


def emit_vector_loop(p: CPrinter, s: For, indent: int) -> bool:
    """Print ``s`` as vector statements; return False (printing nothing) if it does not fit."""
    stores = list(s.body.stmts) if isinstance(s.body, Seq) else [s.body]
    if not stores or not all(isinstance(x, Store) for x in stores):
        return False
    dtypes = {x.buffer.dtype for x in stores}  # type: ignore[union-attr]
    if len(dtypes) != 1 or next(iter(dtypes)) not in INT_OF:
        return False
    dtype = dtypes.pop()
    width = max(2, p.vector_bytes // dtype_info(dtype).bytes)
    if s.extent % width == 0 and s.extent // width > MAX_UNROLLED_CHUNKS:
        chunk_var = Var(s.var.name + ".vec")
        base: Expr = BinOp("add", BinOp("mul", chunk_var, Const(width), "int32"), Const(s.begin), "int32")
        lines = _chunk_lines(p, s, stores, base, width)
        if lines is None:
            return False
        cv = p.var(chunk_var)
        p.emit(f"for (int {cv} = 0; {cv} < {s.extent // width}; ++{cv}) {{", indent)
        for ln in lines:
            p.emit(ln, indent + 1)
        p.emit("}", indent)
        return True
    out: list[str] = []
    offset = s.begin
    for lanes in chunks_of(s.extent, width):
        lines = _chunk_lines(p, s, stores, Const(offset), lanes)
        if lines is None:
            return False
        out.extend(lines)
        offset += lanes
    for ln in out:
        p.emit(ln, indent)
    return True


def _chunk_lines(p: CPrinter, s: For, stores: list[Store], base: Expr, lanes: int) -> list[str] | None:
    """Statements for ``lanes`` iterations starting at ``base`` (scalar when ``lanes`` is 1)."""
    if lanes == 1:
        sub = {s.var: base}
        return [f"{p.buf(st.buffer)}[{p.expr(simplify(substitute(st.index, sub)))}] = "
                f"{p.expr(simplify(substitute(st.value, sub)))};" for st in stores]
    vp = _VectorPrinter(p, s.var, stores[0].buffer.dtype, lanes)
    lines = []
    for st in stores:
        text = vp.store(st, base)
        if text is None:
            return None
        lines.append(text)
    return lines
