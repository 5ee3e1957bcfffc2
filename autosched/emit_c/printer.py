"""The C-style printer: IR -> source text. CUDA and OpenCL printers subclass it and change the
attribute table (qualifiers, pragmas, barriers, type and math names, helper qualifiers); the walk
over the IR is shared. Heap allocation (in :meth:`CPrinter.function`) and the timing harness are
the C dialect's own; GPU dialects print kernels with :mod:`autosched.emit_c.gpu`."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from ..dtypes import dtype as dtype_info
from ..dtypes import numpy_dtype
from ..expr import (
    INFIX,
    BinOp,
    Call,
    Cast,
    Cmp,
    Const,
    Expr,
    Extent,
    ExternCall,
    Logic,
    Not,
    Select,
    Var,
    as_expr,
)
from ..lower.ir import (
    Allocate,
    Barrier,
    BufAddress,
    Buffer,
    BufLoad,
    BufPtr,
    CallStmt,
    Evaluate,
    For,
    IfThenElse,
    PrimFunc,
    Seq,
    Stmt,
    Store,
)
from ..lower.readonly import read_only_args
from ..lower.simplify import loop_end, simplify
from ..lower.vector_ir import VecStore
from ..lower.vectorize import VectorCaps, vectorize
from .names import Namer
from .vector import VectorText, c_caps

#: exact bfloat16 <-> float32 conversions on ``uint16_t`` bits (round half to even, NaN kept quiet)
BF16_HELPERS = """\
static inline float asc_bf16_f32(uint16_t h) {
  union { uint32_t u; float f; } v; v.u = (uint32_t)h << 16; return v.f;
}
static inline uint16_t asc_f32_bf16(float x) {
  union { uint32_t u; float f; } v; v.f = x;
  if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 0x40u);
  return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);
}"""

#: the most copies the C compiler's unroller is asked for on an ``unroll_hint`` loop (an
#: auto-unrolled nest left to it): a longer loop is unrolled by this much, not completely. gcc 12
#: unrolled a 300-iteration reduction completely and then took 2-9 s to vectorize the straight
#: line (-O3; a sampled softmax program), against 0.2-0.4 s unrolled by 64
UNROLL_HINT_MAX = 64


class CPrinter:
    """Prints a :class:`PrimFunc` as C. Subclasses override the class attributes."""

    restrict: ClassVar[str] = "restrict"
    func_qualifier: ClassVar[str] = ""
    arg_qualifier: ClassVar[str] = ""
    #: whether arguments the function only reads are declared ``const`` (C targets)
    const_inputs: ClassVar[bool] = True
    local_qualifier: ClassVar[str] = ""
    shared_qualifier: ClassVar[str] = ""
    barrier: ClassVar[str] = ""
    align_attr: ClassVar[str] = " __attribute__((aligned(64)))"
    unroll_pragma: ClassVar[str] = "#pragma GCC unroll {n}"
    parallel_pragma: ClassVar[str] = "#pragma omp parallel for num_threads({n})"
    float_suffix: ClassVar[dict[str, str]] = {"float32": "f", "float64": "", "float16": "f"}
    math_suffix: ClassVar[dict[str, str]] = {"float32": "f", "float64": "", "float16": "f"}
    type_names: ClassVar[dict[str, str]] = {}  # dtype -> the dialect's name, where not the C one
    helper_qualifier: ClassVar[str] = "static inline"

    def __init__(self, num_threads: int = 1, vector_bytes: int = 32, portable: bool = False) -> None:
        self.num_threads = num_threads
        self.vector_bytes = vector_bytes
        self.portable = portable
        self.names = Namer()
        self.lines: list[str] = []
        self.helpers: dict[str, str] = {}  # name -> definition, printed before the function
        self.extensions: set[str] = set()  # CPU extensions the intrinsics called need
        self.scopes: list[set[str]] = [set()]  # local buffers declared in each open C block
        self.vectors = VectorText(self, c_caps(vector_bytes))

    # -- names and types
    def ctype(self, dtype: str) -> str:
        return self.type_names.get(dtype) or dtype_info(dtype).c_name

    def var(self, v: Var) -> str:
        return self.names(v, v.name)

    def buf(self, b: Buffer) -> str:
        return self.names(("buf", b.name), b.name)

    # -- expressions
    def extent(self, e: Extent) -> str:
        """C text of an extent: a number, or an expression of the size parameters."""
        return str(e) if isinstance(e, int) else self.expr(simplify(as_expr(e)))

    def const(self, c: Const) -> str:
        d = dtype_info(c.type)
        if c.type == "bfloat16":  # its bits, rounded as a cast rounds
            bits = np.asarray(float(c.value), np.float32).astype(numpy_dtype("bfloat16")).view(np.uint16)
            return hex(int(bits))
        if not d.is_float:
            return str(int(c.value))
        v = float(c.value)
        suffix = self.float_suffix.get(c.type, "")
        if math.isnan(v):
            return f"(({self.ctype(c.type)})NAN)"
        if math.isinf(v):
            return f"(({self.ctype(c.type)}){'-' if v < 0 else ''}INFINITY)"
        text = repr(v)
        return f"{text}{suffix}" if c.type != "float16" else f"(({self.ctype(c.type)}){text}f)"

    def bf16_f32(self, e: Expr) -> str:
        """``e`` as a float: bfloat16 values (``uint16_t`` bits) are widened exactly."""
        if e.dtype != "bfloat16":
            return self.expr(e)
        self.helpers.setdefault("asc_bf16", BF16_HELPERS)
        return f"asc_bf16_f32({self.expr(e)})"

    def bf16_round(self, text: str) -> str:
        """A float's C text rounded to bfloat16 bits (round half to even)."""
        self.helpers.setdefault("asc_bf16", BF16_HELPERS)
        return f"asc_f32_bf16({text})"

    def bf16_expr(self, e: Expr) -> str | None:
        """C text of a node that takes or makes bfloat16 values (computed in float32, each result
        rounded back); ``None`` for the nodes that need no conversion."""
        if isinstance(e, Cast) and (e.type == "bfloat16") != (e.value.dtype == "bfloat16"):
            if e.type == "bfloat16":
                return self.bf16_round(f"(float){self.expr(e.value)}")
            return f"(({self.ctype(e.type)}){self.bf16_f32(e.value)})"
        if isinstance(e, BinOp) and e.type == "bfloat16":
            if e.op in INFIX:
                return self.bf16_round(f"({self.bf16_f32(e.a)} {INFIX[e.op]} {self.bf16_f32(e.b)})")
            f32 = BinOp(e.op, Cast("float32", e.a), Cast("float32", e.b), "float32")
            return self.bf16_round(self.binop(f32))
        if isinstance(e, Cmp) and e.a.dtype == "bfloat16":
            return f"({self.bf16_f32(e.a)} {INFIX[e.op]} {self.bf16_f32(e.b)})"
        if isinstance(e, Call) and e.type == "bfloat16":
            f32c = Call(e.name, tuple(Cast("float32", a) for a in e.args), "float32")
            return self.bf16_round(self.call(f32c))
        return None

    def expr(self, e: Expr) -> str:
        if isinstance(e, (Cast, BinOp, Cmp, Call)):
            text = self.bf16_expr(e)
            if text is not None:
                return text
        if isinstance(e, Const):
            return self.const(e)
        if isinstance(e, Var):
            return self.var(e)
        if isinstance(e, BufLoad):
            return f"{self.buf(e.buffer)}[{self.expr(e.index)}]"
        if isinstance(e, BufAddress):
            return f"({self.buf(e.buffer)} + {self.expr(e.index)})"
        if isinstance(e, BinOp):
            return self.binop(e)
        if isinstance(e, (Cmp, Logic)):
            return f"({self.expr(e.a)} {INFIX[e.op]} {self.expr(e.b)})"
        if isinstance(e, Not):
            return f"(!{self.expr(e.a)})"
        if isinstance(e, Select):
            return f"({self.expr(e.cond)} ? {self.expr(e.true_value)} : {self.expr(e.false_value)})"
        if isinstance(e, Cast):
            return f"(({self.ctype(e.type)}){self.expr(e.value)})"
        if isinstance(e, Call):
            return self.call(e)
        if isinstance(e, ExternCall):  # a user's C function: its name is kept out of the Namer's
            return f"{e.name}({', '.join(self.expr(a) for a in e.args)})"
        if isinstance(e, BufPtr):
            off = self.expr(e.index)
            return self.buf(e.buffer) if off == "0" else f"(&{self.buf(e.buffer)}[{off}])"
        raise TypeError(f"the C printer cannot print {type(e).__name__}: {e}")

    def binop(self, e: BinOp) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        if e.op in INFIX:
            return f"({a} {INFIX[e.op]} {b})"
        if e.op in ("floordiv", "floormod"):
            if nonneg(e.a) and nonneg(e.b):
                return f"({a} {'/' if e.op == 'floordiv' else '%'} {b})"
            return f"{self.helper_floor(e.op, e.type)}({a}, {b})"
        return f"{self.helper_minmax(e.op, e.type)}({a}, {b})"

    def helper_floor(self, op: str, dtype: str) -> str:
        t = self.ctype(dtype)
        name = f"asc_{op}_{dtype}"
        if op == "floordiv":
            body = "return (a / b) - ((a % b != 0) && ((a < 0) != (b < 0)));"
        else:
            body = "return ((a % b) + b) % b;"
        self.helpers[name] = f"{self.helper_qualifier} {t} {name}({t} a, {t} b) {{ {body} }}"
        return name

    def helper_minmax(self, op: str, dtype: str) -> str:
        t = self.ctype(dtype)
        name = f"asc_{op}_{dtype}"
        cmp = "<" if op == "min" else ">"
        self.helpers[name] = (
            f"{self.helper_qualifier} {t} {name}({t} a, {t} b) {{ return a {cmp} b ? a : b; }}"
        )
        return name

    def helper_alloc(self) -> str:
        """64-byte aligned heap allocation (C11 ``aligned_alloc`` needs a size multiple of 64)."""
        self.helpers["asc_alloc"] = (
            "static inline void* asc_alloc(size_t bytes) {\n"
            "  return aligned_alloc(64, (bytes + 63) / 64 * 64);\n}"
        )
        return "asc_alloc"

    def call(self, e: Call) -> str:
        args = [self.expr(a) for a in e.args]
        sfx = self.math_suffix.get(e.type, "")
        if e.name == "sigmoid":
            one = self.const(Const(1.0, e.type))
            return f"({one} / ({one} + exp{sfx}(-({args[0]}))))"
        if e.name == "abs":
            if dtype_info(e.type).is_float:
                return f"fabs{sfx}({args[0]})"
            return f"llabs({args[0]})" if e.type == "int64" else f"abs({args[0]})"
        return f"{e.name}{sfx}({', '.join(args)})"

    # -- statements
    def block(self, s: Stmt, indent: int) -> None:
        """Print ``s`` as the body of a ``{ }`` block (a new scope for local buffers)."""
        self.scopes.append(set())
        self.stmt(s, indent)
        self.scopes.pop()

    def emit(self, line: str, indent: int) -> None:
        self.lines.append("  " * indent + line)

    def stmt(self, s: Stmt, indent: int) -> None:
        if isinstance(s, Store):
            self.emit(f"{self.buf(s.buffer)}[{self.expr(s.index)}] = {self.expr(s.value)};", indent)
        elif isinstance(s, Seq):
            for x in s.stmts:
                self.stmt(x, indent)
        elif isinstance(s, VecStore):
            for line in self.vector_store(s):
                self.emit(line, indent)
        elif isinstance(s, For):
            self.loop(s, indent)
        elif isinstance(s, IfThenElse):
            self.emit(f"if ({self.expr(s.cond)}) {{", indent)
            self.block(s.then, indent + 1)
            if s.otherwise is not None:
                self.emit("} else {", indent)
                self.block(s.otherwise, indent + 1)
            self.emit("}", indent)
        elif isinstance(s, Allocate):
            self.allocate(s.buffer, indent)
        elif isinstance(s, Barrier):
            self.emit(self.barrier, indent)
        elif isinstance(s, CallStmt):  # a tensor intrinsic: its function is printed once per file
            if not self.portable:
                self.extensions.update(s.func.requires)
            for key, text in s.func.c_helpers(s.part, self.portable):
                self.helpers.setdefault(key, text)
            self.emit(f"{s.func.c_name(s.part)}({', '.join(self.expr(a) for a in s.args)});", indent)
        elif isinstance(s, Evaluate):
            self.emit(f"{self.expr(s.value)};", indent)
        else:
            raise TypeError(f"the C printer cannot print {type(s).__name__}")

    def vector_caps(self) -> VectorCaps | None:
        """What the dialect prints as vectors (None: no vector statements), for the
        vectorization pass the printer runs first."""
        return None if self.portable else self.vectors.caps

    def vector_store(self, s: VecStore) -> list[str]:
        """The lines of a vector store (GCC/Clang vector extensions, see vector.py)."""
        return self.vectors.store(s)

    def vectorized(self, body: Stmt) -> Stmt:
        """``body`` after the vectorization pass with this dialect's :meth:`vector_caps`."""
        caps = self.vector_caps()
        return body if caps is None else vectorize(body, caps)

    def allocate(self, b: Buffer, indent: int) -> None:
        if b.scope == "global":
            raise ValueError(f"heap buffer {b.name} must be allocated at function level")
        if b.name in self.scopes[-1]:
            return  # unrolled copies in one scope share the declaration
        self.scopes[-1].add(b.name)
        qual = self.shared_qualifier if b.scope == "shared" else self.local_qualifier
        align = "" if self.portable else self.align_attr
        # a tile over a symbolic extent is a variable-length array (C99), as large as that extent
        self.emit(f"{qual}{self.ctype(b.dtype)} {self.buf(b)}[{self.extent(b.size)}]{align};", indent)

    def loop(self, s: For, indent: int) -> None:
        if s.kind == "parallel" and not self.portable:
            self.emit(self.parallel_pragma.format(n=self.num_threads), indent)
        elif s.kind in ("unrolled", "unroll_hint") and not self.portable and isinstance(s.extent, int):
            n = min(s.extent, UNROLL_HINT_MAX) if s.kind == "unroll_hint" else s.extent
            self.emit(self.unroll_pragma.format(n=n), indent)
        v = self.var(s.var)
        begin, end = self.extent(s.begin), self.extent(loop_end(s.begin, s.extent))
        self.emit(f"for (int {v} = {begin}; {v} < {end}; ++{v}) {{", indent)
        self.block(s.body, indent + 1)
        self.emit("}", indent)

    # -- whole function
    def signature(self, func: PrimFunc, name: str, read_only: frozenset[str] = frozenset()) -> str:
        params = ", ".join(
            [
                f"{self.arg_qualifier}{'const ' if b.name in read_only else ''}{self.ctype(b.dtype)}* "
                f"{self.restrict} {self.buf(b)}".replace("  ", " ")
                for b in func.args
            ]
            + [f"int {self.var(v)}" for v in func.sizes]
            + [f"{self.ctype(v.dtype)} {self.var(v)}" for v in func.scalars]
        )
        return f"{self.func_qualifier}int {name}({params})"

    def function(self, func: PrimFunc) -> tuple[str, str]:
        """(function name, function text)."""
        self.names = Namer(set(func.code.symbols))  # no identifier shadows a called C function
        name = self.names(("func", func.name), func.name)
        for b in func.args:
            self.buf(b)
        for v in (*func.sizes, *func.scalars):
            self.var(v)
        self.vectors.texts.clear()  # texts by node identity: only of this function's nodes
        body, heap = split_heap(self.vectorized(func.body))
        read_only = read_only_args(func, body) if self.const_inputs else frozenset()
        self.lines = [self.signature(func, name, read_only) + " {"]
        for b in heap:
            n = b.size if isinstance(b.size, int) else f"(size_t){self.extent(b.size)}"
            size = f"sizeof({self.ctype(b.dtype)}) * {n}"
            alloc = f"malloc({size})" if self.portable else f"{self.helper_alloc()}({size})"
            self.emit(
                f"{self.ctype(b.dtype)}* {self.restrict} {self.buf(b)} = ({self.ctype(b.dtype)}*){alloc};", 1
            )
        if heap:
            failed = " || ".join(f"!{self.buf(b)}" for b in heap)
            frees = " ".join(f"free({self.buf(b)});" for b in heap)
            self.emit(f"if ({failed}) {{ {frees} return -1; }}", 1)
        self.stmt(body, 1)
        for b in heap:
            self.emit(f"free({self.buf(b)});", 1)
        self.emit("return 0;", 1)
        self.emit("}", 0)
        return name, "\n".join(self.lines)


def split_heap(body: Stmt) -> tuple[Stmt, list[Buffer]]:
    """Take the function-level heap allocations out of the body."""
    stmts = body.stmts if isinstance(body, Seq) else (body,)
    heap = [s.buffer for s in stmts if isinstance(s, Allocate) and s.buffer.scope == "global"]
    rest = tuple(s for s in stmts if not (isinstance(s, Allocate) and s.buffer.scope == "global"))
    return Seq(rest), heap


def nonneg(e: Expr) -> bool:
    """Whether an index expression is non-negative by construction (loop variables are)."""
    if isinstance(e, Const):
        return e.value >= 0
    if isinstance(e, Var):
        return True
    if isinstance(e, BinOp) and e.op in ("add", "mul", "floordiv", "floormod", "min", "max"):
        return nonneg(e.a) and nonneg(e.b)
    return False
