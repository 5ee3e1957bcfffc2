"""The AArch64 vector path of the NEON dot-product intrinsics (:mod:`.dot` kinds ``"sdot"``: s8 x s8
-> s32 and ``"udot"``: u8 x u8 -> s32): Armv8.2's ``sdot`` / ``udot`` (the ``dotprod`` extension,
``asimddp`` in ``/proc/cpuinfo``), through ``vdotq_s32`` / ``vdotq_u32`` of ``arm_neon.h``.

The block is the one every dot kind computes, ``c[mr, 16] (+)= a[mr, kc] . b`` over B packed
``[K/4, 16, 4]`` (:func:`.dot.pack_b` with group 4, the same layout as VNNI's): the 64 bytes of one
``ko`` are four 128-bit vectors of 4 columns x 4 ``k`` each, so a row of ``c`` is four int32x4
accumulators, and each ``sdot`` adds, per column, the 4 products of that column's ``k`` group with
the row's 4 values of ``a`` (one 32-bit word broadcast to every lane). ``mr`` rows take ``4 mr``
accumulators of AArch64's 32 vector registers (with 4 for B and one for A): ``mr`` <= 6 stays in
registers. ``udot`` sums in uint32 lanes, which are the int32 sums' bits (both wrap modulo 2^32).

Only this function is built for Armv8.2 + dotprod (a function target attribute), so the rest of a
kernel still runs, and checks the CPU, on a CPU without it. gcc's ``arm_neon.h`` declares the
intrinsics for such a function; clang's (up to 14 at least) only where the whole file is built
with dotprod (``-mcpu=cortex-a76``, ``-march=armv8.2-a+dotprod``), and without it the build stops
with one ``#error`` line.
"""

from __future__ import annotations

#: clang without dotprod: the one error line, and the C path in the vector's place so none follows;
#: clang with it (the whole file built for dotprod) takes no attribute: it knows no "arch=" there
GUARD = """\
#include <arm_neon.h>
#if defined(__clang__) && !defined(__ARM_FEATURE_DOTPROD)
#error "autosched: NEON sdot/udot intrinsics need gcc, or clang with -march=armv8.2-a+dotprod"
#define {name} {name_c}
#else
#ifndef ASC_NEON_DOTPROD
#ifdef __clang__
#define ASC_NEON_DOTPROD
#else
#define ASC_NEON_DOTPROD __attribute__((target("{attribute}")))
#endif
#endif
{vector}
#endif"""

#: gcc's target attribute: the intrinsics' own (a "+dotprod" alone mismatches them under -mcpu=cortex-a72)
ATTRIBUTE = "arch=armv8.2-a+dotprod"


def neon_vector(name: str, signed: bool, mr: int, kc: int) -> str:
    """C text defining ``name(C, A, B, lda, ldc, acc)`` (``name`` ends in ``_v``; the C path of the
    same block is ``..._c``): the ``mr x 16 x kc`` block with ``sdot`` (``signed``: int8 A and B)
    or ``udot`` (uint8), C int32 with row stride ``ldc``."""
    e, u = ("int8_t", "s") if signed else ("uint8_t", "u")  # u: the intrinsics' type suffix
    acc_t, vec8 = ("int32x4_t", "int8x16_t") if signed else ("uint32x4_t", "uint8x16_t")
    blocks = [(i, v, f"c{i}_{v}", f"C + (long){i} * ldc + {4 * v}") for i in range(mr) for v in range(4)]
    # udot's uint32 lanes hold the int32 sums' bits: C is loaded and stored reinterpreted
    load, store = ("{}", "{}") if signed else ("vreinterpretq_u32_s32({})", "vreinterpretq_s32_u32({})")
    lines = [
        f"ASC_NEON_DOTPROD static void {name}(int32_t* restrict C, "
        f"const {e}* restrict A, const {e}* restrict B, int lda, int ldc, int acc) {{",
        f"  {acc_t} {', '.join(c for _, _, c, _ in blocks)};",
        "  if (acc) {",
        *(f"    {c} = {load.format(f'vld1q_s32({at})')};" for _, _, c, at in blocks),
        "  } else {",
        *(f"    {c} = vdupq_n_{u}32(0);" for _, _, c, _ in blocks),
        "  }",
        f"  for (int ko = 0; ko < {kc // 4}; ++ko) {{",
        *(f"    const {vec8} b{v} = vld1q_{u}8(B + ko * 64 + {16 * v});" for v in range(4)),
        "    int32_t w;",
    ]
    for i in range(mr):
        lines.append(f"    memcpy(&w, A + (long){i} * lda + ko * 4, 4); /* row {i}'s 4 k, to every lane */")
        lines.append(f"    const {vec8} a{i} = vreinterpretq_{u}8_s32(vdupq_n_s32(w));")
        lines += [f"    c{i}_{v} = vdotq_{u}32(c{i}_{v}, b{v}, a{i});" for v in range(4)]
    lines += ["  }", *(f"  vst1q_s32({at}, {store.format(c)});" for _, _, c, at in blocks), "}"]
    name_c = name.removesuffix("_v") + "_c"
    return GUARD.format(name=name, name_c=name_c, attribute=ATTRIBUTE, vector="\n".join(lines))
