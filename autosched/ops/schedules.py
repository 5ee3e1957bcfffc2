"""Hand-written CPU schedules for the reference workloads, built only from public primitives.

They show what the emitter can express (the benchmarks compare them with OpenBLAS and oneDNN), and
they are the programs the quick start builds before tuning exists. Tile sizes follow the target's
vector width and register count.
"""

from __future__ import annotations

from ..expr import Tensor
from ..schedule import Schedule, create_schedule
from ..target import Target


def _vector_regs(target: Target) -> int:
    """Vector registers of the target's ISA (AVX-512 and NEON have 32, AVX2 16)."""
    return 32 if (target.vector_bytes or 16) >= 64 or target.machine.startswith(("aarch64", "arm")) else 16


def matmul_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """Register-blocked matmul: a 6 x (2-4 vectors) accumulator tile kept in registers, a packed
    B panel per column block (reused by every row block), vectorized, unrolled, parallel columns."""
    tgt = Target.parse(target)
    A, B, C = tensors
    lanes = tgt.vector_lanes(C.dtype)
    mr = 6
    nr = lanes * (4 if _vector_regs(tgt) == 32 else 2)
    s = create_schedule(C)
    acc = s.cache_write(C, "local")
    panel = s.cache_read(B, "local", [acc])
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, mr, nr)
    s[C].reorder(jo, io, ii, ji)
    s[C].vectorize(ji)
    if (tgt.num_threads or 1) > 1:
        s[C].parallel(jo)
    s[acc].compute_at(s[C], io)
    ai, aj = s[acc].op.axis
    (ak,) = s[acc].op.reduce_axis
    ko, ki = s[acc].split(ak, 4)
    s[acc].reorder(ko, ki, ai, aj)
    s[acc].unroll(ki)
    s[acc].unroll(ai)
    s[acc].vectorize(aj)
    s[panel].compute_at(s[C], jo)
    s[panel].vectorize(s[panel].op.axis[1])
    return s


def conv2d_nchw_cpu(tensors: list[Tensor], target: Target | str = "c") -> Schedule:
    """Direct NCHW convolution: a (channels x output row) accumulator tile in registers, the
    padded input computed once, vectorized along the row, unrolled over channels and kernel
    columns, parallel over (channel block, row)."""
    tgt = Target.parse(target)
    conv = tensors[-1]
    s = create_schedule(conv)
    width = conv.shape[3]
    lanes = tgt.vector_lanes(conv.dtype)
    vectors_per_row = -(-width // lanes)
    kt = max(1, min(conv.shape[1], (_vector_regs(tgt) - 6) // vectors_per_row))
    acc = s.cache_write(conv, "local")
    n, k, y, x = s[conv].op.axis
    ko, ki = s[conv].split(k, kt)
    s[conv].reorder(n, ko, y, ki, x)
    s[conv].vectorize(x)
    if (tgt.num_threads or 1) > 1:
        s[conv].parallel(s[conv].fuse(ko, y))
        attach = s[conv].leaf_itervars()[1]
    else:
        attach = y
    s[acc].compute_at(s[conv], attach)
    an, ak, ay, ax = s[acc].op.axis
    rc, ry, rx = s[acc].op.reduce_axis
    s[acc].reorder(an, ay, rc, ry, rx, ak, ax)
    s[acc].unroll(rx)
    s[acc].unroll(ak)
    s[acc].vectorize(ax)
    if "pad" in s.stages:
        pad = s.stages["pad"].op.output(0)
        s[pad].vectorize(s[pad].op.axis[-1])
    return s
