"""Elementwise epilogues: the injective stages that fusion appends to an operator's output.

An epilogue is a comma-separated string of steps applied in order to a tensor ``y`` whose channel
axis is ``axis``: ``bias`` (``y + b[channel]``, one new input of shape (channels,)), ``add``
(``y + r``, a residual input of y's shape), ``relu``, ``gelu`` (the erf form) and ``sigmoid``.
``"bias,add,relu"`` is a ResNet block's tail. The te builder and the numpy reference of a step are
written independently: the reference never reads the te DAG.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .. import expr as te
from ..expr import Expr, Tensor
from ..schedule import Schedule, create_schedule
from ..target import Target

#: the steps an epilogue may hold, and whether each one reads an extra input
STEPS: dict[str, bool] = {"bias": True, "add": True, "relu": False, "gelu": False, "sigmoid": False}

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_STAGE_PREFIXES = ("bias_add", "residual_add", *(s for s in STEPS if not STEPS[s]))


def parse(epilogue: str) -> list[str]:
    """The steps of ``epilogue`` (``""`` is none); raise ``ValueError`` naming an unknown step."""
    steps = [s for s in epilogue.split(",") if s] if epilogue else []
    for s in steps:
        if s not in STEPS:
            raise ValueError(f"epilogue step {s!r} is not one of {', '.join(STEPS)}")
    return steps


def extra_inputs(epilogue: str) -> int:
    """How many input arrays the epilogue reads (one per ``bias`` or ``add`` step)."""
    return sum(STEPS[s] for s in parse(epilogue))


def _unary(step: str, x: Expr, dtype: str) -> Expr:
    if step == "relu":
        return te.max(x, te.const(0, dtype))
    if step == "sigmoid":
        return te.sigmoid(x)
    half = te.const(0.5, dtype)
    return half * x * (te.const(1.0, dtype) + te.erf(x * te.const(_SQRT_HALF, dtype)))


def build(y: Tensor, epilogue: str, axis: int) -> tuple[list[Tensor], Tensor]:
    """The epilogue's stages after ``y``: (its new input placeholders in order, the final tensor).

    Stages are named ``bias_add``, ``residual_add`` and after the unary step (``relu``, ...);
    inputs ``bias``/``residual`` (numbered from the second one on).
    """
    inputs: list[Tensor] = []
    out = y
    shape, dtype = tuple(y.shape), y.dtype
    for i, step in enumerate(parse(epilogue)):
        prev = out
        suffix = "" if not inputs else str(len(inputs))
        if step == "bias":
            b = te.placeholder((shape[axis],), dtype, name=f"bias{suffix}")
            inputs.append(b)
            out = te.compute(shape, lambda *ix, p=prev, b=b: p[ix] + b[ix[axis]], name=f"bias_add{i}")
        elif step == "add":
            r = te.placeholder(shape, dtype, name=f"residual{suffix}")
            inputs.append(r)
            out = te.compute(shape, lambda *ix, p=prev, r=r: p[ix] + r[ix], name=f"residual_add{i}")
        else:
            out = te.compute(shape, lambda *ix, p=prev, s=step: _unary(s, p[ix], dtype), name=f"{step}{i}")
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
        if step == "bias":
            view = [1] * y.ndim
            view[axis] = -1
            out = out + queue.pop(0).reshape(view)
        elif step == "add":
            out = out + queue.pop(0)
        elif step == "relu":
            out = np.maximum(out, 0)
        elif step == "sigmoid":
            out = 1.0 / (1.0 + np.exp(-out))
        else:
            erf = np.vectorize(math.erf, otypes=[np.float64])
            out = 0.5 * out * (1.0 + erf(out * _SQRT_HALF))
    return out
