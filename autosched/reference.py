"""A generic numpy evaluator of compute DAGs: the ground truth for any tensor expression.

Each compute stage is evaluated over its whole index space at once, as numpy arrays broadcast over an
index grid (one array dimension per spatial axis, then one per reduce axis), and reduced over the
trailing reduce dimensions. Stages are materialized one by one in topological order. To bound
memory, a stage is evaluated in chunks (boxes of its iteration space) of at most ``budget`` elements.

Reads whose indices are affine in the axes and stay in bounds become zero-copy strided views of the
producer; other reads are gathers with fancy indexing, their indices clipped into range. A read
that was out of range is remembered in a mask: where a ``Select`` (or a short-circuit ``&&``/``||``)
discards it, nothing happens; where it reaches a stored value, :func:`evaluate` raises
``IndexError`` naming the read and the index.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from .dtypes import dtype as _dtype
from .dtypes import numpy_dtype
from .expr import (
    BinOp,
    Call,
    Cast,
    Cmp,
    ComputeOp,
    Const,
    Expr,
    ExternOp,
    IterVar,
    Load,
    Logic,
    Not,
    PlaceholderOp,
    Reduce,
    ScanOp,
    Select,
    Tensor,
    Var,
    as_int,
    as_tensors,
    op_code,
    static_shape,
    to_str,
    topo_order,
)

DEFAULT_BUDGET = 1 << 22
"""Default largest number of elements of one chunk's intermediate arrays (4M: 16 MB of float32).

Larger chunks are no faster (numpy works best on arrays that fit the caches), only bigger."""

Value = tuple[np.ndarray, "np.ndarray | None"]  # (values, out-of-bounds mask or None)


def evaluate(
    outputs: Tensor | Sequence[Tensor],
    inputs: Mapping[str, ArrayLike] | Mapping[Tensor, ArrayLike],
    *,
    budget: int = DEFAULT_BUDGET,
) -> dict[str, np.ndarray]:
    """Compute ``outputs`` from the placeholder arrays ``inputs`` (keyed by tensor or by name).

    Returns the array of every output by name. Inputs are converted to their placeholder's dtype
    (a kind change such as float to int raises ``TypeError``); a missing, unknown or misshapen
    input raises ``ValueError``. ``budget`` bounds the size of one chunk's intermediate arrays.
    """
    outs = as_tensors(outputs)
    given = {(k.name if isinstance(k, Tensor) else str(k)): v for k, v in inputs.items()}
    ops = topo_order(outs)
    placeholders = [op for op in ops if isinstance(op, PlaceholderOp)]
    missing = [op.name for op in placeholders if op.name not in given]
    unknown = sorted(set(given) - {op.name for op in placeholders})
    if missing or unknown:
        raise ValueError(f"inputs do not match the DAG's placeholders: missing {missing}, unknown {unknown}")
    env: dict[str, np.ndarray] = {}
    with np.errstate(all="ignore"):
        for op in ops:
            if isinstance(op, PlaceholderOp):
                env[op.name] = _input_array(op, given[op.name])
            elif isinstance(op, (ScanOp, ExternOp)) or op.num_outputs != 1 or op_code(op).symbols:
                raise NotImplementedError(
                    f"the numpy reference does not evaluate {op.name!r} (a scan, a tuple compute or C "
                    "called by extern/call_extern); check such a workload against your own numpy code "
                    "(a workload's reference=)"
                )
            else:
                env[op.name] = _evaluate_stage(op, env, max(1, int(budget)))
    return {t.name: env[t.name] for t in outs}


def _input_array(op: PlaceholderOp, value: ArrayLike) -> np.ndarray:
    arr = np.asarray(value)
    want = numpy_dtype(op.dtype)
    if arr.shape != op.shape:
        raise ValueError(f"input {op.name!r}: expected shape {op.shape}, got {arr.shape}")
    if not np.can_cast(arr.dtype, want, casting="same_kind"):
        raise TypeError(f"input {op.name!r}: cannot convert {arr.dtype} to {op.dtype}")
    return arr.astype(want, copy=False)


# ---------------------------------------------------------------------------- chunking


def _boxes(extents: Sequence[int], budget: int) -> Iterator[tuple[tuple[int, int], ...]]:
    """Boxes ``((lo, hi), ...)`` covering ``extents`` in order, each of at most ~``budget`` elements.

    The split dimension is the first one whose trailing dimensions fit in the budget; the dimensions
    before it are taken one index at a time (one index of them alone exceeds the budget).
    """
    n = len(extents)
    if n == 0:
        yield ()
        return
    tails = [math.prod(extents[d + 1 :]) for d in range(n)]
    split = next(d for d in range(n) if tails[d] <= budget)
    step = max(1, min(extents[split], budget // tails[split]))
    rest = tuple((0, e) for e in extents[split + 1 :])
    for prefix in np.ndindex(*extents[:split]):
        head = tuple((p, p + 1) for p in prefix)
        for lo in range(0, extents[split], step):
            yield head + ((lo, min(lo + step, extents[split])),) + rest


def _reducer(combiner: str, dt: np.dtype) -> tuple[np.ufunc, object, np.dtype]:
    """(ufunc, identity, accumulator dtype) of a combiner for values of ``dt``; sums go to 64 bits."""
    if combiner == "sum":
        return np.add, 0, np.dtype(np.float64 if dt.kind == "f" else np.int64)
    if combiner == "max":
        low = -np.inf if dt.kind == "f" else (False if dt.kind == "b" else np.iinfo(dt).min)
        return np.maximum, low, dt
    if combiner == "min":
        high = np.inf if dt.kind == "f" else (True if dt.kind == "b" else np.iinfo(dt).max)
        return np.minimum, high, dt
    raise ValueError(f"unknown reduction combiner {combiner!r}")


def _evaluate_stage(op: ComputeOp, env: dict[str, np.ndarray], budget: int) -> np.ndarray:
    shape = static_shape(op.shape, f"the reference of {op.name}: shape")
    out = np.empty(shape, dtype=numpy_dtype(op.dtype))
    body = op.body
    if not isinstance(body, Reduce):
        for box in _boxes(shape, budget):
            chunk = _Chunk(env, op.axis, box)
            value, bad = chunk.eval(body)
            chunk.check(op, bad)
            out[tuple(slice(lo, hi) for lo, hi in box)] = np.broadcast_to(value, chunk.shape)
        return out
    rext = tuple(as_int(iv.extent) for iv in body.axis)
    rsize = math.prod(rext)
    if not isinstance(body.combiner, str):
        raise NotImplementedError(f"the numpy reference does not evaluate the comm_reducer of {op.name!r}")
    ufunc, identity, acc_dtype = _reducer(body.combiner, numpy_dtype(body.dtype))
    for sbox in _boxes(shape, max(1, budget // rsize)):
        acc: np.ndarray | None = None
        for rbox in _boxes(rext, budget):
            chunk = _Chunk(env, op.axis + body.axis, sbox + rbox)
            value, bad = chunk.eval(body.source)
            value = np.broadcast_to(value, chunk.shape)
            if body.where is not None:
                mask, mask_bad = chunk.eval(body.where)
                value = np.where(mask, value, np.asarray(identity, dtype=value.dtype))
                bad = _or(mask_bad, None if bad is None else bad & mask)
            chunk.check(op, bad)
            part = ufunc.reduce(value, axis=tuple(range(len(sbox), len(chunk.shape))), dtype=acc_dtype)
            acc = part if acc is None else ufunc(acc, part)
        out[tuple(slice(lo, hi) for lo, hi in sbox)] = acc
    return out


# ---------------------------------------------------------------------------- expression evaluation


def _or(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    return a if b is None else a | b


def _affine(e: Expr) -> tuple[dict[str, int], int] | None:
    """``e`` as ``({var: coefficient}, constant)`` when it is affine in its variables, else None."""
    if isinstance(e, Var):
        return {e.name: 1}, 0
    if isinstance(e, Const):
        return ({}, int(e.value)) if isinstance(e.value, int) and not isinstance(e.value, bool) else None
    if isinstance(e, Cast) and not _dtype(e.type).is_float and not _dtype(e.value.dtype).is_float:
        return _affine(e.value) if e.type != "bool" else None
    if not isinstance(e, BinOp) or e.op not in ("add", "sub", "mul"):
        return None
    a, b = _affine(e.a), _affine(e.b)
    if a is None or b is None:
        return None
    if e.op == "mul":
        if a[0] and b[0]:
            return None
        (coefs, c), k = (a, b[1]) if not b[0] else (b, a[1])
        return {v: k * x for v, x in coefs.items()}, c * k
    sign = 1 if e.op == "add" else -1
    coefs = dict(a[0])
    for v, x in b[0].items():
        coefs[v] = coefs.get(v, 0) + sign * x
    return coefs, a[1] + sign * b[1]


_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "floordiv": np.floor_divide,
    "floormod": np.remainder,
    "min": np.minimum,
    "max": np.maximum,
}
_COMPARE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
}


def _erf(x: np.ndarray) -> np.ndarray:
    try:
        special = importlib.import_module("scipy.special")
    except ImportError:
        return np.vectorize(math.erf, otypes=[np.float64])(x)
    return special.erf(x)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    one = x.dtype.type(1)
    return one / (one + np.exp(-x))


_MATH: dict[str, Callable[..., np.ndarray]] = {
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
    "abs": np.abs,
    "pow": np.power,
    "erf": _erf,
    "floor": np.floor,
    "ceil": np.ceil,
}


class _Chunk:
    """Evaluates expressions over one box of a stage's iteration space."""

    def __init__(self, env: dict[str, np.ndarray], axes: Sequence[IterVar], box: Sequence[tuple[int, int]]):
        self.env = env
        self.axes = tuple(axes)
        self.box = tuple(box)
        self.shape = tuple(hi - lo for lo, hi in box)
        self.suspects: set[str] = set()
        ndim = len(self.shape)
        self.grid: dict[str, np.ndarray] = {}
        self.pos: dict[str, int] = {}
        for d, (iv, (lo, hi)) in enumerate(zip(self.axes, self.box, strict=True)):
            shape = [1] * ndim
            shape[d] = hi - lo
            self.grid[iv.name] = np.arange(iv.begin + lo, iv.begin + hi, dtype=np.int32).reshape(shape)
            self.pos[iv.name] = d

    def check(self, op: ComputeOp, bad: np.ndarray | None) -> None:
        """Raise ``IndexError`` if an out-of-bounds read reached a value of ``op``."""
        if bad is None or not bad.any():
            return
        full = np.broadcast_to(bad, self.shape)
        where = np.unravel_index(int(np.argmax(full)), self.shape)
        coords = zip(self.axes, self.box, where, strict=True)
        at = ", ".join(f"{iv.name}={iv.begin + lo + int(i)}" for iv, (lo, _), i in coords)
        reads = "; ".join(sorted(self.suspects))
        raise IndexError(f"stage {op.name!r}: out-of-bounds read ({reads}) at {at}")

    def eval(self, e: Expr) -> Value:
        """Values of ``e`` (broadcastable to the box) and the mask of out-of-bounds reads behind them."""
        value, bad = self._eval(e)
        return np.asarray(value, dtype=numpy_dtype(e.dtype)), bad

    def _eval(self, e: Expr) -> Value:
        if isinstance(e, Const):
            return np.asarray(e.value), None
        if isinstance(e, Var):
            if e.name not in self.grid:
                raise ValueError(f"variable {e.name!r} is not an axis of this stage")
            return self.grid[e.name], None
        if isinstance(e, BinOp):
            (a, ba), (b, bb) = self.eval(e.a), self.eval(e.b)
            return _BINARY[e.op](a, b), _or(ba, bb)
        if isinstance(e, Cmp):
            (a, ba), (b, bb) = self.eval(e.a), self.eval(e.b)
            return _COMPARE[e.op](a, b), _or(ba, bb)
        if isinstance(e, Logic):
            return self._logic(e)
        if isinstance(e, Not):
            a, ba = self.eval(e.a)
            return np.logical_not(a), ba
        if isinstance(e, Select):
            return self._select(e)
        if isinstance(e, Cast):
            return self.eval(e.value)
        if isinstance(e, Call):
            if e.name not in _MATH:
                raise ValueError(f"unknown math function {e.name!r}")
            args = [self.eval(a) for a in e.args]
            bad: np.ndarray | None = None
            for _, arg_bad in args:
                bad = _or(bad, arg_bad)
            return _MATH[e.name](*(a for a, _ in args)), bad
        if isinstance(e, Load):
            return self._load(e)
        if isinstance(e, Reduce):
            raise ValueError(f"a reduction may only be the whole body of a stage: {to_str(e)}")
        raise TypeError(f"cannot evaluate {type(e).__name__}: {e!r}")

    def _logic(self, e: Logic) -> Value:
        (a, ba), (b, bb) = self.eval(e.a), self.eval(e.b)
        a, b = a.astype(bool, copy=False), b.astype(bool, copy=False)
        if e.op == "and":
            return a & b, _or(ba, None if bb is None else a & bb)  # b is only read where a holds
        return a | b, _or(ba, None if bb is None else ~a & bb)

    def _select(self, e: Select) -> Value:
        (c, bc), (t, bt), (f, bf) = self.eval(e.cond), self.eval(e.true_value), self.eval(e.false_value)
        c = c.astype(bool, copy=False)
        bad = bc
        if bt is not None or bf is not None:
            bad = _or(bad, np.where(c, False if bt is None else bt, False if bf is None else bf))
        return np.where(c, t, f), bad

    def _load(self, e: Load) -> Value:
        arr = self.env[e.tensor.name]
        view = self._strided_view(arr, e.indices)
        if view is not None:
            return view, None
        index: list[np.ndarray] = []
        bad: np.ndarray | None = None
        for extent, idx_expr in zip(arr.shape, e.indices, strict=True):
            idx, b = self.eval(idx_expr)
            bad = _or(bad, b)
            outside = (idx < 0) | (idx >= extent)
            if outside.any():
                self.suspects.add(to_str(e))
                bad = _or(bad, outside)
                idx = np.clip(idx, 0, extent - 1)
            index.append(idx)
        return arr[tuple(index)], bad

    def _strided_view(self, arr: np.ndarray, indices: Sequence[Expr]) -> np.ndarray | None:
        """``arr`` read at affine, in-bounds ``indices`` over the box, as a view (no copy), or None."""
        shape = [1] * len(self.shape)
        strides = [0] * len(self.shape)
        start: list[int] = []
        for extent, stride, idx_expr in zip(arr.shape, arr.strides, indices, strict=True):
            aff = _affine(idx_expr)
            if aff is None or any(v not in self.pos for v in aff[0]):
                return None
            coefs, first = aff
            low = high = first
            for v, k in coefs.items():
                d = self.pos[v]
                lo = self.axes[d].begin + self.box[d][0]
                first += k * lo
                span = k * (self.shape[d] - 1)
                low, high = low + k * lo + min(span, 0), high + k * lo + max(span, 0)
                shape[d] = self.shape[d]
                strides[d] += k * stride
            if low < 0 or high >= extent:
                return None
            start.append(first)
        base = arr[tuple(slice(s, None) for s in start)]
        return np.lib.stride_tricks.as_strided(base, shape=shape, strides=strides, writeable=False)
