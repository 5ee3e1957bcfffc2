"""Default schedules of low-precision matmuls over a packed weight (:func:`.dot.packed_tensors`):
u8 x s8 -> s32 through AMX tiles, AVX-512 VNNI or AVX2's ``vpmaddwd``, bf16 -> f32 through AMX or
AVX512-BF16, s8 x s8 / u8 x u8 -> s32 through NEON ``sdot`` / ``udot`` on AArch64 and AVX2 on
x86, picked from the CPU extensions the target may use (``-mattr``, the host's by default: a
cross target names them, e.g. ``c -cc=aarch64-linux-gnu-gcc -mattr=asimddp``)."""

from __future__ import annotations

from ..expr import Tensor, as_int
from ..schedule import Schedule, create_schedule
from ..target import Target
from .amx import amx_intrin
from .dot import KINDS, LANES, MAX_ACCUMULATORS, dot_intrin
from .dot_avx2 import REQUIRES as AVX2_REQUIRES
from .dot_avx2 import avx2_dot_intrin
from .isa import target_extensions

X86, ARM = "x86_64", "aarch64"
#: kind -> its paths, best first: (intrinsic family, the CPU extensions it needs, its architecture)
PATHS = {
    "vnni": (
        ("amx", ("amx_tile", "amx_int8"), X86), ("dot", ("avx512_vnni",), X86), ("avx2", AVX2_REQUIRES, X86),
    ),
    "bf16": (("amx", ("amx_tile", "amx_bf16"), X86), ("dot", ("avx512_bf16",), X86)),
    "sdot": (("dot", ("asimddp",), ARM), ("avx2", AVX2_REQUIRES, X86)),
    "udot": (("dot", ("asimddp",), ARM), ("avx2", AVX2_REQUIRES, X86)),
}

#: rows per block where the path fixes it: AMX's C tiles; AVX2's 16 vector registers (.dot_avx2)
MR = {"amx": 32, "avx2": 2}
#: AVX-512's default rows: 16 accumulators of its 32 registers, beside a panel of B and a broadcast
#: of A; halved down to a divisor of M where one is near (a partial block at the end runs the plain
#: loop nest, scalar code)
X86_DOT_ROWS = 16


def pick_path(kind: str, target: Target | str = "c") -> str:
    """``"amx"``, ``"dot"``, ``"avx2"`` or ``"portable"``: the fastest path of ``kind`` for the
    target's architecture whose extensions the target allows."""
    tgt = Target.parse(target)
    allowed = set(target_extensions(tgt))
    for path, needs, machine in PATHS[kind]:
        if machine == tgt.machine and allowed.issuperset(needs):  # -mattr may name another's
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
    intrinsic call per panel of B (16 columns, or 32 on the x86 ``dot`` path); ``path`` (``"amx"``,
    ``"dot"``, ``"avx2"``, ``"portable"``; default: the best the target allows) picks the intrinsic.
    Shapes that do not divide by ``mr`` or ``kc`` run the plain loop nest on the partial tiles."""
    tgt = Target.parse(target)
    A, B, C = tensors
    kind = _kind_of(A, B, C)
    path = path or pick_path(kind, tgt)
    machines = {p: machine for p, _, machine in PATHS[kind]}
    if path not in [*machines, "portable"]:
        raise ValueError(
            f"matmul_lowp: path must be {', '.join(machines)} or portable for {kind}, got {path!r}"
        )
    if path != "portable" and machines[path] != tgt.machine:
        raise ValueError(
            f"matmul_lowp: the {path} path of {kind} runs on {machines[path]}, not on this {tgt.machine} "
            "target (its -cc); use path='portable'"
        )
    M, K = A.shape
    if not isinstance(M, int) or not isinstance(K, int):
        raise ValueError("matmul_lowp: A's shape must be fixed")
    s = create_schedule(C)
    tensorize_dot(s, C, kind, path, mr, kc, tgt.num_threads or 1, as_int(B.shape[-2]))
    return s


def block_sizes(
    kind: str, path: str, m: int, k: int, mr: int = 0, kc: int = 0, cols: int = LANES
) -> tuple[int, int]:
    """(rows, reductions) of one intrinsic call of ``cols`` columns on ``path``: ``mr`` and ``kc``
    as asked (0: the path's default) made legal for it and for an ``m x k`` operand."""
    d = KINDS[kind]
    step = 64 if path == "amx" else d.group  # AMX tiles take 64 bytes of k per row
    # A's block (mr x kc) in L1; long AMX calls spread the tile configuration's cost
    kc = kc or min(k, 1024 if path == "amx" and kind == "vnni" else 512)
    kc = max(step, kc // step * step)
    # NEON: 4 accumulators a row of 32 vector registers (see .neon_dot)
    mr = mr or MR.get(path, 4 if d.machine == "aarch64" else _dividing_rows(m, X86_DOT_ROWS * LANES // cols))
    if path == "amx":
        return min(64, max(16, mr // 16 * 16)), kc
    return max(1, min(mr, m, MAX_ACCUMULATORS * LANES // cols)), kc


def _dividing_rows(m: int, most: int) -> int:
    """The most rows per block, from ``most`` down to half of it, that divide ``m``; else ``most``."""
    return next((r for r in range(most, most // 2 - 1, -1) if m % r == 0), most)


def tensorize_dot(
    s: Schedule, C: Tensor, kind: str, path: str, mr: int, kc: int, threads: int, cols: int = LANES
) -> None:
    """Block stage ``C`` (data axes ``..., i, j``, reductions ``..., ko, ki`` over an operand packed
    in panels of ``cols`` columns, as :func:`.dot.packed_tensors` and ``dot_layout`` write them)
    in ``mr`` rows x ``cols`` columns x ``kc`` reductions (made legal by :func:`block_sizes`) and
    tensorize each block with ``path``'s intrinsic; the outer data axes and row blocks go to the
    threads where ``threads`` > 1, and the other reductions (a convolution's taps) run outside the
    blocks."""
    if cols != LANES and path not in ("dot", "portable"):
        raise ValueError(f"tensorize_dot: panels of {cols} columns have only the dot path, not {path}")
    group = KINDS[kind].group
    stage = s[C]
    *outer, i, j = stage.op.axis
    *taps, ko, ki = stage.op.reduce_axis
    mr, kc = block_sizes(kind, path, as_int(i.extent), as_int(ko.extent) * group, mr, kc, cols)
    io, ii = stage.split(i, mr)
    jo, ji = stage.split(j, cols)
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
        intrin = avx2_dot_intrin(mr, kc, kind)
    else:
        intrin = dot_intrin(kind, mr, kc, portable=path == "portable", cols=cols)
    stage.tensorize(ii, intrin)
