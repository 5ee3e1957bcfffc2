"""Graph-builder methods of elementwise functions, reductions, slices and gathers.

``unary`` nodes hold their epilogue step (:mod:`.epilogue_fns`: ``clip:0.0:6.0``) as the
attribute ``step``, so that fusion appends them to a preceding operator like relu; relu, gelu and
sigmoid stay nodes of their own names.
"""

from __future__ import annotations

from collections.abc import Sequence

from .epilogue_fns import FUNCTIONS, spell
from .ir_core import INDEX_DTYPES, BuilderBase

#: the functions of :meth:`TensorBuilder.unary` that are graph operators of their own
_OWN_OPS = ("relu", "gelu", "sigmoid")
#: the functions of :meth:`TensorBuilder.unary` whose epilogue step has another name
_STEP_NAMES = {"pow": "pow_scalar"}
#: the reductions of :meth:`TensorBuilder.reduce`
REDUCE_KINDS = ("sum", "mean", "max", "min")


def _ints(values: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


class TensorBuilder(BuilderBase):
    """``unary``, ``maximum``/``minimum``/``pow``, ``reduce``, ``slice`` and ``gather``."""

    def unary(
        self, x: str, fn: str, *, alpha: float | None = None, beta: float | None = None,
        name: str | None = None,
    ) -> str:
        """An elementwise function of x: relu, sigmoid, gelu (erf form), tanh, erf, exp, log, sqrt,
        reciprocal, neg, abs, softplus, hard_swish, clip (alpha = min, beta = max; None: that side
        unbounded), leaky_relu (alpha, default 0.01), hard_sigmoid (max(0, min(1, alpha * x +
        beta)); defaults 0.2, 0.5), elu (alpha, default 1.0), celu (alpha, default 1.0), selu
        (alpha, beta = gamma; ONNX's defaults), thresholded_relu (alpha, default 1.0), mish,
        softsign, equal (1 where x == alpha, else 0), logical_not (1 where x == 0, else 0), round
        (to the nearest integer, ties to even), pow (x ** alpha, alpha required)."""
        shape = self.shape(x)
        step = _STEP_NAMES.get(fn, fn)
        params = () if fn in _OWN_OPS else FUNCTIONS[step].params if step in FUNCTIONS else None
        if params is None:
            known = ", ".join(sorted({*_OWN_OPS, *_STEP_NAMES, *FUNCTIONS} - set(_STEP_NAMES.values())))
            raise self._fail("unary", name, f"unknown function {fn!r}; known: {known}")
        given = (alpha, beta)
        named = list(zip(("alpha", "beta"), given, strict=True))
        extra = [p for p, v in named[len(params) :] if v is not None]
        if extra:
            raise self._fail("unary", name, f"{fn} takes no {' or '.join(extra)}")
        if fn in _OWN_OPS:
            return self._add(fn, (x,), shape, name)
        for (what, value), default, meaning in zip(named, FUNCTIONS[step].defaults, params, strict=False):
            if value is None and default is None:
                raise self._fail("unary", name, f"{fn} needs {what} (the {meaning})")
        try:
            text = spell(step, given[: len(params)])
        except ValueError as e:
            raise self._fail("unary", name, str(e)) from None
        return self._add("unary", (x,), shape, name, step=text)

    def quantize(
        self, x: str, scale: float, zero_point: float, low: float, high: float, *, name: str | None = None
    ) -> str:
        """ONNX QuantizeLinear per tensor: round_half_even(x / scale) + zero_point, clamped to
        [low, high] (the integer type's range), as whole numbers in the graph's float type."""
        try:
            text = spell("quantize", (scale, zero_point, low, high))
        except ValueError as e:
            raise self._fail("quantize", name, str(e)) from None
        if scale == 0.0:
            raise self._fail("quantize", name, "the scale must be a finite non-zero number, got 0.0")
        return self._add("unary", (x,), self.shape(x), name, step=text)

    def dequantize(self, x: str, scale: float, zero_point: float, *, name: str | None = None) -> str:
        """ONNX DequantizeLinear per tensor: (x - zero_point) * scale."""
        try:
            text = spell("dequantize", (scale, zero_point))
        except ValueError as e:
            raise self._fail("dequantize", name, str(e)) from None
        return self._add("unary", (x,), self.shape(x), name, step=text)

    def maximum(self, a: str, b: str, *, name: str | None = None) -> str:
        """max(a, b) elementwise, same shapes."""
        return self._binary("maximum", a, b, name)

    def minimum(self, a: str, b: str, *, name: str | None = None) -> str:
        """min(a, b) elementwise, same shapes."""
        return self._binary("minimum", a, b, name)

    def pow(self, a: str, b: str, *, name: str | None = None) -> str:
        """a ** b elementwise, same shapes."""
        return self._binary("pow", a, b, name)

    def reduce(
        self, x: str, kind: str, axes: Sequence[int], keepdims: bool = True, *, name: str | None = None
    ) -> str:
        """The sum, mean, max or min of x over ``axes`` (at least one); ``keepdims`` keeps them
        as axes of size 1."""
        shape = self.shape(x)
        if kind not in REDUCE_KINDS:
            raise self._fail("reduce", name, f"kind {kind!r} is not one of {', '.join(REDUCE_KINDS)}")
        if not axes or not all(-len(shape) <= a < len(shape) for a in axes):
            raise self._fail("reduce", name, f"axes {list(axes)} must be 1 to {len(shape)} axes of {shape}")
        picked = tuple(sorted({int(a) % len(shape) for a in axes}))
        if len(picked) != len(axes):
            raise self._fail("reduce", name, f"axes {list(axes)} name an axis twice")
        out = [1 if i in picked else d for i, d in enumerate(shape)]
        if not keepdims:
            out = [d for i, d in enumerate(out) if i not in picked]
        return self._add("reduce", (x,), tuple(out), name, kind=kind, axes=picked, keepdims=bool(keepdims))

    def index_to_float(self, x: str, *, name: str | None = None) -> str:
        """Integer input ``x`` in the graph's float type, for arithmetic on indices (RoBERTa's
        position ids from its token ids): exact while the values stay below 2^24 in float32."""
        if self.value_dtype(x) not in INDEX_DTYPES:
            raise self._fail("index_to_float", name, f"{x!r} is {self.value_dtype(x)}, not an integer input")
        return self._add("index_to_float", (x,), self.shape(x), name)

    def slice(
        self, x: str, starts: Sequence[int], ends: Sequence[int], steps: Sequence[int], *,
        name: str | None = None,
    ) -> str:
        """x[starts:ends:steps] on every axis (one start, end and step per axis, with
        0 <= start < end <= the axis' size and step >= 1)."""
        shape = self.shape(x)
        begin, end, step = _ints(starts), _ints(ends), _ints(steps)
        if not len(begin) == len(end) == len(step) == len(shape):
            raise self._fail("slice", name, f"starts, ends and steps must have {len(shape)} values each")
        for axis, (b, e, s, d) in enumerate(zip(begin, end, step, shape, strict=True)):
            if not 0 <= b < e <= d or s < 1:
                fit = (f"axis {axis} (size {d}): start {b}, end {e}, step {s} must be "
                       "0 <= start < end <= size, step >= 1")
                raise self._fail("slice", name, fit)
        out = tuple((e - b + s - 1) // s for b, e, s in zip(begin, end, step, strict=True))
        return self._add("slice", (x,), out, name, starts=begin, steps=step)

    def gather(self, data: str, indices: str, axis: int = 0, *, name: str | None = None) -> str:
        """data's slices along ``axis`` at ``indices`` (an int64/int32 input, or a computed value
        of whole numbers: :meth:`index_to_float`; negative ones count from the end): shape
        data.shape[:axis] + indices.shape + data.shape[axis + 1:]."""
        shape, ind = self.shape(data), self.shape(indices)
        computed = not self.is_constant(indices) and indices not in self._graph.inputs
        if self.value_dtype(indices) not in INDEX_DTYPES and not computed:
            kind = self.value_dtype(indices)
            raise self._fail("gather", name, f"indices {indices!r} are {kind}: they must be an int64 input "
                             "(or whole numbers computed from one)")
        if self.value_dtype(data) in INDEX_DTYPES:
            kind = self.value_dtype(data)
            raise self._fail("gather", name, f"data {data!r} must be of the graph's type, not {kind}")
        if not -len(shape) <= axis < len(shape):
            raise self._fail("gather", name, f"axis {axis} is out of range for {len(shape)} axes")
        axis %= len(shape)
        return self._add("gather", (data, indices), shape[:axis] + ind + shape[axis + 1 :], name, axis=axis)
