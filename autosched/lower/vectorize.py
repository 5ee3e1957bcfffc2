"""The vectorization pass: a ``vectorized`` loop becomes vector nodes (:mod:`.vector_ir`) where it
fits what the dialect can print (:class:`VectorCaps`), and stays a loop where it does not. Printers
only print the nodes; this is the one place that decides.

A loop fits when its body is stores (one, unless the dialect takes several) of one element type,
each at a contiguous index (stride 1 in the loop variable), of values built from what the dialect
has: contiguous loads, broadcasts of loop-invariant values, gathers, its operators and math
functions; a dialect that computes lane by lane (CUDA) needs only the store to be a vector, and
loads vectors where they fit. A dialect with a register width splits a constant extent into
vectors of that width (then halves; single lanes are scalar stores), loops over them when there
are many, and loops over whole vectors then a scalar remainder when the extent is symbolic.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from ..dtypes import dtype as dtype_info
from ..expr import BinOp, Call, Const, Expr, Var, as_expr, children, rewrite, substitute
from ..vector_lanes import chunks_of
from .access import along
from .ir import Buffer, BufLoad, For, Seq, Stmt, Store, map_children, seq
from .simplify import rebuild, simplify
from .vector_ir import Broadcast, Extract, Lanes, Ramp, VecLoad, VecOp, VecStore


@dataclass(frozen=True)
class VectorCaps:
    """What a dialect can print as vectors.

    ``lanes``: the loop extents that become one vector (GPU dialects); when empty, an extent is
    split into vectors of ``vector_bytes`` (:meth:`width` lanes, then halving), looped over beyond
    ``max_unrolled`` vectors, and a symbolic extent becomes a loop of whole vectors and a scalar
    remainder; the whole vectors of a loop with one store are one store as wide as all of them,
    which the printer prints as register-wide pieces. ``dtypes``: element types of vector stores.
    ``several_stores``: a loop body may be several stores. ``aligned_only`` / ``scopes``: vector
    loads and stores only at indices that are a multiple of the lanes, in buffers of these scopes
    (None: any). ``gathers``: loads at other
    strides (or non-affine indices) as gathers. ``lanewise``: values are computed lane by lane,
    only the store and the loads that fit are vectors (else the whole value must be vectors).
    ``ops`` / ``math``: binary operators and math functions applied to vectors.
    """

    dtypes: frozenset[str]
    ops: frozenset[str] = frozenset()
    math: frozenset[str] = frozenset()
    lanes: tuple[int, ...] = ()
    vector_bytes: int = 0
    max_unrolled: int = 8
    several_stores: bool = False
    aligned_only: bool = False
    scopes: frozenset[str] | None = None
    gathers: bool = False
    lanewise: bool = False

    def width(self, dtype: str) -> int:
        """Lanes of ``dtype`` in one vector register of ``vector_bytes`` (at least 2)."""
        return max(2, self.vector_bytes // dtype_info(dtype).bytes)


def vectorize(body: Stmt, caps: VectorCaps) -> Stmt:
    """``body`` with each ``vectorized`` loop that fits ``caps`` replaced by vector statements
    (unchanged subtrees are kept as the same objects)."""
    return _Pass(caps).stmt(body)


class _Loop:
    """Memos of one loop variable, shared by every loop over it in one pass (unrolled copies of a
    body share their unchanged nodes): whether a node uses it, and indices' linear forms."""

    __slots__ = ("v", "dep", "lin", "bases")

    def __init__(self, v: Var) -> None:
        self.v = v
        self.dep: dict[int, bool] = {}
        self.lin: dict[int, tuple[dict[Expr, int], int, int | None]] = {}
        # id(terms) -> (their expression: a ramp's shared base, the gcd of their coefficients)
        self.bases: dict[int, tuple[Expr, int]] = {}

    def depends(self, e: Expr) -> bool:
        got = self.dep.get(id(e))
        if got is None:
            got = e == self.v if isinstance(e, Var) else any(self.depends(c) for c in children(e))
            self.dep[id(e)] = got
        return got

    def linear(self, index: Expr) -> tuple[dict[Expr, int], int, int | None]:
        """(terms without the variable, constant, its coefficient or None where not affine)."""
        got = self.lin.get(id(index))
        if got is not None:
            return got
        if isinstance(index, BinOp) and index.op in ("add", "sub") and isinstance(index.b, Const):
            terms, k, c = self.linear(index.a)  # i + 1, i - 1 of unrolled copies share i's form
            off = int(index.b.value)
            got = (terms, k + off if index.op == "add" else k - off, c)
        else:
            got = along(index, self.v, self.depends)
        self.lin[id(index)] = got
        return got

    def ramp(self, index: Expr, base: Expr, lanes: int) -> tuple[Ramp, bool] | None:
        """(the ramp of ``index`` over lanes from ``base``, whether it is aligned to ``lanes``), or
        None where ``index`` is not affine; ``base`` is a constant or an expression."""
        terms, k, c = self.linear(index)
        if c is None:
            return None
        if not isinstance(base, Const):
            at = simplify(substitute(index, {self.v: BinOp("add", base, Const(0), "int32")}))
            return Ramp(at, c, lanes), False
        offset = k + c * int(base.value)
        got = self.bases.get(id(terms))
        if got is None:
            got = self.bases[id(terms)] = (rebuild(terms, 0), gcd(*terms.values()))
        return Ramp(got[0], c, lanes, offset), offset % lanes == 0 and got[1] % lanes == 0

    def at(self, e: Expr, base: Expr, lane: int) -> Expr:
        """``e`` at loop value ``base + lane``."""
        if isinstance(base, Const):
            return simplify(substitute(e, {self.v: Const(int(base.value) + lane)}))
        return simplify(substitute(e, {self.v: BinOp("add", base, Const(lane), "int32")}))


class _Pass:
    def __init__(self, caps: VectorCaps) -> None:
        self.caps = caps
        self.loops: dict[str, _Loop] = {}
        self.dtype = ""  # the element type of the loop being vectorized

    def stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, For) and s.kind == "vectorized":
            out = self.loop(s)
            if out is not None:
                return out
        return map_children(s, self.stmt)

    def loop(self, s: For) -> Stmt | None:
        caps = self.caps
        body = list(s.body.stmts) if isinstance(s.body, Seq) else [s.body]
        stores = [x for x in body if isinstance(x, Store)]
        if not stores or len(stores) != len(body) or (len(stores) > 1 and not caps.several_stores):
            return None
        dtypes = {x.buffer.dtype for x in stores}
        if len(dtypes) != 1 or next(iter(dtypes)) not in caps.dtypes:
            return None
        self.dtype = dtypes.pop()
        lp = self.loops.get(s.var.name)
        if lp is None or lp.v != s.var:
            lp = self.loops[s.var.name] = _Loop(s.var)
        if caps.lanes:
            if not (isinstance(s.begin, int) and s.extent in caps.lanes):
                return None
            assert isinstance(s.extent, int)
            return self.chunk(lp, stores, Const(s.begin), s.extent)
        width = caps.width(self.dtype)
        if not (isinstance(s.begin, int) and isinstance(s.extent, int)):
            return self.symbolic(lp, s, stores, width)
        if s.extent % width == 0 and s.extent // width > caps.max_unrolled:
            chunk_var = Var(s.var.name + ".vec")
            base: Expr = BinOp("add", BinOp("mul", chunk_var, Const(width), "int32"), Const(s.begin), "int32")
            inner = self.chunk(lp, stores, base, width)
            return None if inner is None else For(chunk_var, 0, s.extent // width, "serial", inner)
        chunks = chunks_of(s.extent, width)
        if len(stores) == 1:  # whole vectors as one wide store, printed as register-wide pieces
            whole = chunks.count(width)
            chunks = [width * whole] * (whole > 0) + [n for n in chunks if n != width]
        out: list[Stmt] = []
        offset = s.begin
        for lanes in chunks:
            got = self.chunk(lp, stores, Const(offset), lanes)
            if got is None:
                return None
            out.append(got)
            offset += lanes
        return seq(out)

    def symbolic(self, lp: _Loop, s: For, stores: list[Store], width: int) -> Stmt | None:
        """A loop of whole vectors over a symbolic extent, then a scalar remainder."""
        chunk_var = Var(s.var.name + ".vec")
        begin = as_expr(s.begin)
        base: Expr = BinOp("add", BinOp("mul", chunk_var, Const(width), "int32"), begin, "int32")
        inner = self.chunk(lp, stores, base, width)
        if inner is None:
            return None
        n_chunks = simplify(BinOp("floordiv", as_expr(s.extent), Const(width), "int32"))
        whole = BinOp("mul", n_chunks, Const(width), "int32")
        rest = simplify(BinOp("add", begin, whole, "int32"))
        tail = simplify(BinOp("sub", as_expr(s.extent), whole, "int32"))
        remainder = For(s.var, rest, tail, "serial", seq(stores))
        return seq([For(chunk_var, 0, n_chunks, "serial", inner), remainder])

    def chunk(self, lp: _Loop, stores: list[Store], base: Expr, lanes: int) -> Stmt | None:
        """The stores of ``lanes`` iterations from ``base`` (scalar stores when ``lanes`` is 1)."""
        if lanes == 1:
            return seq(Store(st.buffer, lp.at(st.index, base, 0), lp.at(st.value, base, 0)) for st in stores)
        out: list[Stmt] = []
        for st in stores:
            got = self.store(lp, st, base, lanes)
            if got is None:
                return None
            out.append(got)
        return seq(out)

    def access(self, lp: _Loop, buf: Buffer, index: Expr, base: Expr, lanes: int) -> tuple[Ramp, bool] | None:
        """The contiguous ramp of an index where the dialect may load or store there, else None."""
        caps = self.caps
        if caps.scopes is not None and buf.scope not in caps.scopes:
            return None
        got = lp.ramp(index, base, lanes)
        if got is None or got[0].stride != 1 or (caps.aligned_only and not got[1]):
            return None
        return got

    def store(self, lp: _Loop, st: Store, base: Expr, lanes: int) -> VecStore | None:
        at = self.access(lp, st.buffer, st.index, base, lanes)
        if at is None:
            return None
        if self.caps.lanewise:
            value: Expr | None = self.lanewise(lp, st.value, base, lanes)
        else:
            value = self.vector(lp, st.value, base, lanes)
            if value is not None and value.dtype != st.buffer.dtype:
                return None
        return None if value is None else VecStore(st.buffer, at[0], value, at[1])

    def vector(self, lp: _Loop, e: Expr, base: Expr, lanes: int) -> Expr | None:
        """``e`` over ``lanes`` iterations from ``base`` as vector nodes of the stores' element
        type, or None if it needs what the dialect lacks. Loop-invariant parts are broadcasts,
        found bottom-up (a load by its index's linear form) so that most nodes need no walk."""
        caps = self.caps
        if isinstance(e, BufLoad):
            if lp.linear(e.index)[2] == 0:
                return Broadcast(e, lanes)
            if e.dtype != self.dtype:
                return None
            got = lp.ramp(e.index, base, lanes)
            if got is not None and got[0].stride == 1:
                return VecLoad(e.buffer, got[0], got[1])
            if not caps.gathers:
                return None
            if got is not None and isinstance(base, Const):
                return VecLoad(e.buffer, got[0], got[1])
            return Lanes(tuple(BufLoad(e.buffer, lp.at(e.index, base, k)) for k in range(lanes)))
        if isinstance(e, (Var, Const)):
            return None if e is lp.v or e == lp.v else Broadcast(e, lanes)
        if isinstance(e, BinOp):
            a, b = self.vector(lp, e.a, base, lanes), self.vector(lp, e.b, base, lanes)
            if a is None or b is None:
                return None
            if isinstance(a, Broadcast) and isinstance(b, Broadcast):
                return Broadcast(e, lanes)
            if e.op not in caps.ops or e.type != self.dtype:
                return None
            return VecOp(e.op, (a, b), e.type, lanes)
        if isinstance(e, Call) and e.name in caps.math and lp.depends(e):
            args = tuple(self.vector(lp, x, base, lanes) for x in e.args)
            if e.type != self.dtype or any(a is None for a in args):
                return None
            return VecOp(e.name, args, e.type, lanes)  # type: ignore[arg-type]
        return None if lp.depends(e) else Broadcast(e, lanes)

    def lanewise(self, lp: _Loop, e: Expr, base: Expr, lanes: int) -> Lanes:
        """``e`` lane by lane, its loads that fit as lanes of vector loads."""
        loads: dict[BufLoad, VecLoad | None] = {}

        def vector_load(load: BufLoad) -> VecLoad | None:
            if load not in loads:
                got = None
                if load.dtype in self.caps.dtypes:
                    got = self.access(lp, load.buffer, load.index, base, lanes)
                loads[load] = None if got is None else VecLoad(load.buffer, got[0], got[1])
            return loads[load]

        def lane(k: int) -> Expr:
            def lift(n: Expr) -> Expr | None:
                vec = vector_load(n) if isinstance(n, BufLoad) else None
                return None if vec is None else Extract(vec, k)

            return lp.at(rewrite(e, lift), base, k)

        return Lanes(tuple(lane(k) for k in range(lanes)))
