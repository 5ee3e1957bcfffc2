"""Default schedules of low-precision matmuls over a packed weight (:func:`.dot.packed_tensors`):
u8 x s8 -> s32 through AMX tiles, AVX-512 VNNI or AVX2's ``vpmaddwd``, bf16 -> f32 through AMX or
AVX512-BF16, and on
AArch64 s8 x s8 / u8 x u8 -> s32 through NEON ``sdot`` / ``udot``, picked from the CPU extensions
the target may use (``-mattr``, the host's by default: a cross target names them, e.g.
``c -cc=aarch64-linux-gnu-gcc -mattr=asimddp``)."""

from __future__ import annotations

from ..expr import Tensor, as_int
from ..schedule import Schedule, create_schedule
from ..target import Target
from .amx import amx_intrin
from .dot import KINDS, LANES, dot_intrin
from .dot_avx2 import REQUIRES as AVX2_REQUIRES
from .dot_avx2 import avx2_dot_intrin
from .isa import target_extensions

#: (intrinsic family, kind) -> the CPU extensions it needs, best first per kind
PATHS = {
    "vnni": (("amx", ("amx_tile", "amx_int8")), ("dot", ("avx512_vnni",)), ("avx2", AVX2_REQUIRES)),
    "bf16": (("amx", ("amx_tile", "amx_bf16")), ("dot", ("avx512_bf16",))),
    "sdot": (("dot", ("asimddp",)),),
    "udot": (("dot", ("asimddp",)),),
}

#: rows per block where the path fixes it: AMX's C tiles; AVX2's 16 vector registers (.dot_avx2)
MR = {"amx": 32, "avx2": 2}


def pick_path(kind: str, target: Target | str = "c") -> str:
    """``"amx"``, ``"dot"`` or ``"portable"``: the fastest path of ``kind`` whose extensions the
    target allows."""
    tgt = Target.parse(target)
    if KINDS[kind].machine != tgt.machine:  # -mattr names another architecture's extensions
        return "portable"
    allowed = set(target_extensions(tgt))
    for path, needs in PATHS[kind]:
        if allowed.issuperset(needs):
            return path
    return "portable"


def _kind_of(A: Tensor, B: Tensor, C: Tensor) -> str:
    for name, d in KINDS.items():
        if (A.dtype, B.dtype, C.dtype) == (d.a_dtype, d.b_dtype, d.acc):
            return name
    raise ValueError(
        f"matmul_lowp: {A.name}, {B.name}, {C.name} are {A.dtype}, {B.dtype}, {C.dtype}; expected a "
        "packed_tensors matmul (uint8 x int8, int8 x int8 or uint8 x uint8 -> int32, bfloat16 -> float32)"
    )


def matmul_lowp(
    tensors: list[Tensor], target: Target | str = "c", path: str | None = None, mr: int = 0, kc: int = 0
) -> Schedule:
    """``C[i, j] = sum(A[i, k] * B[k, j])`` over a packed ``B`` (see :func:`.dot.packed_tensors`):
    per block of ``mr`` rows (in parallel on a multi-threaded target) and ``kc`` reductions, one
    intrinsic call per 16 columns; ``path`` (``"amx"``, ``"dot"``, ``"portable"``; default: the
    best the target allows) picks the intrinsic. Shapes that do not divide by ``mr`` or ``kc`` run
    the plain loop nest on the partial tiles."""
    tgt = Target.parse(target)
    A, B, C = tensors
    kind = _kind_of(A, B, C)
    d = KINDS[kind]
    path = path or pick_path(kind, tgt)
    if path not in {p for p, _ in PATHS[kind]} | {"portable"}:
        raise ValueError(
            f"matmul_lowp: path must be {', '.join(p for p, _ in PATHS[kind])} or portable "
            f"for {kind}, got {path!r}"
        )
    if path != "portable" and d.machine != tgt.machine:
        raise ValueError(
            f"matmul_lowp: the {path} path of {kind} runs on {d.machine}, not on this {tgt.machine} "
            "target (its -cc); use path='portable'"
        )
    M, K = A.shape
    if not isinstance(M, int) or not isinstance(K, int):
        raise ValueError("matmul_lowp: A's shape must be fixed")
    s = create_schedule(C)
    tensorize_dot(s, C, kind, path, mr, kc, tgt.num_threads or 1)
    return s


def block_sizes(kind: str, path: str, m: int, k: int, mr: int = 0, kc: int = 0) -> tuple[int, int]:
    """(rows, reductions) of one intrinsic call on ``path``: ``mr`` and ``kc`` as asked (0: the
    path's default) made legal for it and for an ``m x k`` operand."""
    d = KINDS[kind]
    step = 64 if path == "amx" else d.group  # AMX tiles take 64 bytes of k per row
    # A's block (mr x kc) in L1; long AMX calls spread the tile configuration's cost
    kc = kc or min(k, 1024 if path == "amx" and kind == "vnni" else 512)
    kc = max(step, kc // step * step)
    # NEON: 4 accumulators a row of 32 vector registers (see .neon_dot)
    mr = mr or MR.get(path, 4 if d.machine == "aarch64" else 8)
    if path == "amx":
        return min(64, max(16, mr // 16 * 16)), kc
    return max(1, min(mr, m, 28)), kc


def tensorize_dot(s: Schedule, C: Tensor, kind: str, path: str, mr: int, kc: int, threads: int) -> None:
    """Block stage ``C`` (data axes ``..., i, j``, reductions ``..., ko, ki`` over a packed operand,
    as :func:`.dot.packed_tensors` and ``dot_layout`` write them) in ``mr`` rows x 16 columns x
    ``kc`` reductions (made legal by :func:`block_sizes`) and tensorize each block with ``path``'s
    intrinsic; the outer data axes and row blocks go to the threads where ``threads`` > 1, and
    the other reductions (a convolution's taps) run outside the blocks."""
    group = KINDS[kind].group
    stage = s[C]
    *outer, i, j = stage.op.axis
    *taps, ko, ki = stage.op.reduce_axis
    mr, kc = block_sizes(kind, path, as_int(i.extent), as_int(ko.extent) * group, mr, kc)
    io, ii = stage.split(i, mr)
    jo, ji = stage.split(j, LANES)
    koo, koi = stage.split(ko, kc // group)
    # a block of A (mr x kc) stays in L1 while the packed panels of B stream by from L2; on one
    # thread the kc rows of B (all its panels) stay there for every block of rows, on several the
    # blocks of rows go to the threads in one parallel loop (one per k block was slower)
    if threads > 1:
        stage.reorder(*outer, io, *taps, koo, jo, ii, ji, koi, ki)
        stage.parallel(stage.fuse(*outer, io) if outer else io)
    else:
        stage.reorder(*outer, *taps, koo, io, jo, ii, ji, koi, ki)
    if path == "amx":
        intrin = amx_intrin(kind, mr, kc)
    elif path == "avx2":
        intrin = avx2_dot_intrin(mr, kc)
    else:
        intrin = dot_intrin(kind, mr, kc, portable=path == "portable")
    stage.tensorize(ii, intrin)
