"""Tensors and operations: ``placeholder``, ``compute``, ``reduce_axis`` and the DAG they build.

Operations (``PlaceholderOp``, ``ComputeOp``) are compared by identity: a DAG is a graph of
operations, each named, and its structural key comes from :func:`autosched.te.dag.dag_key`.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..dtypes import dtype as _dtype
from .buffer import DeclBuffer
from .ccode import CCode
from .extent import check_extent, ext_sub, extent_vars, static
from .ir_builder import ExternStmt
from .nodes import Expr, ExprLike, Extent, IterVar, Load, Reduce, Var, as_expr
from .traverse import walk


class NoLoops:
    """What operations without loops to schedule (inputs, scans, extern stages) answer for
    ``op.axis`` and ``op.reduce_axis``, so that every stage's axes can be read."""

    __slots__ = ()

    @property
    def axis(self) -> tuple[IterVar, ...]:
        return ()

    @property
    def reduce_axis(self) -> tuple[IterVar, ...]:
        return ()


@dataclass(eq=False, slots=True)
class PlaceholderOp(NoLoops):
    """An input tensor of the DAG."""

    name: str
    shape: tuple[Extent, ...]
    dtype: str

    @property
    def input_tensors(self) -> tuple[Tensor, ...]:
        return ()

    @property
    def num_outputs(self) -> int:
        return 1

    def output(self, index: int = 0) -> Tensor:
        return Tensor(self)


@dataclass(eq=False, slots=True)
class ComputeOp:
    """A tensor defined elementwise by ``body`` over ``axis`` (and a top-level reduction).

    A tuple compute (a lambda that returns a tuple) has several outputs of the same shape, computed
    in one loop nest: ``body`` is output 0's expression, ``others`` those of outputs 1, 2, ...
    """

    name: str
    axis: tuple[IterVar, ...]
    body: Expr
    tag: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)
    others: tuple[Expr, ...] = ()
    #: the tensors the bodies load, found once (the bodies are never changed after construction)
    _inputs: tuple[Tensor, ...] | None = field(default=None, init=False, repr=False)
    #: the C its extern calls need (``te.extern.op_code`` fills it on first use)
    _calls_code: Any = field(default=None, init=False, repr=False)

    @property
    def bodies(self) -> tuple[Expr, ...]:
        """Every output's expression, in output order."""
        return (self.body, *self.others)

    @property
    def num_outputs(self) -> int:
        return 1 + len(self.others)

    @property
    def shape(self) -> tuple[Extent, ...]:
        return tuple(iv.extent for iv in self.axis)

    @property
    def dtype(self) -> str:
        return self.body.dtype

    @property
    def reduce_axis(self) -> tuple[IterVar, ...]:
        return self.body.axis if isinstance(self.body, Reduce) else ()

    @property
    def input_tensors(self) -> tuple[Tensor, ...]:
        if self._inputs is None:
            self._inputs = _loaded(self.bodies)
        return self._inputs

    def output(self, index: int = 0) -> Tensor:
        if not 0 <= index < self.num_outputs:
            raise IndexError(f"{self.name} has {self.num_outputs} outputs, asked for output {index}")
        return Tensor(self, index)


@dataclass(eq=False, slots=True)
class ScanOp(NoLoops):
    """A recurrence over the first axis (what ``scan`` builds), with one output per state: rows
    ``[0, k)`` of output ``c`` are ``inits[c]``; each later row ``t`` is ``updates[c]`` at ``t``,
    where the updates read the rows before ``t`` through the ``states`` placeholders. ``body`` holds
    the computes evaluated for each ``t`` in order: the updates and the stages between the states
    and them. Computed as a sequential loop over ``t``; its init and body stages are scheduled."""

    name: str
    inits: tuple[Tensor, ...]
    updates: tuple[Tensor, ...]
    states: tuple[Tensor, ...]
    body: tuple[ComputeOp, ...]
    inputs: tuple[Tensor, ...] = ()
    tag: str = ""

    @property
    def shape(self) -> tuple[Extent, ...]:
        return self.states[0].shape

    @property
    def dtype(self) -> str:
        return self.states[0].dtype

    @property
    def num_outputs(self) -> int:
        return len(self.states)

    @property
    def parts(self) -> tuple[ComputeOp, ...]:
        """The computes that run inside the scan: the inits, then the body."""
        inits = [t.op for t in self.inits if isinstance(t.op, ComputeOp)]
        return (*dict.fromkeys(inits), *self.body)

    @property
    def input_tensors(self) -> tuple[Tensor, ...]:
        inside = {id(op) for op in self.parts} | {id(t.op) for t in self.states}
        return tuple(t for t in _loaded(b for op in self.parts for b in op.bodies) if id(t.op) not in inside)

    def output(self, index: int = 0) -> Tensor:
        if not 0 <= index < self.num_outputs:
            raise IndexError(f"{self.name} has {self.num_outputs} outputs, asked for output {index}")
        return Tensor(self, index)


@dataclass(eq=False, slots=True)
class ExternOp(NoLoops):
    """A stage computed by C the user provides (what ``extern`` builds): ``body`` reads the
    ``inputs`` through ``in_buffers`` and writes the outputs through ``out_buffers``; ``code`` is
    the C it needs. It keeps its body as written: it has no axes to schedule."""

    name: str
    inputs: tuple[Tensor, ...]
    in_buffers: tuple[DeclBuffer, ...]
    out_buffers: tuple[DeclBuffer, ...]
    body: ExternStmt
    code: CCode
    tag: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[Extent, ...]:
        return self.out_buffers[0].shape

    @property
    def dtype(self) -> str:
        return self.out_buffers[0].dtype

    @property
    def num_outputs(self) -> int:
        return len(self.out_buffers)

    @property
    def input_tensors(self) -> tuple[Tensor, ...]:
        return self.inputs

    def output(self, index: int = 0) -> Tensor:
        if not 0 <= index < self.num_outputs:
            raise IndexError(f"{self.name} has {self.num_outputs} outputs, asked for output {index}")
        return Tensor(self, index)


def _loaded(bodies: Iterable[Expr]) -> tuple[Tensor, ...]:
    """The tensors the bodies load, in first-load order; told apart by identity, not by name (two
    operations of a DAG may share a name until a schedule renames them)."""
    seen: dict[tuple[int, int], Tensor] = {}
    for body in bodies:
        for node in walk(body):
            if isinstance(node, Load):
                seen.setdefault((id(node.tensor.op), node.tensor.value_index), node.tensor)
    return tuple(seen.values())


Operation = PlaceholderOp | ComputeOp | ScanOp | ExternOp


@dataclass(frozen=True, slots=True)
class Tensor:
    """An output of an operation; index it (``A[i, j]``) to read it in an expression.

    The outputs of a tuple compute ``T`` are named ``T.v0``, ``T.v1``, ... (as in TVM) and share
    their operation, so ``s[t0]`` and ``s[t1]`` are one stage.
    """

    op: Operation
    value_index: int = 0

    @property
    def name(self) -> str:
        if self.op.num_outputs == 1:
            return self.op.name
        return f"{self.op.name}.v{self.value_index}"

    @property
    def shape(self) -> tuple[Extent, ...]:
        if isinstance(self.op, ExternOp):
            return self.op.out_buffers[self.value_index].shape
        if isinstance(self.op, ScanOp):
            return self.op.states[self.value_index].shape
        return self.op.shape

    @property
    def dtype(self) -> str:
        if isinstance(self.op, ComputeOp):
            return self.op.bodies[self.value_index].dtype
        if isinstance(self.op, ExternOp):
            return self.op.out_buffers[self.value_index].dtype
        if isinstance(self.op, ScanOp):
            return self.op.states[self.value_index].dtype
        return self.op.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices: ExprLike | tuple[ExprLike, ...]) -> Load:
        idx = indices if isinstance(indices, tuple) else (indices,)
        if len(idx) != self.ndim:
            raise IndexError(f"tensor {self.name} has {self.ndim} dimensions, indexed with {len(idx)}")
        exprs = tuple(as_expr(i) for i in idx)
        for e in exprs:
            if _dtype(e.dtype).is_float:
                raise TypeError(f"index of {self.name} must be an integer, got {e.dtype}: {e}")
        return Load(self, exprs)

    def __hash__(self) -> int:
        return hash((id(self.op), self.value_index))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tensor) and other.op is self.op and other.value_index == self.value_index

    def __repr__(self) -> str:
        shape = ", ".join(str(d) for d in self.shape) + ("," if len(self.shape) == 1 else "")
        return f"Tensor({self.name}, shape=({shape}), dtype={self.dtype})"


# ---------------------------------------------------------------------------- constructors


def whole(value: Any, what: str) -> int:
    """``value`` as an int: ints as they are, and floats that are whole numbers (``N / bn`` with
    ``bn`` dividing ``N``, as TVM accepts); anything else is a ``ValueError`` naming ``what``."""
    if isinstance(value, bool):
        raise ValueError(f"{what}: expected an integer, got {value!r}")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(
                f"{what}: {value!r} is not a whole number; a float size such as N / bn must divide "
                "evenly (write N // bn to round down)"
            )
        return int(value)
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{what}: expected an integer, got {value!r}") from None


def _extent(value: Any, what: str) -> Extent:
    """A size or bound: an expression of shape variables as it is, anything else :func:`whole`."""
    return value if isinstance(value, Expr) else whole(value, what)


def reduce_axis(dom: Any, name: str = "k") -> IterVar:
    """A reduction axis over ``range(dom)`` or over ``[begin, end)`` when ``dom`` is a pair.

    ``dom`` may use shape variables (``reduce_axis(K)`` with ``K = asc.size_var("K")``); a pair
    needs a constant begin. Float bounds must be whole numbers.
    """
    what = f"reduce_axis {name!r}"
    if isinstance(dom, (tuple, list)):
        begin, end = (_extent(d, what) for d in dom)
        if static(begin) is None:
            raise ValueError(f"{what}: the range must begin at a constant, got {begin}")
        begin = int(static(begin) or 0)
    else:
        begin, end = 0, _extent(dom, what)
    if isinstance(end, Expr) and static(end) is None:
        extent = check_extent(ext_sub(end, begin) if begin else end, what)
        return IterVar(Var(name), extent, "reduce", begin)
    end_value = static(end) if not isinstance(end, int) else end
    if not isinstance(end_value, int):
        raise ValueError(f"{what}: bad range end {end!r}")
    if end_value <= begin:
        raise ValueError(f"{what}: empty range [{begin}, {end_value})")
    return IterVar(Var(name), end_value - begin, "reduce", begin)


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"tensor names must be non-empty strings, got {name!r}")
    return name


def _check_shape(shape: Iterable[Any] | Extent, name: str) -> tuple[Extent, ...]:
    raw = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if any(isinstance(s, (tuple, list)) for s in raw):
        raise ValueError(
            f"tensor {name!r}: shape {raw} nests shapes; all outputs of one compute share one shape "
            "(use one compute per shape)"
        )
    shp = tuple(_extent(s, f"tensor {name!r}: shape {raw}") for s in raw)
    floats = [s for s in shp if isinstance(s, Expr) and _dtype(s.dtype).is_float]
    if floats:
        raise ValueError(
            f"tensor {name!r}: shape entries must be positive ints or integer expressions, got "
            f"{floats[0].dtype} {floats[0]} (a float var is a scalar argument, not a size)"
        )
    try:
        return tuple(check_extent(s, f"tensor {name!r}") for s in shp)
    except ValueError:
        raise ValueError(
            f"tensor {name!r}: shape entries must be positive ints or integer expressions "
            f"of asc.var/asc.size_var, got {shp}"
        ) from None


def placeholder(shape: Iterable[Any] | Extent, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor; its shape may use shape variables (``asc.size_var``); a float shape entry
    must be a whole number."""
    name = _check_name(name)
    return Tensor(PlaceholderOp(name, _check_shape(shape, name), _dtype(dtype).name))


def compute(
    shape: Iterable[Any] | Extent,
    fcompute: Callable[..., Any],
    name: str = "compute",
    tag: str = "",
    attrs: dict[str, Any] | None = None,
) -> Any:
    """A tensor whose element at index ``(i, j, ...)`` is ``fcompute(i, j, ...)``.

    The index variables take the names of the lambda's parameters. A reduction (``sum``, ``max``,
    ``min`` or a ``comm_reducer`` over reduce axes) may only be the whole body. When ``fcompute``
    returns a tuple, the result is a list of tensors (``name.v0``, ``name.v1``, ...) of one
    operation: the tuple holds plain expressions, or the outputs of one tuple reducer call.
    """
    name = _check_name(name)
    shp = _check_shape(shape, name)
    params = list(inspect.signature(fcompute).parameters.values())
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        names = [f"i{n}" for n in range(len(shp))]
    else:
        names = [p.name for p in params]
    if len(names) != len(shp):
        raise ValueError(
            f"compute {name!r}: shape has {len(shp)} dims but fcompute takes {len(names)} indices"
        )
    axis = tuple(IterVar(Var(n), s, "data") for n, s in zip(names, shp, strict=True))
    result = fcompute(*(iv.var for iv in axis))
    is_tuple = isinstance(result, (tuple, list))
    bodies = tuple(as_expr(x) for x in result) if is_tuple else (as_expr(result),)
    if not bodies:
        raise ValueError(f"compute {name!r}: fcompute returned an empty tuple")
    _check_tuple(name, bodies)
    body = bodies[0]
    for b in bodies:
        for node in walk(b):
            if isinstance(node, Reduce) and node is not b:
                raise ValueError(
                    f"compute {name!r}: a reduction must be the whole body; put it in its own stage"
                )
    reduce_names = [iv.name for iv in body.axis] if isinstance(body, Reduce) else []
    all_names = names + reduce_names
    if len(set(all_names)) != len(all_names):
        raise ValueError(f"compute {name!r}: axis names must be distinct, got {all_names}")
    shape_vars = {v.name for v in extent_vars(list(shp))}
    for b in bodies:
        for node in walk(b):
            if isinstance(node, Load):
                shape_vars |= {v.name for v in extent_vars(list(node.tensor.shape))}
    if isinstance(body, Reduce):
        shape_vars |= {v.name for v in extent_vars([iv.extent for iv in body.axis])}
    clash = sorted(shape_vars & set(all_names))
    if clash:
        raise ValueError(f"compute {name!r}: axis names {clash} are also shape variables; rename the axes")
    # other free vars are scalar arguments: lowering checks that the kernel's arguments list them
    op = ComputeOp(name, axis, body, tag, dict(attrs or {}), bodies[1:])
    if is_tuple:
        return [op.output(i) for i in range(op.num_outputs)]
    return op.output(0)


def _check_tuple(name: str, bodies: tuple[Expr, ...]) -> None:
    """The outputs of a tuple compute are plain expressions, or together one tuple reduction."""
    first = bodies[0]
    if not any(isinstance(b, Reduce) for b in bodies):
        return
    if len(bodies) == 1 and isinstance(first, Reduce) and not first.sources:
        return

    def key(b: Expr) -> tuple[Any, ...]:
        return (b.combiner, b.axis, b.where, b.sources) if isinstance(b, Reduce) else ()

    same = isinstance(first, Reduce) and len(first.sources) == len(bodies)
    for i, b in enumerate(bodies):
        same = same and isinstance(b, Reduce) and key(b) == key(first) and b.value_index == i
    if not same:
        raise ValueError(
            f"compute {name!r}: a tuple of outputs holds either plain expressions or all the outputs, "
            "in order, of one tuple reducer call (reducer((a, b), axis=k)); put other reductions in "
            "their own computes"
        )
