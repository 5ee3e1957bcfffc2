"""Matrix-product templates on CPU: ``matmul`` (either layout of B) and ``batch_matmul``.

Two kernels, picked from the DAG (is the right operand read with the reduction index last?):

- *broadcast* (``C = A @ B``): the output is tiled in three levels per axis. The middle level
  makes a cache block, which a ``cache_write`` accumulator covers; inside it, register tiles of
  ``tile_i[2]`` rows x ``tile_j[2]`` columns (whole vectors) are updated by broadcasting one
  element of A against vectors of B, with the reduction split in three (``tile_k``: blocks, a
  serial loop, an unrolled step). B's panel can be packed (``cache_read``) once per column
  block, or once per reduction block where a whole-K panel would not fit in a local buffer.
  ``matmul_cpu`` in :mod:`autosched.ops.schedules` is a point of this space.
- *dot* (``C = A @ B.T``, also used by ``dense``): both operands are contiguous along the
  reduction, so the reduction's inner part is vectorized: ``rfactor`` splits it into a partial
  product per vector lane (``tile_k[2]`` lanes), a register tile of ``tile_i[2]`` x ``tile_j[2]``
  such vectors is accumulated, and the lanes are summed at the end.
"""

from __future__ import annotations

from ...dtypes import dtype as _dtype
from ...expr import ComputeOp, IterVar, Load, Reduce, Tensor, as_int, static_shape, walk
from ...schedule import Schedule, Stage, create_schedule
from ...target import Target
from ..knobs import AnnotateEntity, Config, OtherEntity, ReorderEntity, SplitEntity
from .common import (
    LOCAL_BYTES,
    REGISTER_ROWS,
    UNROLL_LIMIT,
    knob,
    lanes_of,
    parallel_outer,
    tile_candidates,
    vector_chunks,
    vector_tiles,
)
from .registry import register_template

DOT_ROWS = (1, 2, 3, 4, 6, 8)
"""Candidate rows and columns of a dot-kernel register tile (each holds a vector accumulator)."""


def reads_reduction_last(out: Tensor, operand: Tensor) -> bool:
    """Whether ``out``'s reduction reads ``operand`` with the reduction index innermost."""
    assert isinstance(out.op, ComputeOp) and isinstance(out.op.body, Reduce)
    reduce_vars = {iv.name for iv in out.op.reduce_axis}
    return any(
        isinstance(e, Load)
        and e.tensor.name == operand.name
        and getattr(e.indices[-1], "name", None) in reduce_vars
        for e in walk(out.op.body.source)
    )


def _tile_outer(cfg: Config, stage: Stage, i: IterVar, j: IterVar) -> tuple[list[IterVar], IterVar, IterVar]:
    """Split ``i``/``j`` into cache blocks (``tile_*[1] * tile_*[2]``), order the two block loops
    (knob ``reorder_outer``) above the two in-block loops. Returns the block loops in their order,
    the column-block loop and the in-block column loop."""
    ti, tj = knob(cfg, "tile_i", SplitEntity), knob(cfg, "tile_j", SplitEntity)
    io, ii = stage.split(i, ti.size[1] * ti.size[2])
    jo, ji = stage.split(j, tj.size[1] * tj.size[2])
    outer = [(io, jo)[p] for p in knob(cfg, "reorder_outer", ReorderEntity).perm]
    stage.reorder(*outer, ii, ji)
    return outer, jo, ji


def broadcast_gemm(cfg: Config, s: Schedule, C: Tensor, B: Tensor, target: Target) -> Schedule:
    """The broadcast kernel for ``C[..., i, j] = sum_k A[..., i, k] * B[..., k, j]``.

    With ``pack_b``, B's panel is copied once per column block (all of K) where that fits in
    :data:`LOCAL_BYTES`, else once per reduction block, else not at all.
    """
    M, N = static_shape(C.shape[-2:])
    K = as_int(C.op.reduce_axis[0].extent)
    lanes = lanes_of(target, C.dtype)
    cfg.define_split(
        "tile_i", M, 3, policy="candidate", candidate=tile_candidates(M, REGISTER_ROWS, max_block=128)
    )
    cfg.define_split(
        "tile_j",
        N,
        3,
        policy="candidate",
        candidate=tile_candidates(N, vector_tiles(N, lanes), max_block=512),
    )
    cfg.define_split("tile_k", K, 3, policy="candidate", candidate=tile_candidates(K, (1, 2, 4, 8)))
    cfg.define_reorder("reorder_outer", 2)
    cfg.define_reorder("reorder_acc", 3)
    cfg.define_annotate("unroll_acc", 2, policy="try_unroll")
    cfg.define_knob("pack_b", [0, 1])

    ti, tj, tk = (knob(cfg, n, SplitEntity) for n in ("tile_i", "tile_j", "tile_k"))
    pack_at = _panel_level(cfg, K, B.dtype) if knob(cfg, "pack_b", OtherEntity).val else None
    acc = s.cache_write(C, "local")
    panel = s.cache_read(B, "local", [acc]) if pack_at else None
    stage = s[C]
    *batch, i, j = stage.op.axis
    outer, jo, ji = _tile_outer(cfg, stage, i, j)
    stage.vectorize(ji)
    where = parallel_outer(cfg, stage, batch, outer, target)
    s[acc].compute_at(stage, where[outer[1].name])

    local = s[acc]
    *_, ai, aj = local.op.axis
    ai1, ai2 = local.split(ai, ti.size[2])
    aj1, aj2 = local.split(aj, tj.size[2])
    ak0, ak1, ak2 = tk.apply(s, local, local.op.reduce_axis[0])
    blocks = [(ak0, ai1, aj1)[p] for p in knob(cfg, "reorder_acc", ReorderEntity).perm]
    local.reorder(*blocks, ak1, ak2, ai2, aj2)
    local.vectorize(aj2)
    knob(cfg, "unroll_acc", AnnotateEntity).apply(
        s, local, [ak2, ai2], [tk.size[2], ti.size[2]], UNROLL_LIMIT // vector_chunks(tj.size[2], lanes)
    )
    if panel is not None:
        s[panel].compute_at(*((stage, where[jo.name]) if pack_at == "block" else (local, ak0)))
        s[panel].vectorize(s[panel].op.axis[-1])
    return s


def _panel_level(cfg: Config, K: int, dtype: str) -> str | None:
    """Where B's panel is packed: per column block (``"block"``, all of K) if that fits in
    :data:`LOCAL_BYTES`, else per reduction block (``"k"``) if that fits, else nowhere."""
    tj, tk = knob(cfg, "tile_j", SplitEntity), knob(cfg, "tile_k", SplitEntity)
    row_bytes = tj.size[1] * tj.size[2] * _dtype(dtype).bytes
    if K * row_bytes <= LOCAL_BYTES:
        return "block"
    if tk.size[1] * tk.size[2] * row_bytes <= LOCAL_BYTES:
        return "k"
    return None


def dot_gemm(cfg: Config, s: Schedule, out: Tensor, R: Tensor, target: Target) -> Schedule:
    """The dot kernel for ``R[..., i, j] = sum_k A[..., i, k] * B[..., j, k]``, its tiles laid out
    on ``out`` (``R`` itself, or an elementwise consumer of ``R`` that ``R`` is computed in)."""
    M, N = static_shape(R.shape[-2:])
    K = as_int(R.op.reduce_axis[0].extent)
    lanes = lanes_of(target, R.dtype)
    cfg.define_split("tile_i", M, 3, policy="candidate", candidate=tile_candidates(M, DOT_ROWS, max_block=32))
    cfg.define_split("tile_j", N, 3, policy="candidate", candidate=tile_candidates(N, DOT_ROWS, max_block=32))
    kv = (max(1, lanes // 2), lanes, 2 * lanes)
    cfg.define_split("tile_k", K, 3, policy="candidate", candidate=tile_candidates(K, kv))
    cfg.define_reorder("reorder_outer", 2)
    cfg.define_reorder("reorder_rf", 3)
    cfg.define_annotate("unroll_rf", 2, policy="try_unroll")

    ti, tj, tk = (knob(cfg, n, SplitEntity) for n in ("tile_i", "tile_j", "tile_k"))
    _, ki = s[R].split(s[R].op.reduce_axis[0], tk.size[2])
    rf = s.rfactor(R, ki, factor_axis=len(R.shape))
    stage = s[out]
    *batch, i, j = stage.op.axis
    outer, _, ji = _tile_outer(cfg, stage, i, j)
    where = parallel_outer(cfg, stage, batch, outer, target)
    if out is not R:
        stage.vectorize(ji)
        s[R].compute_at(stage, where[outer[1].name])
    s[rf].compute_at(stage, where[outer[1].name])

    part = s[rf]
    *_, fi, fj, fv = part.op.axis
    fi1, fi2 = part.split(fi, ti.size[2])
    fj1, fj2 = part.split(fj, tj.size[2])
    fk0, fk1 = part.split(part.op.reduce_axis[0], tk.size[1])
    blocks = [(fk0, fi1, fj1)[p] for p in knob(cfg, "reorder_rf", ReorderEntity).perm]
    part.reorder(*blocks, fk1, fi2, fj2, fv)
    part.vectorize(fv)
    knob(cfg, "unroll_rf", AnnotateEntity).apply(
        s, part, [fi2, fj2], [ti.size[2], tj.size[2]], UNROLL_LIMIT // vector_chunks(tk.size[2], lanes)
    )
    return s


@register_template("matmul", "c")
def matmul_template(cfg: Config, tensors: list[Tensor], target: Target) -> Schedule:
    """matmul: broadcast kernel (B packed or not), or dot kernel when B is transposed."""
    _, B, C = tensors
    s = create_schedule(C)
    if reads_reduction_last(C, B):
        return dot_gemm(cfg, s, C, C, target)
    return broadcast_gemm(cfg, s, C, B, target)


@register_template("batch_matmul", "c")
def batch_matmul_template(cfg: Config, tensors: list[Tensor], target: Target) -> Schedule:
    """batch_matmul: the broadcast kernel per batch, the batch fused into the parallel loop."""
    _, B, C = tensors
    return broadcast_gemm(cfg, create_schedule(C), C, B, target)
