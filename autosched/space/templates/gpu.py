"""GPU templates (``opencl`` and ``cuda`` targets): matmul as a point of the shared-memory tiled
kernel of :func:`~autosched.ops.gpu_schedules.matmul_gpu`; softmax and the elementwise operators
with their block size as the knob.

Knob values are filtered by the target's thread limit; a point whose shared tiles exceed the
device's shared memory, or whose cooperative fetch has fewer elements than the block has threads,
is rejected by GPU lowering (an ``INSTANTIATION_ERROR`` with the reason).
"""

from __future__ import annotations

from ...expr import Tensor
from ...ops.gpu_schedules import elementwise_gpu, matmul_gpu, softmax_gpu
from ...schedule import Schedule
from ...target import Target
from ..knobs import Config, OtherEntity
from .common import knob
from .registry import register_template

GPU_KINDS = ("opencl", "cuda")


def _value(cfg: Config, name: str) -> int:
    return int(knob(cfg, name, OtherEntity).val)  # type: ignore[arg-type]


def matmul_gpu_template(cfg: Config, tensors: list[Tensor], target: Target) -> Schedule:
    """matmul: block x block threads, reg x reg outputs per thread, k_tile-deep shared tiles."""
    limit = target.max_threads_per_block or 256
    cfg.define_knob("block", [b for b in (4, 8, 16) if b * b <= limit])
    cfg.define_knob("reg", [1, 2, 4])
    cfg.define_knob("k_tile", [4, 8, 16])
    return matmul_gpu(tensors, target, _value(cfg, "block"), _value(cfg, "reg"), _value(cfg, "k_tile"))


def _threads_knob(cfg: Config, target: Target) -> int:
    limit = target.max_threads_per_block or 256
    cfg.define_knob("threads", [t for t in (32, 64, 128, 256, 512) if t <= limit])
    return _value(cfg, "threads")


def elementwise_gpu_template(cfg: Config, tensors: list[Tensor], target: Target) -> Schedule:
    """Elementwise: every element on a thread, blocks of ``threads``."""
    return elementwise_gpu(tensors, target, _threads_knob(cfg, target))


def softmax_gpu_template(cfg: Config, tensors: list[Tensor], target: Target) -> Schedule:
    """softmax: a row per thread for the reductions, an element per thread after, blocks of ``threads``."""
    return softmax_gpu(tensors, target, _threads_knob(cfg, target))


for _kind in GPU_KINDS:
    register_template("matmul", _kind)(matmul_gpu_template)
    register_template("softmax", _kind)(softmax_gpu_template)
    for _name in ("relu", "add"):
        register_template(_name, _kind)(elementwise_gpu_template)
