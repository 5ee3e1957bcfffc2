"""The workload registry: operators registered by name, instantiated by (name, arguments).

A workload function builds a tensor DAG from scalar arguments and returns its tensors in call order,
inputs first and outputs last::

    @workload("my_stencil", reference=lambda x: x[:-2] + x[1:-1] + x[2:])
    def my_stencil(n: int) -> list[Tensor]:
        X = placeholder((n,), name="X")
        Y = compute((n - 2,), lambda i: X[i] + X[i + 1] + X[i + 2], name="Y")
        return [X, Y]

``get_workload("my_stencil", (100,))`` then gives a :class:`Workload`, a (name, args) value with
its tensors, key, FLOP count, reference and random inputs.
"""

from __future__ import annotations

import inspect
import numbers
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..dtypes import dtype as _dtype
from ..dtypes import numpy_dtype
from ..expr import (
    ComputeOp,
    PlaceholderOp,
    Tensor,
    dag_key,
    size_var,
    static_shape,
    topo_order,
    unique_names,
)
from ..flops import count_flops
from ..reference import evaluate

Arg = bool | int | float | str
"""A workload argument: a JSON scalar."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


@dataclass(frozen=True, slots=True)
class WorkloadDef:
    """A registered workload function and what comes with it."""

    name: str
    func: Callable[..., Sequence[Tensor]]
    num_outputs: int
    reference: Callable[..., Any] | None
    flops: Callable[..., int] | None

    @property
    def signature(self) -> str:
        """The parameters as text, with types and defaults: ``(M: int, dtype: str = 'float32')``."""
        hints = _hints(self.func)
        parts = []
        for p in inspect.signature(self.func).parameters.values():
            text = p.name
            if p.name in hints:
                text += f": {getattr(hints[p.name], '__name__', str(hints[p.name]))}"
            if p.default is not p.empty:
                text += f" = {p.default!r}"
            parts.append(text)
        return f"({', '.join(parts)})"

    @property
    def doc(self) -> str:
        """The first line of the function's docstring."""
        return (inspect.getdoc(self.func) or "").split("\n", 1)[0]


@dataclass(frozen=True, slots=True)
class WorkloadInfo:
    """One line of :func:`list_workloads`: a name, its parameters and a one-line description."""

    name: str
    signature: str
    doc: str
    num_outputs: int


_REGISTRY: dict[str, WorkloadDef] = {}


def workload(
    name: str,
    *,
    num_outputs: int = 1,
    reference: Callable[..., Any] | None = None,
    flops: Callable[..., int] | None = None,
    override: bool = False,
) -> Callable[[Callable[..., Sequence[Tensor]]], Callable[..., Sequence[Tensor]]]:
    """Register a workload function under ``name``; the function is returned unchanged.

    The function takes JSON-scalar arguments (int, float, str, bool) and returns its tensors,
    inputs first, then its ``num_outputs`` outputs. ``reference(*input_arrays)`` is an independent
    numpy implementation returning the output array (or a tuple of them); its keyword-only
    parameters, if any, receive the workload arguments of the same name (``def ref(x, w, *, pad)``).
    ``flops(*args)`` counts the floating-point operations. Registering a taken name raises
    ``ValueError`` unless ``override``.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"workload name must look like an identifier (dots allowed), got {name!r}")
    if num_outputs < 1:
        raise ValueError(f"workload {name!r}: num_outputs must be at least 1, got {num_outputs}")

    def register(func: Callable[..., Sequence[Tensor]]) -> Callable[..., Sequence[Tensor]]:
        for p in inspect.signature(func).parameters.values():
            if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                raise TypeError(
                    f"workload {name!r}: parameter {p.name!r} must be positional, not {p.kind.description}"
                )
        if reference is not None:
            params = inspect.signature(func).parameters
            unknown = [k for k in _keyword_only(reference) if k not in params]
            if unknown:
                raise TypeError(
                    f"workload {name!r}: reference parameters {unknown} are not workload parameters"
                )
        if name in _REGISTRY and not override:
            raise ValueError(f"workload {name!r} is already registered; pass override=True to replace it")
        _REGISTRY[name] = WorkloadDef(name, func, num_outputs, reference, flops)
        return func

    return register


def _hints(func: Callable[..., Any]) -> dict[str, Any]:
    """The function's resolved annotations; none if some cannot be resolved (then no type checks)."""
    try:
        return typing.get_type_hints(func)
    except (NameError, TypeError):
        return {}


def _keyword_only(func: Callable[..., Any]) -> list[str]:
    return [p.name for p in inspect.signature(func).parameters.values() if p.kind == p.KEYWORD_ONLY]


def _definition(name: str) -> WorkloadDef:
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise ValueError(f"unknown workload {name!r}; known workloads: {known}") from None


def registered(name: str) -> WorkloadDef | None:
    """The definition registered under ``name``; None if there is none."""
    return _REGISTRY.get(name)


def _convert(value: Any, hint: Any) -> Arg:
    """``value`` as the JSON scalar its annotation asks for; raise ``TypeError`` if it is not one."""
    if isinstance(value, np.generic):
        value = value.item()
    if hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return int(value)
    elif hint is float:
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    elif isinstance(value, (bool, int, float, str)):
        return value
    wanted = getattr(hint, "__name__", None) or "bool, int, float or str"
    raise TypeError(f"must be {wanted}, got {type(value).__name__} {value!r}")


def _normalize(defn: WorkloadDef, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Arg, ...]:
    """All arguments in order, defaults filled in, each converted to its annotated type."""
    sig = inspect.signature(defn.func)
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as err:
        raise TypeError(f"workload {defn.name}{defn.signature}: {err}; got args {tuple(args)}") from None
    bound.apply_defaults()
    hints = _hints(defn.func)
    out = []
    for pname, value in bound.arguments.items():
        try:
            out.append(_convert(value, hints.get(pname)))
        except TypeError as err:
            raise TypeError(f"workload {defn.name}{defn.signature}: argument {pname!r} {err}") from None
    return tuple(out)


def _unique(items: tuple[Any, ...]) -> tuple[Any, ...]:
    """The workload's tensors over a DAG whose operations' names differ (``unique_names``, with
    the arguments in call order as the roots); anything else as given, for ``_check`` to refuse."""
    if not all(isinstance(t, Tensor) for t in items):
        return items
    renamed = unique_names(list(items))
    return tuple(renamed.tensor(t) for t in items)


@dataclass(frozen=True, slots=True)
class Workload:
    """A registered workload instantiated with arguments: the unit that is tuned and recorded.

    ``args`` are normalized on construction: every parameter in order, defaults filled in, so
    ``Workload("matmul", (64, 64, 64))`` equals ``Workload("matmul", (64, 64, 64, "float32", False))``.
    """

    name: str
    args: tuple[Arg, ...]
    _tensors: tuple[Tensor, ...] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", _normalize(_definition(self.name), tuple(self.args), {}))

    @property
    def definition(self) -> WorkloadDef:
        """The registered definition."""
        return _definition(self.name)

    def tensors(self) -> list[Tensor]:
        """The workload's tensors in call order (inputs, then outputs); built once, then cached."""
        tensors = self._tensors
        if tensors is None:
            defn = self.definition
            tensors = _unique(tuple(defn.func(*self.args)))
            self._check(tensors, defn.num_outputs)
            object.__setattr__(self, "_tensors", tensors)
        return list(tensors)

    def symbolic_tensors(self) -> tuple[list[Tensor], dict[str, int]]:
        """The workload's tensors with every int argument replaced by a shape variable of the
        parameter's name (``asc.size_var``), and the values this workload gives those variables.

        This is how a schedule tuned for one size serves every size: a user workload
        ``my_mm(M, N, K)`` tuned as ``Task("my_mm", (1024, 1024, 1024))`` has steps that replay on
        ``my_mm(size_var("M"), size_var("N"), size_var("K"))``. Raises ValueError when the
        workload's function cannot take symbolic sizes (it computes with them in Python).
        """
        params = list(inspect.signature(self.definition.func).parameters)
        values = {p: a for p, a in zip(params, self.args, strict=True) if type(a) is int}
        args = [size_var(p) if p in values else a for p, a in zip(params, self.args, strict=True)]
        try:
            tensors = _unique(tuple(self.definition.func(*args)))
        except (TypeError, ValueError) as e:
            raise ValueError(f"workload {self} cannot take symbolic sizes {sorted(values)}: {e}") from None
        self._check(tensors, self.definition.num_outputs)
        return list(tensors), values

    def _check(self, tensors: tuple[Tensor, ...], num_outputs: int) -> None:
        where = f"workload {self}"
        if not all(isinstance(t, Tensor) for t in tensors):
            kinds = [type(t).__name__ for t in tensors]
            hint = " (scalar arguments are for asc.build/lower/emit; a workload makes them constants)"
            raise TypeError(f"{where} must return a list of tensors, got {kinds}" + hint * ("Var" in kinds))
        if len(tensors) < num_outputs:
            raise ValueError(f"{where} returned {len(tensors)} tensors but declares {num_outputs} outputs")
        inputs, outputs = tensors[: len(tensors) - num_outputs], tensors[len(tensors) - num_outputs :]
        if not all(isinstance(t.op, PlaceholderOp) for t in inputs):
            raise ValueError(f"{where}: the inputs {[t.name for t in inputs]} must all be placeholders")
        if not all(isinstance(t.op, ComputeOp) for t in outputs):
            raise ValueError(f"{where}: the outputs {[t.name for t in outputs]} must all be computed")
        used = {op.name for op in topo_order(outputs) if isinstance(op, PlaceholderOp)}
        unlisted = sorted(used - {t.name for t in inputs})
        if unlisted:
            raise ValueError(f"{where}: placeholders {unlisted} are read but not returned as inputs")

    @property
    def inputs(self) -> list[Tensor]:
        """The input tensors (placeholders), in call order."""
        tensors = self.tensors()
        return tensors[: len(tensors) - self.definition.num_outputs]

    @property
    def outputs(self) -> list[Tensor]:
        """The output tensors, in call order."""
        tensors = self.tensors()
        return tensors[len(tensors) - self.definition.num_outputs :]

    @property
    def key(self) -> str:
        """``name(args)#dag_hash``: stable across runs, distinct for distinct arguments or DAGs."""
        return f"{self}#{dag_key(self.outputs)}"

    def __str__(self) -> str:
        return f"{self.name}({','.join(repr(a) for a in self.args)})"

    def flops(self) -> int:
        """Floating-point operations: the registered count, else the generic counter's."""
        counter = self.definition.flops
        return int(counter(*self.args)) if counter is not None else count_flops(self.outputs)

    def evaluate(self, *arrays: np.ndarray) -> list[np.ndarray]:
        """The outputs computed by the generic evaluator from the input arrays (in call order)."""
        inputs = self.inputs
        if len(arrays) != len(inputs):
            raise TypeError(f"workload {self} takes {len(inputs)} input arrays, got {len(arrays)}")
        results = evaluate(self.outputs, {t.name: a for t, a in zip(inputs, arrays, strict=True)})
        return [results[t.name] for t in self.outputs]

    def reference(self, *arrays: np.ndarray) -> list[np.ndarray]:
        """The outputs from the registered numpy reference, else from :meth:`evaluate`.

        The arrays are converted to the inputs' dtypes, and each output to its tensor's dtype.
        """
        ref = self.definition.reference
        if ref is None:
            return self.evaluate(*arrays)
        inputs = self.inputs
        if len(arrays) != len(inputs):
            raise TypeError(f"workload {self} takes {len(inputs)} input arrays, got {len(arrays)}")
        named = dict(zip(inspect.signature(self.definition.func).parameters, self.args, strict=True))
        params = {k: named[k] for k in _keyword_only(ref)}
        typed = [np.asarray(a, dtype=numpy_dtype(t.dtype)) for t, a in zip(inputs, arrays, strict=True)]
        result = ref(*typed, **params)
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        outs = self.outputs
        if len(results) != len(outs):
            raise ValueError(f"reference of {self} returned {len(results)} arrays for {len(outs)} outputs")
        converted = []
        for t, r in zip(outs, results, strict=True):
            arr = np.asarray(r)
            if arr.shape != t.shape:
                raise ValueError(
                    f"reference of {self}: output {t.name!r} has shape {arr.shape}, expected {t.shape}"
                )
            converted.append(arr.astype(numpy_dtype(t.dtype), copy=False))
        return converted

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Random input arrays: floats uniform in [-1, 1), integers in [-4, 4] ([0, 8] unsigned),
        booleans fair."""
        rng = np.random.default_rng(seed)
        arrays = []
        for t in self.inputs:
            kind = _dtype(t.dtype)
            arr: np.ndarray
            if t.dtype == "bool":
                arr = rng.random(static_shape(t.shape)) < 0.5
            elif kind.is_float:
                arr = rng.uniform(-1.0, 1.0, static_shape(t.shape))
            else:
                low = 0 if t.dtype.startswith("uint") else -4
                arr = rng.integers(low, low + 9, static_shape(t.shape))
            arrays.append(np.asarray(arr).astype(numpy_dtype(t.dtype)))
        return arrays

    def to_json(self) -> list[Any]:
        """``[name, [args...]]``, JSON-compatible."""
        return [self.name, list(self.args)]

    @classmethod
    def from_json(cls, data: Sequence[Any]) -> Workload:
        """The workload that :meth:`to_json` described."""
        if not isinstance(data, (list, tuple)) or len(data) != 2 or not isinstance(data[1], (list, tuple)):
            raise ValueError(f"a workload in JSON is [name, [args...]], got {data!r}")
        return cls(str(data[0]), tuple(data[1]))


def get_workload(name: str, args: Sequence[Any] = (), **kwargs: Any) -> Workload:
    """The workload ``name`` with ``args`` (and keyword arguments), checked against its signature."""
    defn = _definition(name)
    return Workload(name, _normalize(defn, tuple(args), kwargs))


def list_workloads() -> list[WorkloadInfo]:
    """Every registered workload with its parameters and one-line description, sorted by name."""
    return [WorkloadInfo(d.name, d.signature, d.doc, d.num_outputs) for _, d in sorted(_REGISTRY.items())]
