"""``extern``: a stage computed by C the user provides, as TVM's ``te.extern``.

``extern(shape, inputs, fcompute)`` calls ``fcompute(ins, outs)`` with one
:class:`~.buffer.DeclBuffer` per input and per output; it returns a ``call_extern`` (run as a
statement) or an ``ir_builder`` body. The stage is one stage of the schedule: computes may read
its outputs and it may read theirs, but it keeps its body as written (no loops to schedule).
``call_packed`` maps TVM's well-known packed functions to C (``tvm.contrib.cblas.matmul`` is
``cblas_sgemm``, linked with OpenBLAS); ``call_intrin`` names the math functions autosched knows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from .buffer import BufferData, BufferRead, DeclBuffer, ExternCall, call_extern
from .ccode import NO_CODE, CCode
from .extent import extent_vars
from .ir_builder import Block, Branch, BufferStore, Evaluate, ExternStmt, Loop
from .nodes import MATH_FUNCS, Call, Expr, Extent, Var, as_expr
from .tensor import ComputeOp, ExternOp, Operation, Tensor, _check_shape
from .traverse import walk

#: the BLAS a cblas call links: OpenBLAS (Debian: apt-get install libopenblas-dev)
CBLAS = CCode.of(headers=["cblas.h"], libs=["openblas"])
_CBLAS_ROW_MAJOR, _CBLAS_NO_TRANS, _CBLAS_TRANS = 101, 111, 112


def _shapes(shape: Any, name: str) -> list[tuple[Extent, ...]]:
    """One shape, or a list of shapes (one per output)."""
    items = list(shape) if isinstance(shape, (tuple, list)) else [shape]
    if items and all(isinstance(s, (tuple, list)) for s in items):
        return [_check_shape(s, name) for s in items]
    return [_check_shape(items, name)]


def _same_shape(a: Sequence[Extent], b: Sequence[Extent]) -> bool:
    return len(a) == len(b) and all(str(x) == str(y) for x, y in zip(a, b, strict=True))


def _buffers(
    given: Sequence[DeclBuffer] | None,
    shapes: list[tuple[Extent, ...]],
    dtypes: list[str],
    names: list[str],
    what: str,
    name: str,
) -> tuple[DeclBuffer, ...]:
    """The buffers of extern stage ``name``'s inputs (``what`` = "in") or outputs: ``given``,
    checked against the shapes and dtypes, or new ones called ``names``."""
    if given is None:
        return tuple(DeclBuffer(s, d, n) for s, d, n in zip(shapes, dtypes, names, strict=True))
    bufs: list[DeclBuffer] = list(given) if isinstance(given, (list, tuple)) else [given]  # type: ignore[list-item]
    if len(bufs) != len(shapes) or not all(isinstance(b, DeclBuffer) for b in bufs):
        raise ValueError(f"extern {name!r}: {what}_buffers must be {len(shapes)} buffers (asc.decl_buffer)")
    for k, (b, s, d) in enumerate(zip(bufs, shapes, dtypes, strict=True)):
        if [str(x) for x in b.strides] != [str(x) for x in b.compact_strides]:
            raise ValueError(
                f"extern {name!r}: {what}_buffers[{k}] {b.name!r} has strides {list(b.strides)}, not "
                f"row-major {list(b.compact_strides)}; extern buffers are whole compact arrays "
                "(leave strides out)"
            )
        if not _same_shape(b.shape, s) or b.dtype != d:
            raise ValueError(
                f"extern {name!r}: {what}_buffers[{k}] {b.name!r} is {b.dtype}{list(b.shape)} but the "
                f"{what}put it stands for is {d}{list(s)}: the shapes and dtypes must agree"
            )
    return tuple(bufs)


def _as_stmt(result: Any, name: str) -> ExternStmt:
    if isinstance(result, ExternStmt):
        return result
    if isinstance(result, ExternCall):
        return Evaluate(result)
    raise TypeError(
        f"extern {name!r}: fcompute must return a call_extern/call_packed or an ir_builder body "
        f"(ib.get()), got {type(result).__name__}"
    )


def extern(
    shape: Any,
    inputs: Sequence[Tensor],
    fcompute: Callable[[list[DeclBuffer], list[DeclBuffer]], Any],
    name: str = "extern",
    dtype: str | Sequence[str] | None = None,
    in_buffers: Sequence[DeclBuffer] | None = None,
    out_buffers: Sequence[DeclBuffer] | None = None,
    tag: str = "",
    attrs: dict[str, Any] | None = None,
    c_source: str | Iterable[str] | None = None,
    headers: Iterable[str] | None = None,
    libs: Iterable[str] | None = None,
    include_dirs: Iterable[str] | None = None,
    lib_dirs: Iterable[str] | None = None,
) -> Any:
    """Tensors of ``shape`` (a shape, or a list of shapes for several outputs) computed by the C
    that ``fcompute(ins, outs)`` returns (see the module docstring).

    ``dtype`` defaults to the first input's (float32 without inputs); ``in_buffers`` /
    ``out_buffers`` (from ``decl_buffer``) must match the inputs' and outputs' shapes and dtypes.
    ``c_source`` is C text placed before the kernel (define its functions ``static``), ``headers``
    are ``#include``d, ``libs`` linked (``libs=["openblas"]``), ``include_dirs`` / ``lib_dirs``
    searched. Returns one tensor, or a list for several shapes.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"tensor names must be non-empty strings, got {name!r}")
    tensors = list(inputs)
    if not all(isinstance(t, Tensor) for t in tensors):
        raise TypeError(f"extern {name!r}: inputs must be tensors")
    shapes = _shapes(shape, name)
    default = tensors[0].dtype if tensors else "float32"
    dtypes = [dtype or default] * len(shapes) if dtype is None or isinstance(dtype, str) else list(dtype)
    if len(dtypes) != len(shapes):
        raise ValueError(f"extern {name!r}: {len(shapes)} output shapes but {len(dtypes)} dtypes")
    in_shapes, in_dtypes = [tuple(t.shape) for t in tensors], [t.dtype for t in tensors]
    ins = _buffers(in_buffers, in_shapes, in_dtypes, [t.name for t in tensors], "in", name)
    out_names = [name] if len(shapes) == 1 else [f"{name}.v{k}" for k in range(len(shapes))]
    outs = _buffers(out_buffers, shapes, dtypes, out_names, "out", name)
    body = _as_stmt(fcompute(list(ins), list(outs)), name)
    code = CCode.of(c_source, headers, libs, include_dirs, lib_dirs).merge(stmt_code(body))
    known, nodes = set(ins) | set(outs), [n for e in stmt_exprs(body) for n in walk(e)]
    used = [n.buffer for n in nodes if isinstance(n, (BufferData, BufferRead))]
    used += [x.buffer for x in statements(body) if isinstance(x, BufferStore)]
    for buf in used:
        if buf not in known:
            raise ValueError(f"extern {name!r}: the body uses buffer {buf.name!r}, not one of ins/outs")
    sizes = {v.name for t in tensors for v in extent_vars(list(t.shape))}
    loops = {x.var.name for x in statements(body) if isinstance(x, Loop)}
    free = sorted({n.name for n in nodes if isinstance(n, Var)} - sizes - loops)
    if free:
        raise ValueError(
            f"extern {name!r}: the body uses variables {free} that are neither its loops' nor shape "
            "variables of its inputs"
        )
    missing = sorted({v.name for s in shapes for v in extent_vars(list(s))} - sizes)
    if missing:
        raise ValueError(f"extern {name!r}: output shape variables {missing} appear in no input's shape")
    op = ExternOp(name, tuple(tensors), ins, outs, body, code, tag, dict(attrs or {}))
    return op.output(0) if len(shapes) == 1 else [op.output(k) for k in range(len(shapes))]


def statements(s: ExternStmt) -> Iterator[ExternStmt]:
    """``s`` and every statement inside it, parents first."""
    yield s
    if isinstance(s, Loop):
        yield from statements(s.body)
    elif isinstance(s, Branch):
        yield from statements(s.then)
        if s.otherwise is not None:
            yield from statements(s.otherwise)
    elif isinstance(s, Block):
        for x in s.stmts:
            yield from statements(x)


def stmt_exprs(s: ExternStmt) -> list[Expr]:
    """Every expression in ``s`` and its sub-statements."""
    out: list[Expr] = []
    for x in statements(s):
        if isinstance(x, Evaluate):
            out.append(x.value)
        elif isinstance(x, BufferStore):
            out += [x.index, x.value]
        elif isinstance(x, Loop):
            out += [as_expr(x.begin), as_expr(x.extent)]
        elif isinstance(x, Branch):
            out.append(x.cond)
    return out


def expr_code(exprs: Iterable[Expr]) -> CCode:
    """The C the calls in ``exprs`` need, naming the functions they call."""
    calls = [n for e in exprs for n in walk(e) if isinstance(n, ExternCall)]
    return NO_CODE.merge(*(c.code for c in calls)).with_symbols(*(c.name for c in calls))


def stmt_code(s: ExternStmt) -> CCode:
    """The C the calls in extern body ``s`` need."""
    return expr_code(stmt_exprs(s))


def op_code(op: Operation) -> CCode:
    """The C that computing ``op`` needs (its extern code, or its calls')."""
    if isinstance(op, ExternOp):
        return op.code
    if isinstance(op, ComputeOp):
        if op._calls_code is None:  # the bodies never change: found once per operation
            op._calls_code = expr_code(op.bodies)
        code: CCode = op._calls_code
        return code
    return NO_CODE


def call_intrin(dtype: str, func_name: str, *args: Any) -> Expr:
    """A math intrinsic autosched knows (``exp``, ``log``, ``sqrt``, ``tanh``, ... also spelled
    ``tir.exp``) at ``dtype``; other names are an error saying to use ``call_pure_extern``."""
    short = func_name.split(".")[-1] if isinstance(func_name, str) else func_name
    if short not in MATH_FUNCS:
        raise ValueError(
            f"call_intrin {func_name!r}: known intrinsics are {', '.join(MATH_FUNCS)}; for another C "
            f"function write call_pure_extern({dtype!r}, 'c_name', ...)"
        )
    return Call(str(short), tuple(as_expr(a, dtype) for a in args), dtype)


def _cblas_matmul(args: Sequence[Any]) -> ExternCall:
    """``tvm.contrib.cblas.matmul(A, B, C, transa=False, transb=False)`` as ``cblas_sgemm``."""
    if len(args) not in (3, 4, 5) or not all(isinstance(b, DeclBuffer) for b in args[:3]):
        raise ValueError("call_packed('tvm.contrib.cblas.matmul', A, B, C[, transa, transb]) takes 3 buffers")
    a, b, c = args[:3]
    ta, tb = (bool(x) for x in (*args[3:], False, False)[:2])
    if not all(x.ndim == 2 for x in (a, b, c)) or len({a.dtype, b.dtype, c.dtype}) != 1:
        raise ValueError("tvm.contrib.cblas.matmul: A, B and C must be 2-d buffers of one dtype")
    m, k = (a.shape[1], a.shape[0]) if ta else a.shape
    kb, n = (b.shape[1], b.shape[0]) if tb else b.shape
    if not (_same_shape((k,), (kb,)) and _same_shape(c.shape, (m, n))):
        raise ValueError(
            f"tvm.contrib.cblas.matmul: shapes A{list(a.shape)}{'^T' if ta else ''} x "
            f"B{list(b.shape)}{'^T' if tb else ''} -> C{list(c.shape)} disagree"
        )
    if c.dtype not in ("float32", "float64"):
        raise ValueError(f"tvm.contrib.cblas.matmul: float32 or float64 buffers, got {c.dtype}")
    fn = "cblas_sgemm" if c.dtype == "float32" else "cblas_dgemm"
    one, zero = as_expr(1.0, c.dtype), as_expr(0.0, c.dtype)
    trans = [_CBLAS_TRANS if t else _CBLAS_NO_TRANS for t in (ta, tb)]
    call = call_extern(
        "void", fn, _CBLAS_ROW_MAJOR, *trans, m, n, k, one, a, a.shape[1], b, b.shape[1], zero, c, n
    )
    return ExternCall(call.name, call.args, call.type, False, CBLAS)


PACKED: dict[str, Callable[[Sequence[Any]], ExternCall]] = {"tvm.contrib.cblas.matmul": _cblas_matmul}


def call_packed(name: str, *args: Any) -> ExternCall:
    """TVM's call of a registered packed function, for the names that map to C (:data:`PACKED`);
    any other name is an error saying to call a C function with ``call_extern``."""
    fn = PACKED.get(name)
    if fn is None:
        raise ValueError(
            f"call_packed {name!r}: autosched has no packed-function registry; known names map to C "
            f"({', '.join(PACKED)}). Call your C function with call_extern('void', 'c_name', "
            "buf.data, ...) and give its source (c_source=) or library (libs=)"
        )
    return fn(args)
