"""GPU templates (``opencl`` and ``cuda`` targets): matmul, batch_matmul and dense as points of the
shared-memory tiled kernel of :func:`~autosched.backends.gpu_schedules.matmul_gpu` (with or
without virtual threads); conv2d NCHW as a
point of :func:`~autosched.backends.gpu_conv.conv2d_gpu` (threads per block over output channels, rows
and columns, registers per thread, input channels per shared tile); softmax, depthwise conv2d,
pooling and the elementwise operators with their block size as the knob.

Knob values are filtered by the target's thread limit (and, for conv2d, by the output's extents);
a point whose shared tiles exceed the device's shared memory is rejected by GPU lowering (an
``INSTANTIATION_ERROR`` with the reason).
"""

from __future__ import annotations

from ...backends import gpu_kinds
from ...backends.gpu_conv import conv2d_gpu, direct_gpu
from ...backends.gpu_schedules import batch_matmul_gpu, dense_gpu, elementwise_gpu, matmul_gpu, softmax_gpu
from ...expr import Tensor, static_shape
from ...schedule import Schedule
from ...target import Target
from ..knobs import Config, OtherEntity
from .common import knob
from .registry import register_template


def _value(cfg: Config, name: str) -> int:
    return int(knob(cfg, name, OtherEntity).val)  # type: ignore[arg-type]


def _gemm_knobs(cfg: Config, target: Target) -> tuple[int, int, int, int]:
    """(block, reg, k_tile, vthreads) of :func:`matmul_gpu`: block x block threads, vthreads x
    vthreads virtual threads of reg x reg outputs each per thread (``reg`` here is per virtual
    thread, so that every point is valid), k_tile-deep tiles. ``vthreads`` is defined last: the
    configs without virtual threads keep the indices they had before it."""
    limit = target.max_threads_per_block or 256
    cfg.define_knob("block", [b for b in (4, 8, 16) if b * b <= limit])
    cfg.define_knob("reg", [1, 2, 4])
    cfg.define_knob("k_tile", [4, 8, 16])
    cfg.define_knob("vthreads", [1, 2])
    vthreads = _value(cfg, "vthreads")
    return _value(cfg, "block"), _value(cfg, "reg") * vthreads, _value(cfg, "k_tile"), vthreads


def matmul_gpu_template(cfg: Config, tensors: list[Tensor], target: Target) -> Schedule:
    """matmul: block x block threads, (vthreads * reg)^2 outputs per thread, k_tile-deep shared
    tiles."""
    return matmul_gpu(tensors, target, *_gemm_knobs(cfg, target))


def batch_matmul_gpu_template(cfg: Config, tensors: list[Tensor], target: Target) -> Schedule:
    """batch_matmul: the matmul knobs, one batch index per blockIdx.z."""
    return batch_matmul_gpu(tensors, target, *_gemm_knobs(cfg, target))


def dense_gpu_template(cfg: Config, tensors: list[Tensor], target: Target) -> Schedule:
    """dense: the matmul knobs on the bias + ReLU epilogue, the product in registers."""
    return dense_gpu(tensors, target, *_gemm_knobs(cfg, target))


def conv2d_gpu_template(cfg: Config, tensors: list[Tensor], target: Target) -> Schedule:
    """conv2d NCHW: threads (channels x rows x columns), reg channels per thread, rc_tile channels
    per shared tile."""
    limit = target.max_threads_per_block or 256
    _, k, p, q = static_shape(tensors[-1].shape)
    shapes = [(z, y, x) for z in (1, 2, 4, 8) for y in (1, 2, 4, 8) for x in (4, 8, 16, 32)]
    fits = [(z, y, x) for z, y, x in shapes if z <= k and y <= p and x <= q and z * y * x <= limit]
    names = [f"{z}x{y}x{x}" for z, y, x in fits if z * y * x >= min(32, k * p * q)]
    cfg.define_knob("threads", names or ["1x1x1"])
    cfg.define_knob("reg", [1, 2, 4])
    cfg.define_knob("rc_tile", [1, 2, 4, 8])
    z, y, x = (int(t) for t in str(knob(cfg, "threads", OtherEntity).val).split("x"))
    return conv2d_gpu(tensors, target, (z, y, x), _value(cfg, "reg"), _value(cfg, "rc_tile"))


def _threads_knob(cfg: Config, target: Target) -> int:
    limit = target.max_threads_per_block or 256
    cfg.define_knob("threads", [t for t in (32, 64, 128, 256, 512) if t <= limit])
    return _value(cfg, "threads")


def elementwise_gpu_template(cfg: Config, tensors: list[Tensor], target: Target) -> Schedule:
    """Elementwise: every element on a thread, blocks of ``threads``."""
    return elementwise_gpu(tensors, target, _threads_knob(cfg, target))


def direct_gpu_template(cfg: Config, tensors: list[Tensor], target: Target) -> Schedule:
    """Windowed operators (depthwise conv2d, pooling): an output element per thread, blocks of ``threads``."""
    return direct_gpu(tensors, target, _threads_knob(cfg, target))


def softmax_gpu_template(cfg: Config, tensors: list[Tensor], target: Target) -> Schedule:
    """softmax: a row per thread for the reductions, an element per thread after, blocks of ``threads``."""
    return softmax_gpu(tensors, target, _threads_knob(cfg, target))


for _kind in gpu_kinds():
    register_template("matmul", _kind)(matmul_gpu_template)
    register_template("batch_matmul", _kind)(batch_matmul_gpu_template)
    register_template("dense", _kind)(dense_gpu_template)
    register_template("conv2d_nchw", _kind)(conv2d_gpu_template)
    for _name in ("depthwise_conv2d_nchw", "max_pool2d", "avg_pool2d"):
        register_template(_name, _kind)(direct_gpu_template)
    register_template("softmax", _kind)(softmax_gpu_template)
    for _name in ("relu", "add"):
        register_template(_name, _kind)(elementwise_gpu_template)
