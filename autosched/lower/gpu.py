"""GPU lowering: a lowered function becomes kernels with launch dimensions, checked and synchronized.

Every top-level statement of a lowered function (one root stage) becomes one kernel, launched in
order (a kernel boundary orders global memory between stages). Inside a kernel, loops bound to
``blockIdx.*`` / ``threadIdx.*`` stay ``For`` loops of kind ``thread``: a dialect printer turns each
into its work-item index, so loops of the same tag at several depths (a cooperative fetch nested in
a thread loop) read the same hardware index. ``vthread`` loops are injected first (each virtual
thread's statements copied into the thread's work, see :mod:`~autosched.lower.vthread`).

:func:`split_kernels` checks, before any compiler runs (a :class:`ScheduleError`, which a builder
records as ``INSTANTIATION_ERROR``): a stage with no bound loop, a global store that every thread of
some bound axis would repeat, thread extents over the device limit, mismatched extents of one tag
in a kernel, shared memory over the limit, symbolic shapes. It then inserts barriers where a shared
buffer written by some threads is read by others, and moves thread-dependent guards inside so that
every thread reaches every barrier.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..dtypes import dtype as dtype_info
from ..expr import Expr, Var, walk
from ..schedule import ScheduleError
from . import ir
from .ir import Allocate, Barrier, Buffer, BufLoad, For, IfThenElse, PrimFunc, Seq, Stmt, Store, seq
from .simplify import conjoin, conjuncts
from .vthread import inject_vthreads

#: the launch axes, in (x, y, z) order
GRID_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
BLOCK_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


@dataclass(frozen=True, slots=True)
class GpuKernel:
    """One kernel: its body (thread loops kept, see the module docstring), the shared buffers it
    declares, and its launch: ``grid`` blocks of ``block`` threads, each (x, y, z)."""

    name: str
    body: Stmt
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: tuple[Buffer, ...]

    @property
    def threads(self) -> int:
        """Threads per block."""
        return self.block[0] * self.block[1] * self.block[2]

    def __str__(self) -> str:
        shared = "".join(f" shared {b.name}: {b.dtype}[{b.size}]" for b in self.shared)
        head = f"kernel {self.name} grid={self.grid} block={self.block}{shared} {{"
        return "\n".join([head, *("  " + ln for ln in ir.format_stmt(self.body)), "}"])


@dataclass(frozen=True, slots=True)
class GpuFunc:
    """A lowered GPU program: every kernel takes ``args`` then ``temps`` (global intermediates the
    host allocates), and they run in order."""

    name: str
    args: tuple[Buffer, ...]
    temps: tuple[Buffer, ...]
    kernels: tuple[GpuKernel, ...]

    @property
    def params(self) -> tuple[Buffer, ...]:
        """The buffers every kernel takes, in order."""
        return self.args + self.temps

    def __str__(self) -> str:
        sig = ", ".join(f"{b.name}: {b.dtype}{ir.shape_str(b.shape)}" for b in self.params)
        kernels = [ln for k in self.kernels for ln in str(k).split("\n")]
        return "\n".join([f"gpu func {self.name}({sig}) {{", *("  " + ln for ln in kernels), "}"])


def split_kernels(func: PrimFunc, max_threads: int, shared_bytes: int) -> GpuFunc:
    """``func`` as kernels (see the module docstring); raises :class:`ScheduleError` with the reason."""
    if func.sizes:
        names = ", ".join(v.name for v in func.sizes)
        raise ScheduleError(f"GPU kernels take fixed shapes: bind the shape variables {names} first")
    top = func.body.stmts if isinstance(func.body, Seq) else (func.body,)
    temps = tuple(s.buffer for s in top if isinstance(s, Allocate) and s.buffer.scope == "global")
    kernels: list[GpuKernel] = []
    for stmt in top:
        if isinstance(stmt, Allocate) and stmt.buffer.scope == "global":
            continue
        kernels.append(_kernel(f"{func.name}_kernel{len(kernels)}", stmt, max_threads, shared_bytes))
    return GpuFunc(func.name, func.args, temps, tuple(kernels))


def _kernel(name: str, body: Stmt, max_threads: int, shared_bytes: int) -> GpuKernel:
    body = inject_vthreads(body)
    extents: dict[str, int] = {}
    _check(body, extents, frozenset())
    if not any(t in extents for t in GRID_TAGS + BLOCK_TAGS):
        where = ", ".join(sorted({b.name for b in _stored(body)})) or "a stage"
        raise ScheduleError(
            f"unbound loops outside the kernel: {where} has no loop bound to blockIdx/threadIdx "
            "(bind its outer loops)"
        )
    _check_stores(body, {t for t in extents if extents[t] > 1}, frozenset())
    block = (extents.get("threadIdx.x", 1), extents.get("threadIdx.y", 1), extents.get("threadIdx.z", 1))
    grid = (extents.get("blockIdx.x", 1), extents.get("blockIdx.y", 1), extents.get("blockIdx.z", 1))
    threads = block[0] * block[1] * block[2]
    if threads > max_threads:
        raise ScheduleError(
            f"{threads} threads per block ({' x '.join(map(str, block))}) exceed the device limit "
            f"of {max_threads}"
        )
    shared = tuple(dict.fromkeys(_shared_buffers(body)))
    used = sum(_bytes(b) for b in shared)
    if used > shared_bytes:
        names = ", ".join(b.name for b in shared)
        raise ScheduleError(
            f"shared memory of {used} bytes ({names}) exceeds the device limit of {shared_bytes} bytes"
        )
    return GpuKernel(name, _hoist(_sync(body)), grid, block, shared)


def _check(s: Stmt, extents: dict[str, int], bound: frozenset[str]) -> None:
    """Collect each tag's extent (one per tag in a kernel); reject what a kernel cannot run."""
    if isinstance(s, For):
        if s.kind == "parallel":
            raise ScheduleError(f"loop {s.var.name} is parallel: GPU kernels bind loops to threads instead")
        if not isinstance(s.extent, int) or not isinstance(s.begin, int):
            raise ScheduleError(f"loop {s.var.name} has a symbolic extent: GPU kernels take fixed shapes")
        if s.kind == "thread" and s.thread is not None:
            old = extents.setdefault(s.thread, s.extent)
            if old != s.extent:
                raise ScheduleError(
                    f"{s.thread} has extent {old} in one stage and {s.extent} in another of the same "
                    f"kernel (loop {s.var.name}): every loop bound to one thread index needs one extent"
                )
            bound = bound | {s.thread}
        _check(s.body, extents, bound)
    elif isinstance(s, (Seq, IfThenElse)):
        for x in (s.stmts if isinstance(s, Seq) else (s.then, s.otherwise)):
            if x is not None:
                _check(x, extents, bound)
    elif isinstance(s, Allocate) and s.buffer.scope == "global":
        raise ScheduleError(f"buffer {s.buffer.name} is a global temporary inside a kernel")


def _check_stores(s: Stmt, tags: set[str], bound: frozenset[str]) -> None:
    """A store to a global buffer must be under every launch axis of its kernel, or threads race."""
    if isinstance(s, Store):
        missing = sorted(tags - bound)
        if s.buffer.scope == "global" and missing:
            raise ScheduleError(
                f"the store to {s.buffer.name} runs on every thread of {', '.join(missing)}: "
                "none of its loops is bound there (bind a loop of its stage to each axis)"
            )
    elif isinstance(s, For):
        _check_stores(s.body, tags, bound | ({s.thread} if s.thread else set()))
    elif isinstance(s, (Seq, IfThenElse)):
        for x in (s.stmts if isinstance(s, Seq) else (s.then, s.otherwise)):
            if x is not None:
                _check_stores(x, tags, bound)


def _stored(s: Stmt) -> list[Buffer]:
    return [x.buffer for x in _stmts(s) if isinstance(x, Store)]


def _shared_buffers(s: Stmt) -> list[Buffer]:
    out = [x.buffer for x in _stmts(s) if isinstance(x, Allocate) and x.buffer.scope == "shared"]
    for b in out:
        if not isinstance(b.size, int):
            raise ScheduleError(f"shared buffer {b.name} has a symbolic size")
    return out


def _bytes(b: Buffer) -> int:
    assert isinstance(b.size, int)
    return b.size * dtype_info(b.dtype).bytes


def _stmts(s: Stmt) -> list[Stmt]:
    """Every statement in ``s``, ``s`` first."""
    out = [s]
    if isinstance(s, For):
        out += _stmts(s.body)
    elif isinstance(s, IfThenElse):
        out += _stmts(s.then) + ([] if s.otherwise is None else _stmts(s.otherwise))
    elif isinstance(s, Seq):
        for x in s.stmts:
            out += _stmts(x)
    return out


def _exprs(s: Stmt) -> list[Expr]:
    out: list[Expr] = []
    for x in _stmts(s):
        if isinstance(x, Store):
            out += [x.index, x.value]
        elif isinstance(x, IfThenElse):
            out.append(x.cond)
    return out


def _access(s: Stmt) -> tuple[set[str], set[str]]:
    """(shared buffers ``s`` writes, shared buffers it reads)."""
    writes = {b.name for b in _stored(s) if b.scope == "shared"}
    reads = {
        n.buffer.name
        for e in _exprs(s)
        for n in walk(e)
        if isinstance(n, BufLoad) and n.buffer.scope == "shared"
    }
    return writes, reads


def _sync(s: Stmt) -> Stmt:
    """Insert barriers: between a statement that writes a shared buffer and a later one that reads
    it (or the other way round), and at the end of a loop whose body writes and reads one."""
    if isinstance(s, Seq):
        out: list[Stmt] = []
        pending_w: set[str] = set()
        pending_r: set[str] = set()
        for x in s.stmts:
            x = _sync(x)
            w, r = _access(x)
            if (w & pending_r) or (r & pending_w):
                out.append(Barrier("shared"))
                pending_w, pending_r = set(), set()
            out.append(x)
            pending_w |= w
            pending_r |= r
        return seq(out)
    if isinstance(s, For):
        body = _sync(s.body)
        w, r = _access(body)
        if w & r and s.kind != "thread":
            body = seq([body, Barrier("shared")])
        return For(s.var, s.begin, s.extent, s.kind, body, s.thread, s.auto_unroll)
    if isinstance(s, IfThenElse):
        other = None if s.otherwise is None else _sync(s.otherwise)
        return IfThenElse(s.cond, _sync(s.then), other)
    return s


def _has_barrier(s: Stmt) -> bool:
    return any(isinstance(x, Barrier) for x in _stmts(s))


def _hoist(s: Stmt, threads: frozenset[str] = frozenset()) -> Stmt:
    """Move guards that enclose a barrier inside, down to the statements around it, so that every
    thread reaches the barrier (a guard reads loop variables and sizes only: moving it is exact).
    A statement that writes shared memory only (a cooperative fetch) serves the whole block: it
    keeps the parts of the guard that do not read the enclosing ``threads`` (thread loop names),
    so that no thread skips its share of the fetch because its own outputs are out of range."""
    if isinstance(s, IfThenElse) and _has_barrier(s):
        if s.otherwise is not None:
            raise ScheduleError("a barrier inside an if/else branch: threads would not all reach it")
        inner = s.then
        if isinstance(inner, (Barrier, Allocate)):
            return inner
        if isinstance(inner, Seq):  # a declaration stays in the block, unguarded, for its users
            return seq(
                x if isinstance(x, Allocate) else _hoist(_guard(s.cond, x, threads), threads)
                for x in inner.stmts
            )
        if isinstance(inner, For):
            body = _hoist(IfThenElse(s.cond, inner.body), _inside(inner, threads))
            return replace(inner, body=body)
        if isinstance(inner, IfThenElse) and inner.otherwise is None:
            return _hoist(IfThenElse(conjoin([s.cond, inner.cond]), inner.then), threads)
        raise ScheduleError("a barrier inside an if/else branch: threads would not all reach it")
    if isinstance(s, IfThenElse):
        return s
    if isinstance(s, Seq):
        return seq(_hoist(x, threads) for x in s.stmts)
    if isinstance(s, For):
        body = _hoist(s.body, _inside(s, threads))
        return For(s.var, s.begin, s.extent, s.kind, body, s.thread, s.auto_unroll)
    return s


def _reads(e: Expr, names: frozenset[str]) -> bool:
    """Whether ``e`` reads a variable named in ``names``."""
    return any(isinstance(n, Var) and n.name in names for n in walk(e))


def _inside(loop: For, threads: frozenset[str]) -> frozenset[str]:
    """The thread loop names in scope inside ``loop``."""
    return threads | {loop.var.name} if loop.thread in BLOCK_TAGS else threads


def _guard(cond: Expr, s: Stmt, threads: frozenset[str]) -> Stmt:
    """``s`` under ``cond``, less the parts that read ``threads`` when ``s`` writes shared memory only."""
    stored = _stored(s)
    if stored and all(b.scope == "shared" for b in stored):
        keep = [c for c in conjuncts(cond) if not _reads(c, threads)]
        if not keep:
            return s
        cond = conjoin(keep)
    return IfThenElse(cond, s)
