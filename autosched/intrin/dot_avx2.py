"""The AVX2 path of the 8-bit dot-product blocks (:mod:`.dot` kinds ``"vnni"``: u8 x s8, and, on x86,
``"sdot"``: s8 x s8 and ``"udot"``: u8 x u8, all -> s32), for x86 CPUs without AVX-512 VNNI (AMD
Zen 2 and 3, Intel before Ice Lake): the same block, ``c[mr, 16] (+)= a[mr, kc] . b`` over B
packed ``[K/4, 16, 4]``, from ``vpmaddwd``.

``vpmaddwd`` multiplies 16 int16 pairs and adds each pair into an int32 lane. Widened to int16
(unsigned bytes zero-extended, signed ones sign-extended), no product or pair sum can overflow, so the sums
are exact and wrap only where numpy's int32 sums do. The faster-looking ``vpmaddubsw`` (u8 x s8
pairs summed in int16) saturates at 32,767 where two products of 255 and 127 exceed it, so it
would not compute what the expression defines; ``vpmaddwd`` runs two per cycle, as the FMA does,
and each does 16 multiply-adds to the FMA's 8: twice float32's peak.

The 64 bytes of one ``ko`` are four loads of 16 bytes (4 columns x 4 ``k``), each widened to 16
int16; a row's 4 bytes of ``a`` are broadcast and widened to the same pattern, so each
``vpmaddwd`` leaves two partial sums per column (``k`` 0-1 and 2-3). A row keeps four such
accumulators (16 columns); at the end ``vphaddd`` adds the pairs and a permutation puts the
columns in order. ``mr`` rows take ``4 mr`` of AVX2's 16 vector registers, one more for each
row's ``a`` and one for B: ``mr`` <= 3 stays in registers.
"""

from __future__ import annotations

from ..dtypes import dtype as _dtype
from ..te.intrin import TensorIntrin
from .dot import KINDS, check_block, declare

#: the kinds this path computes (8-bit inputs; bf16 has no AVX2 path)
INT8_KINDS = ("vnni", "sdot", "udot")

#: what the vector path needs: ``/proc/cpuinfo`` name and gcc's target attribute
REQUIRES = ("avx2",)
ATTRIBUTE = "avx2"

#: after each accumulation: without it gcc 12 computes all the products first, which needs more
#: registers than AVX2 has, and spills (the block ran at 60 GOP/s instead of 83 here)
KEEP = '__asm__("" : "+x"({c}));'


def avx2_vector(name: str, mr: int, kc: int, kind: str = "vnni") -> str:
    """C text defining ``name(C, A, B, lda, ldc, acc)``: the ``mr x 16 x kc`` block of ``kind``
    (module docstring), C int32 with row stride ``ldc``."""
    d = KINDS[kind]
    a_t, b_t = (_dtype(t).c_name for t in (d.a_dtype, d.b_dtype))
    widen_b = "_mm256_cvtepi8_epi16" if d.b_dtype == "int8" else "_mm256_cvtepu8_epi16"
    accs = [f"c{i}_{v}" for i in range(mr) for v in range(4)]
    lines = [
        "#include <immintrin.h>",
        f'__attribute__((target("{ATTRIBUTE}"))) static void {name}(int32_t* restrict C, '
        f"const {a_t}* restrict A, const {b_t}* restrict B, int lda, int ldc, int acc) {{",
        f"  __m256i {', '.join(accs)};",
        *(f"  {c} = _mm256_setzero_si256();" for c in accs),
        "  const __m256i widen = _mm256_setr_epi8(" + ", ".join(["0, -1, 1, -1, 2, -1, 3, -1"] * 4) + ");",
        f"  for (int ko = 0; ko < {kc // 4}; ++ko) {{",
    ]
    for i in range(mr):  # a0 a1 a2 a3 to every 32-bit lane, then each byte to an int16
        at = f"(A + (long){i} * lda + ko * 4)"
        if d.a_dtype == "uint8":  # one shuffle: the high bytes zero
            a = f"_mm256_shuffle_epi8(_mm256_castps_si256(_mm256_broadcast_ss((const float*){at})), widen)"
        else:  # sign-extended from the 4 bytes repeated
            a = f"_mm256_cvtepi8_epi16(_mm_castps_si128(_mm_broadcast_ss((const float*){at})))"
        lines.append(f"    const __m256i a{i} = {a};")
    for v in range(4):  # columns 4v .. 4v+3, their 4 k each, widened
        lines.append(
            f"    const __m256i b{v} = {widen_b}("
            f"_mm_loadu_si128((const __m128i*)(B + ko * 64 + {16 * v})));"
        )
        for i in range(mr):
            c = f"c{i}_{v}"
            product = f"_mm256_madd_epi16(a{i}, b{v})"
            lines.append(f"    {c} = _mm256_add_epi32({c}, {product}); {KEEP.format(c=c)}")
    lines.append("  }")
    for i in range(mr):
        for half in range(2):  # columns 0-7, then 8-15: pairs added, then put in column order
            at = f"(__m256i*)(C + (long){i} * ldc + {8 * half})"
            lines.append(
                f"  {{ __m256i s = _mm256_permute4x64_epi64("
                f"_mm256_hadd_epi32(c{i}_{2 * half}, c{i}_{2 * half + 1}), 0xD8);"
            )
            lines.append(f"    if (acc) s = _mm256_add_epi32(s, _mm256_loadu_si256({at}));")
            lines.append(f"    _mm256_storeu_si256({at}, s); }}")
    return "\n".join([*lines, "}"])


def avx2_dot_intrin(mr: int, kc: int, kind: str = "vnni") -> TensorIntrin:
    """The ``mr x 16 x kc`` block of ``kind`` (``"vnni"``: u8 x s8, ``"sdot"``: s8 x s8, ``"udot"``:
    u8 x u8 -> s32; the kind's computation and packed layout) through AVX2's ``vpmaddwd``; a
    kernel using it needs AVX2."""
    if kind not in INT8_KINDS:
        raise ValueError(f"avx2_dot_intrin: kind must be one of {', '.join(INT8_KINDS)}, got {kind!r}")
    d = check_block(kind, mr, kc, "avx2_dot_intrin", 1)
    name = f"dot_avx2_{mr}x{kc}" if kind == "vnni" else f"dot_avx2_{kind}_{mr}x{kc}"
    return declare(d, mr, kc, name, avx2_vector(f"asc_{name}_v", mr, kc, kind), REQUIRES)
