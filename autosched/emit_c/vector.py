"""Vector statements as GCC/Clang vector-extension code.

The vectorization pass (:mod:`autosched.lower.vectorize`) decides, with :func:`c_caps`, which
``vectorized`` loops become vector nodes; this module only prints them: contiguous loads as
unaligned vector loads, broadcasts through a splat helper, gathers as vector literals, operators
infix, min/max through a mask helper, math functions through a per-lane helper. Loops the pass
left alone print as scalar loops.

This module needs of the printer only what :class:`LoopPrinter` names; :class:`CPrinter` (in
``printer.py``, which imports this module) is one.
"""

from __future__ import annotations

from typing import Protocol

from ..dtypes import dtype as dtype_info
from ..expr import Const, Expr
from ..lower.ir import Buffer
from ..lower.vector_ir import Broadcast, Lanes, Ramp, VecLoad, VecOp, VecStore
from ..lower.vectorize import VectorCaps

#: loops of more whole vectors than this become a loop over vectors
MAX_UNROLLED_CHUNKS = 8
VECTOR_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
#: math functions a vector loop applies lane by lane in a helper (:meth:`VectorText.math`)
VECTOR_MATH = frozenset({"exp", "log", "sqrt", "tanh", "sigmoid", "erf", "pow", "abs", "floor", "ceil"})
INT_OF = {"float32": "int32_t", "float64": "int64_t"}


def c_caps(vector_bytes: int) -> VectorCaps:
    """What GCC/Clang vector extensions print, with vectors of ``vector_bytes``."""
    return VectorCaps(
        dtypes=frozenset(INT_OF),
        ops=frozenset({*VECTOR_OPS, "min", "max"}),
        math=VECTOR_MATH,
        vector_bytes=vector_bytes,
        max_unrolled=MAX_UNROLLED_CHUNKS,
        several_stores=True,
        gathers=True,
    )


class LoopPrinter(Protocol):
    """What vector statements need of the printer that prints the rest of the function."""

    helpers: dict[str, str]  # name -> definition, printed before the function

    def ctype(self, dtype: str) -> str: ...

    def buf(self, b: Buffer) -> str: ...

    def const(self, c: Const) -> str: ...

    def expr(self, e: Expr) -> str: ...


class VectorText:
    """Prints vector nodes for one function. Texts of ramp bases and broadcast values are kept by
    node identity: the vectors of one loop, and unrolled copies of it, share those nodes."""

    def __init__(self, p: LoopPrinter, caps: VectorCaps) -> None:
        self.p, self.caps = p, caps
        self.texts: dict[int, str] = {}

    def vtype(self, dtype: str, lanes: int) -> str:
        """The vector type's name (its typedefs registered on first use)."""
        vt = f"asc_{dtype}x{lanes}"
        if vt not in self.p.helpers:
            nbytes = lanes * dtype_info(dtype).bytes
            elem, align = self.p.ctype(dtype), dtype_info(dtype).bytes
            self.p.helpers[vt] = "\n".join(
                [
                    f"typedef {elem} {vt} __attribute__((vector_size({nbytes})));",
                    f"typedef {elem} {vt}u"
                    f" __attribute__((vector_size({nbytes}), aligned({align}), may_alias));",
                    f"typedef {INT_OF[dtype]} asc_i{dtype}x{lanes} __attribute__((vector_size({nbytes})));",
                ]
            )
        return vt

    def store(self, s: VecStore) -> list[str]:
        """One statement per register-wide piece of ``s``."""
        lanes, dtype = s.index.lanes, s.buffer.dtype
        width = min(lanes, self.caps.width(dtype))
        vt = self.vtype(dtype, width)
        name = self.p.buf(s.buffer)
        lines = []
        for lane in range(0, lanes, width):
            text, is_vector = self.part(s.value, lane, width, vt)
            value = text if is_vector else self.bcast(vt, dtype, width, text)
            lines.append(f"*({vt}u*)&{name}[{self.index(s.index, lane)}] = {value};")
        return lines

    def text(self, e: Expr) -> str:
        got = self.texts.get(id(e))
        if got is None:
            got = self.texts[id(e)] = self.p.expr(e)
        return got

    def index(self, r: Ramp, lane: int) -> str:
        """C text of the index of ``lane``."""
        offset = r.offset + r.stride * lane
        if isinstance(r.base, Const):
            return str(int(r.base.value) + offset)
        text = self.text(r.base)
        return text if offset == 0 else f"{text} + {offset}" if offset > 0 else f"{text} - {-offset}"

    def bcast(self, vt: str, dtype: str, lanes: int, text: str) -> str:
        """A vector of type ``vt`` with every lane ``text`` (registers the helper on first use)."""
        if f"{vt}_bcast" not in self.p.helpers:
            splat = ", ".join(["x"] * lanes)
            elem = self.p.ctype(dtype)
            self.p.helpers[f"{vt}_bcast"] = (
                f"static inline {vt} {vt}_bcast({elem} x) {{ return ({vt}){{{splat}}}; }}"
            )
        return f"{vt}_bcast({text})"

    def part(self, e: Expr, lane: int, lanes: int, vt: str) -> tuple[str, bool]:
        """(text, whether it is a vector) of lanes ``[lane, lane + lanes)`` of ``e``, a vector of
        type ``vt``: broadcast values stay scalar text until an operator needs them as vectors."""
        if isinstance(e, Broadcast):
            return self.text(e.value), False
        if isinstance(e, VecLoad):
            name = self.p.buf(e.buffer)
            if e.index.stride == 1:
                return f"(*(const {vt}u*)&{name}[{self.index(e.index, lane)}])", True
            items = ", ".join(f"{name}[{self.index(e.index, k)}]" for k in range(lane, lane + lanes))
            return f"(({vt}){{{items}}})", True
        if isinstance(e, Lanes):
            return f"(({vt}){{{', '.join(self.p.expr(v) for v in e.values[lane : lane + lanes])}}})", True
        assert isinstance(e, VecOp), e
        parts = [self.part(a, lane, lanes, vt) for a in e.args]  # all before any broadcast helper
        texts = [t if is_vector else self.bcast(vt, e.type, lanes, t) for t, is_vector in parts]
        if e.op in VECTOR_OPS:
            return f"({texts[0]} {VECTOR_OPS[e.op]} {texts[1]})", True
        if e.op in ("min", "max"):
            return f"{self.minmax(e.op, e.type, lanes)}({texts[0]}, {texts[1]})", True
        if e.op == "sigmoid":
            one = self.bcast(vt, e.type, lanes, self.p.const(Const(1.0, e.type)))
            return f"({one} / ({one} + {self.math('exp', 1, e.type, lanes)}(-{texts[0]})))", True
        return f"{self.math(e.op, len(texts), e.type, lanes)}({', '.join(texts)})", True

    def math(self, name: str, arity: int, dtype: str, lanes: int) -> str:
        """A helper applying the C math function ``name`` to each lane: a loop that gcc vectorizes
        with glibc's vector math (see the emitter's header; ``simdlen``: one call of the vector
        function as wide as the loop's vectors) and anything else runs lane by lane."""
        vt = self.vtype(dtype, lanes)
        helper = f"{vt}_{name}"
        sfx = "f" if dtype == "float32" else ""
        fn = f"fabs{sfx}" if name == "abs" else f"{name}{sfx}"
        params = ", ".join(f"{vt} a{k}" for k in range(arity))
        unions = ", ".join(f"x{k} = {{a{k}}}" for k in range(arity))
        args = ", ".join(f"x{k}.e[i]" for k in range(arity))
        self.p.helpers[helper] = (
            f"static inline {vt} {helper}({params}) {{\n"
            f"  union {{ {vt} v; {self.p.ctype(dtype)} e[{lanes}]; }} {unions}, r;\n"
            f"  _Pragma(\"omp simd simdlen({lanes})\")\n"
            f"  for (int i = 0; i < {lanes}; ++i) r.e[i] = {fn}({args});\n"
            f"  return r.v;\n}}"
        )
        return helper

    def minmax(self, op: str, dtype: str, lanes: int) -> str:
        vt = self.vtype(dtype, lanes)
        ivt = f"asc_i{dtype}x{lanes}"
        name = f"{vt}_{op}"
        cmp = "<" if op == "min" else ">"
        self.p.helpers[name] = (
            f"static inline {vt} {name}({vt} a, {vt} b) {{ {ivt} m = a {cmp} b; "
            f"return ({vt})((m & ({ivt})a) | (~m & ({ivt})b)); }}"
        )
        return name
