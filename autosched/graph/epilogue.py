"""Elementwise epilogues: the injective stages that fusion appends to an operator's output.

An epilogue is a comma-separated string of steps applied in order to a tensor ``y`` whose channel
axis is ``axis``: ``bias`` (``y + b[channel]``, one new input of shape (channels,)), ``scale``
(``y * s[channel]``, the same), ``add`` (``y + r``, a residual input of y's shape), ``mul``,
``sub``, ``div``, ``maximum``, ``minimum`` and ``pow`` (``y * r``, ``y - r``, ``y / r``,
``max(y, r)``, ``min(y, r)``, ``y ** r``, the same), ``relu``, ``gelu`` (the erf form),
``sigmoid``, and the functions of :mod:`.epilogue_fns`, parameters after colons (``clip:0.0:6.0``).
``"bias,add,relu"`` is a ResNet block's tail. The te builder and the numpy reference of a step are
written independently: the reference never reads the te DAG.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import expr as te
from ..expr import Expr, Tensor
from ..schedule import Schedule, create_schedule
from ..target import Target
from .epilogue_fns import FUNCTIONS, split

#: the steps an epilogue may hold, and whether each one reads an extra input
STEPS: dict[str, bool] = {
    "bias": True, "scale": True, "add": True, "mul": True, "sub": True, "div": True,
    "maximum": True, "minimum": True, "pow": True, "relu": False, "gelu": False, "sigmoid": False,
}
#: the steps reading one value per channel: (their input's name, their stage's name)
_PER_CHANNEL = {"bias": ("bias", "bias_add"), "scale": ("scale", "scale_mul")}
#: the steps reading a tensor of the output's shape: (their input's name, their stage's name)
_FULL = {"add": ("residual", "residual_add"), "mul": ("operand", "mul"), "sub": ("operand", "sub"),
         "div": ("operand", "div"), "maximum": ("operand", "maximum"), "minimum": ("operand", "minimum"),
         "pow": ("operand", "pow")}
_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "bias": operator.add, "scale": operator.mul, "add": operator.add, "mul": operator.mul,
    "sub": operator.sub, "div": operator.truediv, "maximum": te.max, "minimum": te.min, "pow": te.pow,
}
#: the same steps in numpy, for the reference
_NUMPY = {"bias": np.add, "scale": np.multiply, "add": np.add, "mul": np.multiply, "sub": np.subtract,
          "div": np.divide, "maximum": np.maximum, "minimum": np.minimum, "pow": np.power}

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_STAGE_PREFIXES = (
    *(v[1] for v in (*_PER_CHANNEL.values(), *_FULL.values())), *(s for s in STEPS if not STEPS[s]),
    *FUNCTIONS,
)


def parse(epilogue: str) -> list[str]:
    """The steps of ``epilogue`` (``""`` is none); raise ``ValueError`` naming an unknown step."""
    steps = [s for s in epilogue.split(",") if s] if epilogue else []
    for s in steps:
        if s not in STEPS and split(s) is None:
            raise ValueError(f"epilogue step {s!r} is not one of {', '.join([*STEPS, *FUNCTIONS])}")
    return steps


def extra_inputs(epilogue: str) -> int:
    """How many input arrays the epilogue reads (one per ``bias``, ``add``, ``mul``... step)."""
    return sum(STEPS.get(s, False) for s in parse(epilogue))


def _unary(step: str, x: Expr, dtype: str) -> Expr:
    fn = split(step)
    if fn is not None:
        return FUNCTIONS[fn[0]].build(x, dtype, fn[1])
    if step == "relu":
        return te.max(x, te.const(0, dtype))
    if step == "sigmoid":
        return te.sigmoid(x)
    half = te.const(0.5, dtype)
    return half * x * (te.const(1.0, dtype) + te.erf(x * te.const(_SQRT_HALF, dtype)))


def build(y: Tensor, epilogue: str, axis: int, block: int = 0) -> tuple[list[Tensor], Tensor]:
    """The epilogue's stages after ``y``: (its new input placeholders in order, the final tensor).

    Stages are named ``bias_add``, ``residual_add`` and after the unary step (``relu``, ...);
    inputs ``bias``/``residual`` (numbered from the second one on). ``block`` > 0: ``y`` holds
    its channels in blocks (N, C/block, ..., block), channel ``c`` at ``[c // block, ..., c %
    block]``; a per-channel input still has one value per channel, and a full one ``y``'s shape.
    """
    inputs: list[Tensor] = []
    out = y
    shape, dtype = tuple(y.shape), y.dtype
    channels = shape[1] * block if block else shape[axis]

    def channel(ix: tuple[Expr, ...]) -> Expr:
        return ix[1] * block + ix[-1] if block else ix[axis]

    for i, step in enumerate(parse(epilogue)):
        prev = out
        suffix = "" if not inputs else str(len(inputs))
        if step in _PER_CHANNEL:
            label, stage = _PER_CHANNEL[step]
            b = te.placeholder((channels,), dtype, name=f"{label}{suffix}")
            inputs.append(b)
            out = te.compute(shape, lambda *ix, p=prev, b=b, f=_ARITH[step]: f(p[ix], b[channel(ix)]),
                             name=f"{stage}{i}")
        elif step in _FULL:
            label, stage = _FULL[step]
            r = te.placeholder(shape, dtype, name=f"{label}{suffix}")
            inputs.append(r)
            out = te.compute(shape, lambda *ix, p=prev, r=r, f=_ARITH[step]: f(p[ix], r[ix]),
                             name=f"{stage}{i}")
        else:
            stage = step.split(":")[0]
            out = te.compute(shape, lambda *ix, p=prev, s=step: _unary(s, p[ix], dtype), name=f"{stage}{i}")
    return inputs, out


def inline_default(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """The default schedule of a fused workload: the naive one with every epilogue stage but the
    last inlined into the output stage (one loop nest writes the result, no scratch buffers)."""
    s = create_schedule(tensors[-1])
    last = tensors[-1].op.name
    for name, stage in list(s.stages.items()):
        if name != last and name.startswith(_STAGE_PREFIXES):
            s[stage.op.output(0)].compute_inline()
    return s


def reference(y: np.ndarray, epilogue: str, axis: int, extras: Sequence[np.ndarray]) -> np.ndarray:
    """The epilogue applied to ``y`` in numpy (float64 for floats), reading ``extras`` in order."""
    out = y.astype(np.float64) if y.dtype.kind == "f" else y
    queue = list(extras)
    for step in parse(epilogue):
        if step in _PER_CHANNEL:
            view = [1] * y.ndim
            view[axis] = -1
            out = _NUMPY[step](out, queue.pop(0).reshape(view))
        elif step in _FULL:
            out = _NUMPY[step](out, queue.pop(0))
        elif (fn := split(step)) is not None:
            out = FUNCTIONS[fn[0]].numpy(out, fn[1])
        elif step == "relu":
            out = np.maximum(out, 0)
        elif step == "sigmoid":
            out = 1.0 / (1.0 + np.exp(-out))
        else:
            erf = np.vectorize(math.erf, otypes=[np.float64])
            out = 0.5 * out * (1.0 + erf(out * _SQRT_HALF))
    return out
