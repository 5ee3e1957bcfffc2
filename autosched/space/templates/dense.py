"""Dense-layer template on CPU: ``dense`` (``out = relu(data @ weight.T + bias)``).

Both operands of ``dense`` are contiguous along the reduction, so it uses the matmul dot kernel
(:func:`~autosched.space.templates.matmul.dot_gemm`): the tiles are laid out on the epilogue
stage ``out`` (vectorized along its rows), and the ``dense`` block with its per-lane partial
products is computed inside each of ``out``'s tiles, so the product never goes to memory whole.
"""

from __future__ import annotations

from ...expr import Tensor
from ...schedule import Schedule, create_schedule
from ...target import Target
from ..knobs import Config
from .matmul import dot_gemm
from .registry import register_template


@register_template("dense", "c")
def dense_template(cfg: Config, tensors: list[Tensor], target: Target) -> Schedule:
    """dense: the dot kernel computed at the tiles of the bias + ReLU epilogue."""
    out = tensors[-1]
    s = create_schedule(out)
    return dot_gemm(cfg, s, out, s.stages["dense"].op.output(0), target)
