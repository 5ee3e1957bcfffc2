"""Dot-product tensor intrinsics for narrow types: x86 AVX-512 VNNI (``vpdpbusd``: u8 x s8 products
summed four at a time into int32 lanes) and AVX512-BF16 (``vdpbf16ps``: bf16 pairs summed into
float32 lanes), and AArch64 NEON ``sdot`` (s8 x s8) and ``udot`` (u8 x u8) into int32 lanes
(:mod:`.neon_dot`), each with a portable C path that computes the same widened sums.

All compute ``c[i, j] (+)= sum(a[i, g*ko + ki] * b[ko, j, ki])`` over an ``mr x 16`` block of
``c`` and ``kc`` reductions, ``g`` = 4 (VNNI, sdot, udot) or 2 (BF16) consecutive ``k`` per lane,
with B laid out as :func:`pack_b` makes it: ``[N/16, K/g, 16, g]``, so that one 64-byte load
holds the ``g`` values of ``k`` for 16 columns (on NEON: four 128-bit loads of 4 columns each).
The x86 kinds also have blocks of 32 columns over panels of 32 (``cols=32``: two loads of B per
``k`` group, each broadcast of A used twice).
Row strides ``lda`` and ``ldc`` are parameters; the packed panel is contiguous. Integer results
are bit-identical on every path (int32 sums wrap, as numpy's do).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import expr as te
from ..dtypes import dtype as _dtype
from ..dtypes import numpy_dtype
from ..te.buffer import decl_buffer
from ..te.intrin import CImpl, TensorIntrin, decl_tensor_intrin
from .neon_dot import ATTRIBUTE as NEON_ATTRIBUTE
from .neon_dot import neon_vector

LANES = 16  # output columns per call: one 512-bit vector of int32 or float32 (four NEON vectors)
#: columns per call (and per packed panel) the blocks may have: one or two vectors on x86
COLS = (16, 32)
#: zmm accumulators a block may hold: 32 registers less the panel of B and a broadcast of A
MAX_ACCUMULATORS = 28


@dataclass(frozen=True, slots=True)
class DotKind:
    """One family of dot-product instructions: input dtypes, accumulator, ``k`` per lane, the CPU
    extensions its vector path (:func:`dot_intrin`) needs (``/proc/cpuinfo`` names), gcc's target
    attribute and the architecture that path exists on (:attr:`Target.machine`; the 8-bit kinds
    also have an AVX2 path on x86, :mod:`.dot_avx2`)."""

    name: str
    a_dtype: str
    b_dtype: str
    acc: str
    group: int
    requires: tuple[str, ...]
    attribute: str
    machine: str = "x86_64"


VNNI = DotKind("vnni", "uint8", "int8", "int32", 4, ("avx512_vnni",), "avx512vnni,avx512bw,avx512f")
BF16 = DotKind("bf16", "bfloat16", "bfloat16", "float32", 2, ("avx512_bf16",), "avx512bf16,avx512bw,avx512f")
SDOT = DotKind("sdot", "int8", "int8", "int32", 4, ("asimddp",), NEON_ATTRIBUTE, "aarch64")
UDOT = DotKind("udot", "uint8", "uint8", "int32", 4, ("asimddp",), NEON_ATTRIBUTE, "aarch64")
KINDS = {k.name: k for k in (VNNI, BF16, SDOT, UDOT)}


def _check_cols(cols: object, who: str) -> None:
    if cols not in COLS:
        raise ValueError(f"{who}: cols must be one of {', '.join(map(str, COLS))}, got {cols!r}")


def pack_b(b: np.ndarray, group: int, cols: int = LANES) -> np.ndarray:
    """Lay a ``[K, N]`` weight out as ``[N/cols, K/group, cols, group]`` (``group`` consecutive
    ``k`` of one column side by side, panels of ``cols`` columns), the layout of the dot-product
    and AMX intrinsics. Done once, at build time, for constant weights."""
    b = np.asarray(b)
    if b.ndim != 2:
        raise ValueError(f"pack_b: expected a [K, N] matrix, got shape {b.shape}")
    k, n = b.shape
    _check_cols(cols, "pack_b")
    if n % cols or k % group:
        raise ValueError(f"pack_b: N={n} must divide by {cols} and K={k} by {group}; pad the weight")
    return np.ascontiguousarray(b.reshape(k // group, group, n // cols, cols).transpose(2, 0, 3, 1))


def packed_tensors(m: int, n: int, k: int, kind: str = "vnni", cols: int = LANES) -> list[te.Tensor]:
    """``[A, B, C]`` of a low-precision matmul whose weight ``B`` is already packed (:func:`pack_b`
    with ``cols``): ``C[i, j] = sum(A[i, g*ko + ki].astype(acc) * B[j // cols, ko, j % cols,
    ki].astype(acc))``, two reduce axes ``ko`` (K/g) and ``ki`` (g) as the intrinsics compute them."""
    d = KINDS[kind]
    _check_cols(cols, "packed_tensors")
    if n % cols or k % d.group:
        raise ValueError(f"packed_tensors: N={n} must divide by {cols} and K={k} by {d.group}")
    A = te.placeholder((m, k), d.a_dtype, name="A")
    B = te.placeholder((n // cols, k // d.group, cols, d.group), d.b_dtype, name="B")
    ko = te.reduce_axis(k // d.group, name="ko")
    ki = te.reduce_axis(d.group, name="ki")
    C = te.compute(
        (m, n),
        lambda i, j: te.sum(
            A[i, ko * d.group + ki].astype(d.acc) * B[j // cols, ko, j % cols, ki].astype(d.acc),
            axis=[ko, ki],
        ),
        name="C",
    )
    return [A, B, C]


def _portable(name: str, d: DotKind, mr: int, kc: int, cols: int) -> str:
    a_t, b_t, c_t = (_dtype(t).c_name for t in (d.a_dtype, d.b_dtype, d.acc))
    if d.acc == "int32":  # products fit in int32; sums wrap as the instruction's do
        term = "(uint32_t)((int32_t)a[g] * (int32_t)bk[j * G + g])"
        acc_t, start, out = "uint32_t", "(uint32_t)C[(long)i * ldc + j]", "(int32_t)t"
    else:
        term = "asc_dot_bf16_f32(a[g]) * asc_dot_bf16_f32(bk[j * G + g])"
        acc_t, start, out = "float", "C[(long)i * ldc + j]", "t"
    return f"""static void {name}({c_t}* restrict C, const {a_t}* restrict A, const {b_t}* restrict B,
    int lda, int ldc, int acc) {{
  enum {{ G = {d.group} }};
  for (int i = 0; i < {mr}; ++i) {{
    const {a_t}* a0 = A + (long)i * lda;
    for (int j = 0; j < {cols}; ++j) {{
      {acc_t} t = acc ? {start} : 0;
      for (int ko = 0; ko < {kc // d.group}; ++ko) {{
        const {b_t}* bk = B + ko * {cols} * G;
        const {a_t}* a = a0 + ko * G;
        for (int g = 0; g < G; ++g) t += {term};
      }}
      C[(long)i * ldc + j] = {out};
    }}
  }}
}}"""


#: one accumulation ``c += a . b`` as the instruction itself (AT&T order: b, a, c): through the
#: intrinsics gcc 12 copies each tied accumulator to another register and back around every
#: instruction (benchmarks/bench_dot_rates.py on one Zen 5 core, data in L1: the 16 x 16 VNNI block
#: at 566 GOP/s through the intrinsic, 979 as written here; 8 x 32: 566 and 1,047; clang 14 needs
#: no help)
ACCUMULATE = '__asm__("{op} %2, %1, %0" : "+v"({c}) : "v"(a), "v"({b}));'


def avx512_vector(name: str, d: DotKind, mr: int, kc: int, cols: int) -> str:
    """The C of ``d``'s x86 block ``name(C, A, B, lda, ldc, acc)``: ``mr`` rows x ``cols`` (16 or
    32) columns x ``kc`` reductions, accumulators in zmm registers (see the module docstring)."""
    a_t, b_t, c_t = (_dtype(t).c_name for t in (d.a_dtype, d.b_dtype, d.acc))
    panel, vector = cols * d.group, LANES * d.group  # B's elements per k group, per vector
    if d.acc == "int32":
        vt, load, store = "__m512i", "_mm512_loadu_si512", "_mm512_storeu_si512"
        zero, op, a, b = "_mm512_setzero_si512()", "vpdpbusd", "_mm512_set1_epi32(w)", "{}"
    else:
        vt, load, store, zero = "__m512", "_mm512_loadu_ps", "_mm512_storeu_ps", "_mm512_setzero_ps()"
        op, a, b = "vdpbf16ps", "_mm512_castsi512_ps(_mm512_set1_epi32(w))", "_mm512_castsi512_ps({})"
    vectors = range(cols // LANES)
    # accumulator of row i, vector v: c{i}_{v}, at C + i * ldc + 16 v
    blocks = [(f"c{i}_{v}", f"C + (long){i} * ldc + {LANES * v}") for i in range(mr) for v in vectors]
    lines = [
        f'__attribute__((target("{d.attribute}"))) static void {name}({c_t}* restrict C, '
        f"const {a_t}* restrict A, const {b_t}* restrict B, int lda, int ldc, int acc) {{",
        f"  {vt} {', '.join(c for c, _ in blocks)};",
        "  if (acc) {",
        *(f"    {c} = {load}((const void*)({at}));" for c, at in blocks),
        "  } else {",
        *(f"    {c} = {zero};" for c, _ in blocks),
        "  }",
        f"  for (int ko = 0; ko < {kc // d.group}; ++ko) {{",
        *(f"    const __m512i b{v} = _mm512_loadu_si512((const void*)(B + ko * {panel} + {v * vector}));"
          for v in vectors),
        "    int w;",
    ]  # fmt: skip
    for i in range(mr):
        lines.append(f"    memcpy(&w, A + (long){i} * lda + ko * {d.group}, 4);")
        lines.append(f"    {{ const {vt} a = {a};")
        lines += [f"      {ACCUMULATE.format(op=op, c=f'c{i}_{v}', b=b.format(f'b{v}'))}" for v in vectors]
        lines.append("    }")
    lines += ["  }", *(f"  {store}((void*)({at}), {c});" for c, at in blocks)]
    return "\n".join([*lines, "}"])


def _dispatch(name: str, d: DotKind, parts: list[str], vector: str | None) -> str:
    """The preamble: ``parts``, then ``asc_<name>`` calling the vector path, or the C one."""
    a_t, b_t, c_t = (_dtype(t).c_name for t in (d.a_dtype, d.b_dtype, d.acc))
    call = (
        f"static inline void asc_{name}({c_t}* restrict C, const {a_t}* restrict A, "
        f"const {b_t}* restrict B, int lda, int ldc, int acc) {{\n"
        + (
            ""
            if vector is None
            else f"  (void)asc_{name}_c; /* the C path, a portable build's: no -Wunused */\n"
        )
        + f"  asc_{name}_{'c' if vector is None else 'v'}(C, A, B, lda, ldc, acc);\n}}"
    )
    return "\n\n".join([*parts, call])


BF16_C = """\
static inline float asc_dot_bf16_f32(uint16_t h) {
  union { uint32_t u; float f; } v; v.u = (uint32_t)h << 16; return v.f;
}"""


def dot_intrin(kind: str, mr: int, kc: int, portable: bool = False, cols: int = LANES) -> TensorIntrin:
    """The ``mr x cols x kc`` dot-product intrinsic of ``kind`` (``"vnni"``, ``"bf16"`` on x86;
    ``"sdot"``, ``"udot"`` on AArch64; see the module docstring; 32 columns on x86 only). Its
    vector path is compiled unconditionally for the kind's architecture (a kernel using it needs
    the CPU extension: ``intrin.requires``); ``portable=True`` keeps only the C path, as does a
    strict C99 build."""
    d = check_block(kind, mr, kc, "dot_intrin", 1)
    if cols not in COLS or (cols != LANES and d.machine != "x86_64"):
        raise ValueError(f"dot_intrin: cols must be {LANES} (or 32 on x86) for {kind}, got {cols!r}")
    if mr * cols // LANES > MAX_ACCUMULATORS:
        raise ValueError(
            f"dot_intrin: {mr} rows of {cols} columns need more than {MAX_ACCUMULATORS} accumulators"
        )
    tag = f"{kind}_{mr}x{kc}" + (f"_n{cols}" if cols != LANES else "") + ("_portable" if portable else "")
    if portable:
        vector = None
    elif d.machine == "aarch64":
        vector = neon_vector(f"asc_dot_{tag}_v", d.a_dtype == "int8", mr, kc)
    else:
        vector = "#include <immintrin.h>\n" + avx512_vector(f"asc_dot_{tag}_v", d, mr, kc, cols)
    return declare(d, mr, kc, f"dot_{tag}", vector, () if portable else d.requires, cols)


def check_block(kind: str, mr: int, kc: int, who: str, k_step: int) -> DotKind:
    """The kind's :class:`DotKind`, after checking a block of ``mr`` rows and ``kc`` reductions
    whose kc is a multiple of ``k_step`` and of the kind's k group (one-line ``ValueError``)."""
    if kind not in KINDS:
        raise ValueError(f"{who}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    d = KINDS[kind]
    if not isinstance(mr, int) or not 1 <= mr <= 28 * k_step:
        raise ValueError(f"{who}: mr must be an int in [1, {28 * k_step}], got {mr!r}")
    step = max(d.group, k_step)
    if not isinstance(kc, int) or kc <= 0 or kc % step:
        raise ValueError(f"{who}: kc must be a positive multiple of {step} for {kind}, got {kc!r}")
    return d


def declare(
    d: DotKind,
    mr: int,
    kc: int,
    name: str,
    vector: str | None,
    requires: tuple[str, ...],
    cols: int = LANES,
) -> TensorIntrin:
    """Declare intrinsic ``name`` computing the module docstring's block of ``cols`` columns with
    the C ``vector`` (file-scope text defining ``asc_<name>_v(C, A, B, lda, ldc, acc)``; ``None``:
    the portable C path only), which needs the CPU extensions ``requires``."""
    a = te.placeholder((mr, kc), d.a_dtype, name="a")
    b = te.placeholder((kc // d.group, cols, d.group), d.b_dtype, name="b")
    ko = te.reduce_axis(kc // d.group, name="ko")
    ki = te.reduce_axis(d.group, name="ki")
    c = te.compute(
        (mr, cols),
        lambda i, j: te.sum(
            a[i, ko * d.group + ki].astype(d.acc) * b[ko, j, ki].astype(d.acc), axis=[ko, ki]
        ),
        name="c",
    )
    binds = {
        a: decl_buffer(a.shape, d.a_dtype, "A", strides=[te.var("lda"), 1]),
        b: decl_buffer(b.shape, d.b_dtype, "B"),
        c: decl_buffer(c.shape, d.acc, "C", strides=[te.var("ldc"), 1]),
    }
    head = "#include <string.h>\n" + (BF16_C if d.name == "bf16" else "")
    scalar = _portable(f"asc_{name}_c", d, mr, kc, cols)
    reset = f"  for (int i = 0; i < {mr}; ++i)\n"
    reset += f"    for (int j = 0; j < {cols}; ++j) C[(long)i * ldc + j] = 0;"
    impl = CImpl(
        body=f"  asc_{name}(C, A, B, lda, ldc, 0);",
        reset=reset,
        update=f"  asc_{name}(C, A, B, lda, ldc, 1);",
        preamble=_dispatch(name, d, [head, scalar] if vector is None else [head, scalar, vector], vector),
        portable_preamble=_dispatch(name, d, [head, scalar], None),
    )
    return decl_tensor_intrin(c.op, impl, name=name, binds=binds, requires=requires)


def numpy_reference(a: np.ndarray, b_packed: np.ndarray, kind: str) -> np.ndarray:
    """What ``packed_tensors`` computes, in numpy (int32 wrapping sums; bf16 as float32)."""
    nb, kg, lanes, g = b_packed.shape
    b = b_packed.transpose(1, 3, 0, 2).reshape(kg * g, nb * lanes)
    acc = numpy_dtype(KINDS[kind].acc)
    return a.astype(acc) @ b.astype(acc)
