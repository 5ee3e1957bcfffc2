"""Vectorized loops as GCC/Clang vector-extension code.

A loop marked ``vectorized`` whose body is straight-line stores with a contiguous store index is
printed as whole-vector statements: contiguous loads become unaligned vector loads, loads that do
not depend on the loop become broadcasts, other loads become gathers. The vector width comes from
the target; an extent that is a multiple of it becomes several vectors. Anything else falls back to
a scalar loop with ``#pragma omp simd``.

This module needs of the printer only what :class:`LoopPrinter` names; :class:`CPrinter` (in
``printer.py``, which imports this module) is one.
"""

from __future__ import annotations

from typing import Protocol

from ..dtypes import dtype as dtype_info
from ..expr import BinOp, Call, Const, Expr, Var, as_expr, children, substitute
from ..lower.access import along
from ..lower.ir import Buffer, BufLoad, For, Seq, Store
from ..lower.simplify import rebuild, simplify
from ..vector_lanes import chunks_of

MAX_UNROLLED_CHUNKS = 8
VECTOR_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
#: math functions a vector loop applies lane by lane in a helper (:meth:`_VectorPrinter.math`)
VECTOR_MATH = frozenset({"exp", "log", "sqrt", "tanh", "sigmoid", "erf", "pow", "abs", "floor", "ceil"})
INT_OF = {"float32": "int32_t", "float64": "int64_t"}


class LoopPrinter(Protocol):
    """What a vector loop needs of the printer that prints the rest of the function."""

    vector_bytes: int
    helpers: dict[str, str]  # name -> definition, printed before the function
    memos: dict[str, tuple[dict, dict, dict]]  # per loop variable name: dependence, linear forms, text

    def ctype(self, dtype: str) -> str: ...

    def var(self, v: Var) -> str: ...

    def buf(self, b: Buffer) -> str: ...

    def const(self, c: Const) -> str: ...

    def expr(self, e: Expr) -> str: ...

    def emit(self, line: str, indent: int) -> None: ...


class _VectorPrinter:
    def __init__(self, p: LoopPrinter, v: Var, dtype: str, lanes: int) -> None:
        self.p, self.v, self.dtype, self.lanes = p, v, dtype, lanes
        # memos by node identity, shared by every vector loop over the same variable in this function
        self._dep, self._lin, self._text = p.memos.setdefault(v.name, ({}, {}, {}))
        elem = p.ctype(dtype)
        self.vt = f"asc_{dtype}x{lanes}"
        nbytes = lanes * dtype_info(dtype).bytes
        ivt = f"asc_i{dtype}x{lanes}"
        self.ivt = ivt
        align = dtype_info(dtype).bytes
        splat = ", ".join(["x"] * lanes)
        p.helpers[self.vt] = "\n".join(
            [
                f"typedef {elem} {self.vt} __attribute__((vector_size({nbytes})));",
                f"typedef {elem} {self.vt}u"
                f" __attribute__((vector_size({nbytes}), aligned({align}), may_alias));",
                f"typedef {INT_OF[dtype]} {ivt} __attribute__((vector_size({nbytes})));",
            ]
        )
        self._splat = (
            f"static inline {self.vt} {self.vt}_bcast({elem} x) {{ return ({self.vt}){{{splat}}}; }}"
        )

    def bcast(self, text: str) -> str:
        """A vector with every lane ``text`` (registers the helper on first use)."""
        self.p.helpers.setdefault(f"{self.vt}_bcast", self._splat)
        return f"{self.vt}_bcast({text})"

    def depends(self, e: Expr) -> bool:
        """Whether ``e`` uses the loop variable (memoized per node of this loop's body)."""
        got = self._dep.get(id(e))
        if got is None:
            got = e == self.v if isinstance(e, Var) else any(self.depends(c) for c in children(e))
            self._dep[id(e)] = got
        return got

    def _linear(self, index: Expr) -> tuple[dict[Expr, int], int, int | None]:
        """(terms without the loop variable, constant, its coefficient or None if not affine)."""
        got = self._lin.get(id(index))
        if (
            got is None
            and isinstance(index, BinOp)
            and index.op in ("add", "sub")
            and isinstance(index.b, Const)
        ):
            terms, k, c = self._linear(index.a)
            off = int(index.b.value)
            got = (terms, k + off if index.op == "add" else k - off, c)
            self._lin[id(index)] = got
        if got is None:
            got = self._lin[id(index)] = along(index, self.v, self.depends)
        return got

    def at(self, index: Expr, base: Expr, lane: int = 0) -> str:
        """C text of ``index`` at loop value ``base + lane``."""
        terms, k, c = self._linear(index)
        if c is not None and isinstance(base, Const):
            offset = k + c * (int(base.value) + lane)
            text = self._text.get(id(terms))
            if text is None:
                text = self._text[id(terms)] = self.p.expr(rebuild(terms, 0)) if terms else ""
            if not text:
                return str(offset)
            return text if offset == 0 else f"{text} + {offset}" if offset > 0 else f"{text} - {-offset}"
        return self.p.expr(simplify(substitute(index, {self.v: BinOp("add", base, Const(lane), "int32")})))

    def scalar(self, e: Expr) -> str:
        """C text of a loop-invariant expression (memoized)."""
        text = self._text.get(id(e))
        if text is None:
            text = self._text[id(e)] = self.p.expr(e)
        return text

    def coef(self, index: Expr) -> int | None:
        return self._linear(index)[2]

    def expr(self, e: Expr, base: Expr) -> str | None:
        """Vector C text of ``e`` for lanes from ``base``, or None if it cannot be vectorized."""
        got = self._vec(e, base)
        if got is None or e.dtype != self.dtype:
            return None
        text, is_vector = got
        return text if is_vector else self.bcast(text)

    def _vec(self, e: Expr, base: Expr) -> tuple[str, bool] | None:
        """(text, whether it is a vector) bottom-up; loop-invariant parts stay scalar text."""
        if isinstance(e, BufLoad):
            terms, _, c = self._linear(e.index)
            if c == 0:
                return self.scalar(e), False
            if e.dtype != self.dtype:
                return None
            name = self.p.buf(e.buffer)
            if c == 1:
                return f"(*(const {self.vt}u*)&{name}[{self.at(e.index, base)}])", True
            items = ", ".join(f"{name}[{self.at(e.index, base, k)}]" for k in range(self.lanes))
            return f"(({self.vt}){{{items}}})", True
        if isinstance(e, Var):
            return None if e == self.v else (self.p.var(e), False)
        if isinstance(e, Const):
            return self.p.const(e), False
        if isinstance(e, BinOp):
            a, b = self._vec(e.a, base), self._vec(e.b, base)
            if a is None or b is None:
                return None
            if not (a[1] or b[1]):
                return self.scalar(e), False
            if e.type != self.dtype:
                return None
            ta = a[0] if a[1] else self.bcast(a[0])
            tb = b[0] if b[1] else self.bcast(b[0])
            if e.op in VECTOR_OPS:
                return f"({ta} {VECTOR_OPS[e.op]} {tb})", True
            if e.op in ("min", "max"):
                return f"{self.minmax(e.op)}({ta}, {tb})", True
            return None
        if isinstance(e, Call) and e.name in VECTOR_MATH and self.depends(e):
            args = [self._vec(a, base) for a in e.args]
            if any(a is None for a in args) or e.type != self.dtype:
                return None
            texts = [a[0] if a[1] else self.bcast(a[0]) for a in args if a is not None]
            if e.name == "sigmoid":
                one = self.bcast(self.p.const(Const(1.0, self.dtype)))
                return f"({one} / ({one} + {self.math('exp', 1)}(-{texts[0]})))", True
            return f"{self.math(e.name, len(texts))}({', '.join(texts)})", True
        return None if self.depends(e) else (self.scalar(e), False)

    def math(self, name: str, arity: int) -> str:
        """A helper applying the C math function ``name`` to each lane: a loop that gcc vectorizes
        with glibc's vector math (see the emitter's header; ``simdlen``: one call of the vector
        function as wide as the loop's vectors) and anything else runs lane by lane."""
        helper = f"{self.vt}_{name}"
        sfx = "f" if self.dtype == "float32" else ""
        fn = f"fabs{sfx}" if name == "abs" else f"{name}{sfx}"
        elem = self.p.ctype(self.dtype)
        params = ", ".join(f"{self.vt} a{k}" for k in range(arity))
        unions = ", ".join(f"x{k} = {{a{k}}}" for k in range(arity))
        lanes = ", ".join(f"x{k}.e[i]" for k in range(arity))
        self.p.helpers[helper] = (
            f"static inline {self.vt} {helper}({params}) {{\n"
            f"  union {{ {self.vt} v; {elem} e[{self.lanes}]; }} {unions}, r;\n"
            f"  _Pragma(\"omp simd simdlen({self.lanes})\")\n"
            f"  for (int i = 0; i < {self.lanes}; ++i) r.e[i] = {fn}({lanes});\n"
            f"  return r.v;\n}}"
        )
        return helper

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
        return f"*({self.vt}u*)&{self.p.buf(s.buffer)}[{self.at(s.index, base)}] = {value};"


def emit_vector_loop(p: LoopPrinter, s: For, indent: int) -> bool:
    """Print ``s`` as vector statements; return False (printing nothing) if it does not fit."""
    helpers = dict(p.helpers)
    if _emit_vector_loop(p, s, indent):
        return True
    p.helpers.clear()  # forget helpers registered for a loop that falls back to scalar code
    p.helpers.update(helpers)
    return False


def _emit_vector_loop(p: LoopPrinter, s: For, indent: int) -> bool:
    body = list(s.body.stmts) if isinstance(s.body, Seq) else [s.body]
    stores = [x for x in body if isinstance(x, Store)]
    if not stores or len(stores) != len(body):
        return False
    dtypes = {x.buffer.dtype for x in stores}
    if len(dtypes) != 1 or next(iter(dtypes)) not in INT_OF:
        return False
    dtype = dtypes.pop()
    width = max(2, p.vector_bytes // dtype_info(dtype).bytes)
    if not (isinstance(s.begin, int) and isinstance(s.extent, int)):
        return _symbolic_vector_loop(p, s, stores, width, indent)
    if s.extent % width == 0 and s.extent // width > MAX_UNROLLED_CHUNKS:
        chunk_var = Var(s.var.name + ".vec")
        base: Expr = BinOp("add", BinOp("mul", chunk_var, Const(width), "int32"), Const(s.begin), "int32")
        lines = _chunk_lines(p, s, stores, base, width, {})
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
    printers: dict[int, _VectorPrinter] = {}
    for lanes in chunks_of(s.extent, width):
        lines = _chunk_lines(p, s, stores, Const(offset), lanes, printers)
        if lines is None:
            return False
        out.extend(lines)
        offset += lanes
    for ln in out:
        p.emit(ln, indent)
    return True


def _symbolic_vector_loop(p: LoopPrinter, s: For, stores: list[Store], width: int, indent: int) -> bool:
    """A vector loop over a symbolic extent: a loop of whole vectors, then a scalar remainder."""
    chunk_var = Var(s.var.name + ".vec")
    begin = as_expr(s.begin)
    base: Expr = BinOp("add", BinOp("mul", chunk_var, Const(width), "int32"), begin, "int32")
    lines = _chunk_lines(p, s, stores, base, width, {})
    if lines is None:
        return False
    n_chunks = simplify(BinOp("floordiv", as_expr(s.extent), Const(width), "int32"))
    rest = simplify(BinOp("add", begin, BinOp("mul", n_chunks, Const(width), "int32"), "int32"))
    end = simplify(BinOp("add", begin, as_expr(s.extent), "int32"))
    cv, v = p.var(chunk_var), p.var(s.var)
    p.emit(f"for (int {cv} = 0; {cv} < {p.expr(n_chunks)}; ++{cv}) {{", indent)
    for ln in lines:
        p.emit(ln, indent + 1)
    p.emit("}", indent)
    p.emit(f"for (int {v} = {p.expr(rest)}; {v} < {p.expr(end)}; ++{v}) {{", indent)
    for st in stores:
        p.emit(f"{p.buf(st.buffer)}[{p.expr(st.index)}] = {p.expr(st.value)};", indent + 1)
    p.emit("}", indent)
    return True


def _chunk_lines(
    p: LoopPrinter, s: For, stores: list[Store], base: Expr, lanes: int, printers: dict[int, _VectorPrinter]
) -> list[str] | None:
    """Statements for ``lanes`` iterations starting at ``base`` (scalar when ``lanes`` is 1)."""
    if lanes == 1:
        sub = {s.var: base}
        return [
            f"{p.buf(st.buffer)}[{p.expr(simplify(substitute(st.index, sub)))}] = "
            f"{p.expr(simplify(substitute(st.value, sub)))};"
            for st in stores
        ]
    vp = printers.get(lanes)
    if vp is None:
        vp = printers[lanes] = _VectorPrinter(p, s.var, stores[0].buffer.dtype, lanes)
    lines = []
    for st in stores:
        text = vp.store(st, base)
        if text is None:
            return None
        lines.append(text)
    return lines
