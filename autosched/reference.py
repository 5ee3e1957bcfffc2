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

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from .dtypes import numpy_dtype
from .expr import (
    BinOp,
    Call,
    Cast,
    Cmp,
    CommReducer,
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
from .reference_ops import BINARY, COMPARE, MATH, affine, builtin_reducer, or_mask

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
            elif isinstance(op, ExternOp) or op_code(op).symbols:
                raise NotImplementedError(
                    f"the numpy reference does not evaluate {op.name!r} (C called by extern/call_extern); "
                    "check such a workload against your own numpy code (a workload's reference=)"
                )
            elif isinstance(op, ScanOp):
                _evaluate_scan(op, env, max(1, int(budget)))
            else:
                arrays = _evaluate_stage(op, env, max(1, int(budget)))
                env.update({op.output(c).name: a for c, a in enumerate(arrays)})
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


def _evaluate_stage(op: ComputeOp, env: dict[str, np.ndarray], budget: int) -> list[np.ndarray]:
    """The arrays of every output of compute ``op`` (one, or several for a tuple compute)."""
    shape = static_shape(op.shape, f"the reference of {op.name}: shape")
    outs = [np.empty(shape, dtype=numpy_dtype(b.dtype)) for b in op.bodies]
    body = op.body
    if not isinstance(body, Reduce):
        for box in _boxes(shape, budget):
            _fill(op, _Chunk(env, op.axis, box), outs)
        return outs
    rext = tuple(as_int(iv.extent) for iv in body.axis)
    rsize = math.prod(rext)
    for sbox in _boxes(shape, max(1, budget // rsize)):
        chunks = (_Chunk(env, op.axis + body.axis, sbox + rbox) for rbox in _boxes(rext, budget))
        if isinstance(body.combiner, str):
            accs = [_builtin_reduce(op, body, chunks)]
        else:
            accs = _comm_reduce(op, body, tuple(hi - lo for lo, hi in sbox), chunks)
        for out, acc in zip(outs, accs, strict=True):
            out[tuple(slice(lo, hi) for lo, hi in sbox)] = acc
    return outs


def _fill(op: ComputeOp, chunk: _Chunk, outs: Sequence[np.ndarray]) -> None:
    """Store every body of ``op`` over ``chunk``'s box into ``outs``."""
    for out, body in zip(outs, op.bodies, strict=True):
        _store(op, body, chunk, out)


def _store(op: ComputeOp, body: Expr, chunk: _Chunk, out: np.ndarray) -> None:
    """Store ``body`` (an expression of ``op``) over ``chunk``'s box into ``out``."""
    value, bad = chunk.eval(body)
    chunk.check(op, bad)
    out[tuple(slice(lo, hi) for lo, hi in chunk.box)] = np.broadcast_to(value, chunk.shape)


def _sources(
    op: ComputeOp, body: Reduce, chunk: _Chunk, identity: Sequence[object] | None
) -> tuple[list[np.ndarray], np.ndarray | None]:
    """Every source of ``body`` over ``chunk`` (the ``where`` mask applied with ``identity`` when
    given, else returned) after checking that no out-of-bounds read reaches a value."""
    values: list[np.ndarray] = []
    bad: np.ndarray | None = None
    for src in body.all_sources:
        value, b = chunk.eval(src)
        values.append(np.broadcast_to(value, chunk.shape))
        bad = or_mask(bad, b)
    mask: np.ndarray | None = None
    if body.where is not None:
        mask, mask_bad = chunk.eval(body.where)
        mask = np.broadcast_to(mask.astype(bool, copy=False), chunk.shape)
        bad = or_mask(mask_bad, None if bad is None else bad & mask)
        if identity is not None:
            pairs = zip(values, identity, strict=True)
            values = [np.where(mask, v, np.asarray(i, dtype=v.dtype)) for v, i in pairs]
    chunk.check(op, bad)
    return values, mask


def _builtin_reduce(op: ComputeOp, body: Reduce, chunks: Iterable[_Chunk]) -> np.ndarray:
    """``sum``/``max``/``min`` of ``body`` over the reduce ``chunks`` of one spatial box, with
    numpy's reductions."""
    assert isinstance(body.combiner, str)
    ufunc, identity, acc_dtype = builtin_reducer(body.combiner, numpy_dtype(body.dtype))
    acc: np.ndarray | None = None
    for chunk in chunks:
        (value,), _ = _sources(op, body, chunk, (identity,))
        part = ufunc.reduce(value, axis=tuple(range(len(op.axis), len(chunk.shape))), dtype=acc_dtype)
        acc = part if acc is None else ufunc(acc, part)
    assert acc is not None
    return acc


def _comm_reduce(
    op: ComputeOp, body: Reduce, sshape: tuple[int, ...], chunks: Iterable[_Chunk]
) -> list[np.ndarray]:
    """A ``comm_reducer`` over the reduce ``chunks`` of one spatial box of shape ``sshape``: its
    combine applied element after element in the loop order (reduce axes increasing, the first
    outermost), as the generated C does, so that ties in an argmax resolve the same way. Skipped
    elements (``where``) leave it unchanged."""
    reducer = body.combiner
    assert isinstance(reducer, CommReducer)
    scalar = _Chunk({}, (), ())
    accs = [np.full(sshape, scalar.eval(i)[0]) for i in reducer.identity]
    for chunk in chunks:
        values, mask = _sources(op, body, chunk, None)
        flat = [v.reshape(sshape + (-1,)) for v in values]
        keep = None if mask is None else mask.reshape(sshape + (-1,))
        for r in range(flat[0].shape[-1]):
            scalar.grid = {v.name: a for v, a in zip(reducer.lhs, accs, strict=True)}
            scalar.grid.update({v.name: f[..., r] for v, f in zip(reducer.rhs, flat, strict=True)})
            new = [np.broadcast_to(scalar.eval(e)[0], sshape) for e in reducer.result]
            if keep is not None:
                new = [np.where(keep[..., r], n, a) for n, a in zip(new, accs, strict=True)]
            accs = new
    return accs


def _evaluate_scan(op: ScanOp, env: dict[str, np.ndarray], budget: int) -> None:
    """Every output of scan ``op`` into ``env``: the init rows, then row after row its body (the
    updates write the outputs; the state placeholders read the outputs as they fill)."""
    outs = [
        np.zeros(static_shape(t.shape, f"the reference of {t.name}: shape"), numpy_dtype(t.dtype))
        for t in op.states
    ]
    local = dict(env)
    local.update({st.name: out for st, out in zip(op.states, outs, strict=True)})
    for init, out in zip(op.inits, outs, strict=True):
        assert isinstance(init.op, ComputeOp)
        for box in _boxes(out[: as_int(init.shape[0])].shape, budget):
            _store(init.op, init.op.bodies[init.value_index], _Chunk(local, init.op.axis, box), out)
    arrays = {u.op.name: [out] for u, out in zip(op.updates, outs, strict=True)}
    for part in op.body:
        if part.name not in arrays:
            shape = static_shape(part.shape, f"the reference of {part.name}: shape")
            arrays[part.name] = [np.zeros(shape, numpy_dtype(b.dtype)) for b in part.bodies]
            local.update({part.output(c).name: a for c, a in enumerate(arrays[part.name])})
    for t in range(as_int(op.inits[0].shape[0]), outs[0].shape[0]):
        for part in op.body:
            rest = static_shape(part.shape[1:], f"the reference of {part.name}: shape")
            for box in _boxes(rest, budget):
                _fill(part, _Chunk(local, part.axis, ((t, t + 1), *box)), arrays[part.name])
    env.update({op.output(c).name: out for c, out in enumerate(outs)})


# ---------------------------------------------------------------------------- expression evaluation


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
            return BINARY[e.op](a, b), or_mask(ba, bb)
        if isinstance(e, Cmp):
            (a, ba), (b, bb) = self.eval(e.a), self.eval(e.b)
            return COMPARE[e.op](a, b), or_mask(ba, bb)
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
            if e.name not in MATH:
                raise ValueError(f"unknown math function {e.name!r}")
            args = [self.eval(a) for a in e.args]
            bad: np.ndarray | None = None
            for _, arg_bad in args:
                bad = or_mask(bad, arg_bad)
            return MATH[e.name](*(a for a, _ in args)), bad
        if isinstance(e, Load):
            return self._load(e)
        if isinstance(e, Reduce):
            raise ValueError(f"a reduction may only be the whole body of a stage: {to_str(e)}")
        raise TypeError(f"cannot evaluate {type(e).__name__}: {e!r}")

    def _logic(self, e: Logic) -> Value:
        (a, ba), (b, bb) = self.eval(e.a), self.eval(e.b)
        a, b = a.astype(bool, copy=False), b.astype(bool, copy=False)
        if e.op == "and":
            return a & b, or_mask(ba, None if bb is None else a & bb)  # b is only read where a holds
        return a | b, or_mask(ba, None if bb is None else ~a & bb)

    def _select(self, e: Select) -> Value:
        (c, bc), (t, bt), (f, bf) = self.eval(e.cond), self.eval(e.true_value), self.eval(e.false_value)
        c = c.astype(bool, copy=False)
        bad = bc
        if bt is not None or bf is not None:
            bad = or_mask(bad, np.where(c, False if bt is None else bt, False if bf is None else bf))
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
            bad = or_mask(bad, b)
            outside = (idx < 0) | (idx >= extent)
            if outside.any():
                self.suspects.add(to_str(e))
                bad = or_mask(bad, outside)
                idx = np.clip(idx, 0, extent - 1)
            index.append(idx)
        return arr[tuple(index)], bad

    def _strided_view(self, arr: np.ndarray, indices: Sequence[Expr]) -> np.ndarray | None:
        """``arr`` read at affine, in-bounds ``indices`` over the box, as a view (no copy), or None."""
        shape = [1] * len(self.shape)
        strides = [0] * len(self.shape)
        start: list[int] = []
        for extent, stride, idx_expr in zip(arr.shape, arr.strides, indices, strict=True):
            aff = affine(idx_expr)
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
