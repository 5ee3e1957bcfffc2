"""The raw per-store rows behind :mod:`autosched.model.features`: one walk over a lowered loop nest.

Each buffer store of the nest gets one row of :data:`NUM_RAW` numbers in the order of
``features._SPEC`` (before log scaling). The walk keeps the loops around the store; each store's
expressions are scanned once (op counts and, per buffer access, the coefficient of every loop
variable in its flat index), and partition copies that share a store reuse that scan.

Region estimates for an access ``sum(c_v * v)`` over a set of loops: loops whose coefficients have
the same magnitude slide over one axis together, so they merge into one extent (``sum(e - 1) + 1``:
the rows a convolution window and its output tile cover); the region is the product of the merged
extents, capped by the span ``sum(|c| * (e - 1)) + 1`` and by the buffer's size.
"""

from __future__ import annotations

import math

import numpy as np

from ..dtypes import dtype as _dtype
from ..expr import BinOp, Call, Cast, Cmp, Const, Expr, Logic, Not, Select, Var, as_int
from ..lower.ir import Allocate, BufLoad, For, IfThenElse, Seq, Stmt, Store

LINE_BYTES = 64  # cache line size the line counts assume
TOP_BUFFERS = 5  # buffers per store described (the ones that touch the most cache lines)
AI_SAMPLES = 10  # points of the arithmetic intensity curve
NUM_OPS = 15
NUM_BUFFER = 17
NUM_RAW = NUM_OPS + 3 * 7 + 8 + TOP_BUFFERS * NUM_BUFFER + AI_SAMPLES + 4 + 4

# op-count slots: float kinds 0-5, int kinds 6-11 (float slot + 6), then bool, select, cast
_ADDSUB, _MUL, _DIVMOD, _MINMAX, _MATH, _CMP = range(6)
_BOOL, _SELECT, _CAST = 12, 13, 14
_BINOP_SLOT = {
    "add": _ADDSUB, "sub": _ADDSUB, "mul": _MUL, "div": _DIVMOD, "floordiv": _DIVMOD,
    "floormod": _DIVMOD, "min": _MINMAX, "max": _MINMAX,
}
_FLOAT_ARITH = (_ADDSUB, _MUL, _DIVMOD, _MINMAX, _MATH)  # what the intensity curve counts
_GPU_SLOTS = {
    "blockIdx.x": 1, "blockIdx.y": 2, "blockIdx.z": 3,
    "threadIdx.x": 4, "threadIdx.y": 5, "threadIdx.z": 6, "vthread": 7,
}
_UNROLL_KINDS = ("unrolled", "unroll_hint")

Coefs = dict[str, float]  # loop variable name -> coefficient in a flat index
Access = tuple[str, int, int, Coefs, bool]  # buffer name, element bytes, buffer size, coefs, written
Loop = tuple[str, int, str, str]  # variable name, extent, kind, thread tag ("" if none)


_FLOATS = frozenset(("float16", "float32", "float64"))
_FRACTIONS = np.linspace(0.0, 1.0, AI_SAMPLES)


def _elem_bytes(dtype: str, memo: dict[str, int] = {}) -> int:  # noqa: B006 - a deliberate memo
    got = memo.get(dtype)
    if got is None:
        got = memo[dtype] = _dtype(dtype).bytes
    return got


def _affine(e: Expr, scale: float, out: Coefs) -> None:
    """Add ``scale * e``'s loop-variable coefficients to ``out`` (non-affine parts approximated:
    ``x // c`` scales ``x`` by ``1/c``, ``x % c`` keeps ``x``, a product of two variable terms and
    ``min``/``max`` count each side once)."""
    kind = type(e)
    if kind is Var:
        out[e.name] = out.get(e.name, 0.0) + scale  # type: ignore[attr-defined]
    elif kind is BinOp:
        op, a, b = e.op, e.a, e.b  # type: ignore[attr-defined]
        if op == "add":
            _affine(a, scale, out)
            _affine(b, scale, out)
        elif op == "sub":
            _affine(a, scale, out)
            _affine(b, -scale, out)
        elif op == "mul" and isinstance(b, Const):
            _affine(a, scale * float(b.value), out)
        elif op == "mul" and isinstance(a, Const):
            _affine(b, scale * float(a.value), out)
        elif op == "floordiv" and isinstance(b, Const) and b.value:
            _affine(a, scale / float(b.value), out)
        else:
            _affine(a, scale, out)
            _affine(b, scale, out)
    elif kind is Const:
        return
    elif isinstance(e, Cast):
        _affine(e.value, scale, out)
    elif isinstance(e, Select):
        _affine(e.true_value, scale, out)
        _affine(e.false_value, scale, out)


def _coefs(index: Expr) -> Coefs:
    out: Coefs = {}
    _affine(index, 1.0, out)
    return {v: abs(c) for v, c in out.items() if abs(c) > 1e-12}


def _scan(e: Expr, ops: list[float], reads: list[Access]) -> None:
    """Count the operations of ``e`` into ``ops`` and list its buffer reads."""
    kind = type(e)
    if kind is BinOp:
        ops[_BINOP_SLOT.get(e.op, _ADDSUB) + (0 if e.type in _FLOATS else 6)] += 1  # type: ignore[attr-defined]
        _scan(e.a, ops, reads)  # type: ignore[attr-defined]
        _scan(e.b, ops, reads)  # type: ignore[attr-defined]
    elif kind is Var or kind is Const:
        return
    elif kind is BufLoad:
        b = e.buffer  # type: ignore[attr-defined]
        reads.append((b.name, _elem_bytes(b.dtype), b.size, _coefs(e.index), False))  # type: ignore[attr-defined]
        _scan(e.index, ops, reads)  # type: ignore[attr-defined]
    elif isinstance(e, Cmp):
        ops[_CMP + (0 if e.a.dtype in _FLOATS else 6)] += 1
        _scan(e.a, ops, reads)
        _scan(e.b, ops, reads)
    elif isinstance(e, Select):
        ops[_SELECT] += 1
        _scan(e.cond, ops, reads)
        _scan(e.true_value, ops, reads)
        _scan(e.false_value, ops, reads)
    elif isinstance(e, Logic):
        ops[_BOOL] += 1
        _scan(e.a, ops, reads)
        _scan(e.b, ops, reads)
    elif isinstance(e, Not):
        ops[_BOOL] += 1
        _scan(e.a, ops, reads)
    elif isinstance(e, Cast):
        ops[_CAST] += 1
        _scan(e.value, ops, reads)
    elif isinstance(e, Call):
        ops[_MATH + (0 if e.type in _FLOATS else 6)] += 1
        for x in e.args:
            _scan(x, ops, reads)


def scan_store(s: Store) -> tuple[list[float], list[Access]]:
    """Operation counts of one execution of ``s`` and its accesses (the write first)."""
    ops = [0.0] * NUM_OPS
    b = s.buffer
    accesses: list[Access] = [(b.name, _elem_bytes(b.dtype), as_int(b.size), _coefs(s.index), True)]
    _scan(s.index, ops, accesses)
    _scan(s.value, ops, accesses)
    return ops, accesses


def auto_unroll_steps(nest: Stmt) -> dict[str, int]:
    """Buffer name -> the largest ``auto_unroll_max_step`` pragma around a store to it."""
    out: dict[str, int] = {}
    _pragmas(nest, 0, out)
    return out


def _pragmas(s: Stmt, step: int, out: dict[str, int]) -> None:
    if isinstance(s, For):
        _pragmas(s.body, s.auto_unroll if s.auto_unroll is not None else step, out)
    elif isinstance(s, Store):
        if step > out.get(s.buffer.name, 0):
            out[s.buffer.name] = step
    elif isinstance(s, Seq):
        for x in s.stmts:
            _pragmas(x, step, out)
    elif isinstance(s, IfThenElse):
        _pragmas(s.then, step, out)
        if s.otherwise is not None:
            _pragmas(s.otherwise, step, out)


class _Walker:
    """One program's walk: the loop stack, allocations seen, rows out."""

    def __init__(self, pragmas: dict[str, int], gpu: bool) -> None:
        self.loops: list[Loop] = []
        self.prods: list[int] = [1]  # product of the extents of the first i loops
        self.guards = 0
        self.allocs: dict[str, tuple[int, int]] = {}  # buffer -> (bytes, loop product around it)
        self.pragmas = pragmas
        self.gpu = gpu
        self.scans: dict[int, tuple[Store, list[float], list[Access]]] = {}
        self.rows: list[list[float]] = []

    def visit(self, s: Stmt) -> None:
        if isinstance(s, For):
            extent = as_int(s.extent, "loop extent")
            self.loops.append((s.var.name, extent, s.kind, s.thread or ""))
            self.prods.append(self.prods[-1] * extent)
            self.visit(s.body)
            self.loops.pop()
            self.prods.pop()
        elif isinstance(s, Seq):
            for x in s.stmts:
                self.visit(x)
        elif isinstance(s, Store):
            got = self.scans.get(id(s))
            if got is None:
                got = self.scans[id(s)] = (s, *scan_store(s))
            self.rows.append(self.row(s, got[1], got[2]))
        elif isinstance(s, IfThenElse):
            self.guards += 1
            self.visit(s.then)
            if s.otherwise is not None:
                self.visit(s.otherwise)
            self.guards -= 1
        elif isinstance(s, Allocate):
            b = s.buffer
            self.allocs[b.name] = (as_int(b.size) * _elem_bytes(b.dtype), self.prods[-1])

    def row(self, s: Store, ops: list[float], accesses: list[Access]) -> list[float]:
        loops, n = self.loops, len(self.loops)
        outer = float(self.prods[-1])
        out = [x * outer for x in ops]
        for kinds in (("vectorized",), _UNROLL_KINDS, ("parallel",)):
            out += _annotation(loops, kinds)
        gpu = [0.0] * 8
        if self.gpu:
            gpu[0] = 1.0
            for _, extent, kind, thread in loops:
                slot = _GPU_SLOTS.get(thread) if kind == "thread" else None
                if slot is not None:
                    gpu[slot] = float(extent)
        out += gpu
        buffers = _buffer_groups(accesses)
        regions = [_regions(loops, g) for g in buffers]
        out += _buffer_features(loops, outer, buffers, regions)
        flops = sum(ops[i] for i in _FLOAT_ARITH)
        out += _intensity(loops, flops, buffers, regions)
        size, around = self.allocs.get(s.buffer.name, (0, 0))
        if size:
            out += [size, size * around, around, outer / around if around else 0.0]
        else:
            out += [0.0, 0.0, 0.0, 0.0]
        out += [outer, float(n), float(self.pragmas.get(s.buffer.name, 0)), float(self.guards)]
        return out


def _annotation(loops: list[Loop], kinds: tuple[str, ...]) -> list[float]:
    """count, extent product, innermost extent, position one-hot (none/inner/middle/outer)."""
    num, prod, last = 0, 1, -1
    for i, (_, extent, kind, _) in enumerate(loops):
        if kind in kinds:
            num += 1
            prod *= extent
            last = i
    if not num:
        return [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    pos = [0.0, 0.0, 0.0, 0.0]
    pos[1 if last == len(loops) - 1 else 3 if last == 0 else 2] = 1.0
    return [float(num), float(prod), float(loops[last][1]), *pos]


Group = tuple[str, int, int, int, bool, bool, list[Coefs]]  # name, elem, size, accesses, r, w, coefs


def _buffer_groups(accesses: list[Access]) -> list[Group]:
    """Accesses gathered by buffer (first-access order), distinct coefficient maps kept once."""
    groups: dict[str, list] = {}
    for name, elem, size, coefs, write in accesses:
        g = groups.get(name)
        if g is None:
            groups[name] = [name, elem, size, 1, not write, write, [coefs]]
        else:
            g[3] += 1
            g[4] = g[4] or not write
            g[5] = g[5] or write
            if coefs not in g[6]:
                g[6].append(coefs)
    return [tuple(g) for g in groups.values()]


def _regions(loops: list[Loop], g: Group) -> list[float]:
    """Elements of the buffer touched by loops ``i..`` for i = n (none) down to 0, indexed by i."""
    n, size = len(loops), float(g[2])
    best = [1.0] * (n + 1)
    for coefs in g[6]:
        merged: dict[float, float] = {}
        span = 1.0
        for i in range(n - 1, -1, -1):
            var, extent = loops[i][0], loops[i][1]
            c = coefs.get(var, 0.0)
            if c and extent > 1:
                merged[c] = merged.get(c, 1.0) + (extent - 1)
                span += c * (extent - 1)
            prod = 1.0
            for m in merged.values():
                prod *= m
            touched = min(prod, span, size)
            if touched > best[i]:
                best[i] = touched
    return best


def _lines(loops: list[Loop], coefs: Coefs, elem: int, unique: float) -> tuple[float, float]:
    """(line fetches of a streaming pass over the nest, distinct lines of the region)."""
    per_line = LINE_BYTES / elem
    run, total, inner = 1.0, 1.0, None
    for var, extent, _, _ in reversed(loops):
        total *= extent
        c = coefs.get(var, 0.0)
        if inner is None:
            if c:
                inner = c
                run *= max(1.0, min(float(extent), per_line / c))
            else:
                run *= extent
    # loop groups with a coefficient under a line lie along one run of lines; the others each
    # start new lines
    short, rows = 1.0, 1.0
    merged: dict[float, float] = {}
    for var, extent, _, _ in loops:
        c = coefs.get(var, 0.0)
        if c and extent > 1:
            merged[c] = merged.get(c, 1.0) + (extent - 1)
    for c, m in merged.items():
        if c < per_line:
            short += c * (m - 1)
        else:
            rows *= m
    distinct = min(max(rows * math.ceil(short / per_line), math.ceil(unique / per_line)), unique)
    return total / run, distinct


def _buffer_features(
    loops: list[Loop], outer: float, buffers: list[Group], regions: list[list[float]]
) -> list[float]:
    """The :data:`TOP_BUFFERS` buffer blocks, the ones with the most line fetches first."""
    n = len(loops)
    blocks: list[tuple[float, float, float, str, list[float]]] = []
    for g, region in zip(buffers, regions, strict=True):
        name, elem, _, count, read, write, maps = g
        nbytes = count * outer * elem
        unique_bytes = region[0] * elem
        lines, unique_lines = 0.0, 0.0
        for coefs in maps:
            fetched, distinct = _lines(loops, coefs, elem, region[0])
            lines += fetched
            unique_lines = max(unique_lines, distinct)
        stride = 0.0
        for var, _, _, _ in reversed(loops):
            c = maps[0].get(var, 0.0)
            if c:
                stride = c
                break
        kind, dis_iter, dis_bytes, ct = [0.0, 0.0, 1.0], 0.0, 0.0, 0.0
        for i in range(n - 1, -1, -1):
            var, extent = loops[i][0], loops[i][1]
            if extent > 1 and all(var not in m for m in maps):
                kind, ct = [1.0, 0.0, 0.0], float(extent)
                dis_iter = float(math.prod(lp[1] for lp in loops[i + 1 :]))
                dis_bytes = sum(r[i + 1] * b[1] for r, b in zip(regions, buffers, strict=True))
                break
        else:
            if count > 1:
                kind, ct, dis_iter = [0.0, 1.0, 0.0], float(count - 1), 1.0
                dis_bytes = float(sum(b[1] for b in buffers))
        div = max(ct, 1.0)
        block = [
            float(read and not write), float(write and not read), float(read and write),
            nbytes, unique_bytes, lines, unique_lines, *kind, dis_iter, dis_bytes, ct,
            nbytes / div, unique_bytes / div, lines / div, stride,
        ]
        blocks.append((-lines, -nbytes, -unique_bytes, name, block))
    blocks.sort(key=lambda b: b[:4])
    out: list[float] = []
    for b in blocks[:TOP_BUFFERS]:
        out += b[4]
    return out + [0.0] * (NUM_BUFFER * (TOP_BUFFERS - min(len(blocks), TOP_BUFFERS)))


def _intensity(
    loops: list[Loop], flops: float, buffers: list[Group], regions: list[list[float]]
) -> list[float]:
    """Float operations per byte touched, for loop blocks from one iteration to the whole nest,
    sampled at :data:`AI_SAMPLES` points evenly spaced in log2 of the block's iterations."""
    n = len(loops)
    xs, ys = [0.0], []
    iters = 1.0
    for i in range(n, -1, -1):
        if i < n:
            if loops[i][1] <= 1:
                continue
            iters *= loops[i][1]
            xs.append(math.log2(iters))
        touched = sum(r[i] * b[1] for r, b in zip(regions, buffers, strict=True))
        ys.append(flops * iters / touched if touched else 0.0)
    if len(xs) == 1:
        return ys * AI_SAMPLES
    return np.interp(_FRACTIONS * xs[-1], xs, ys).tolist()


def store_rows(loops: Stmt, nest: Stmt, gpu: bool = False) -> list[list[float]]:
    """The raw rows of every store of ``loops`` (pragmas read from the lowerer's ``nest``)."""
    walker = _Walker(auto_unroll_steps(nest), gpu)
    walker.visit(loops)
    return walker.rows
