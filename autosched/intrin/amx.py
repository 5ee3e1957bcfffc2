"""AMX tile intrinsics: the block of :mod:`.dot` (``c[mr, 16] (+)= a[mr, kc] . b``, B packed
``[K/g, 16, g]``) on Intel AMX tiles: ``_tile_dpbusd`` (u8 x s8 -> s32) or ``_tile_dpbf16ps``
(bf16 -> f32).

Every tile is 16 rows of 64 bytes: a 16 x 16 block of C (int32 or float32), a 16-row block of A
holding 64 bytes of ``k`` per row (loaded with A's row stride ``lda``), and a block of packed B
whose 16 rows are 64 consecutive bytes each (16 columns x ``g`` values of ``k``: the packed
layout's ``[K/g, 16, g]`` panel, so its row stride is 64). ``mr`` = 16, 32, 48 or 64 rows use 1
to 4 C tiles that share each B tile. Each call loads the tile configuration and releases the
tiles at its end (tile state left in use made every later context switch, and so every
multi-threaded kernel of the process, many times slower on the machine measured); Linux
lends the tile registers only after ``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA = 18)``,
which :func:`autosched.intrin.isa.request_amx` asks for once per process when a kernel using
AMX loads (kernels ask too, once per library, and take the C path where it is refused).
"""

from __future__ import annotations

from ..te.intrin import TensorIntrin
from .dot import KINDS, check_block, declare

AMX_C = """\
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
long syscall(long number, ...); /* not declared under _POSIX_C_SOURCE */
static int asc_amx_permitted(void) { /* once per library: Linux must lend the tile data state */
  static int state = 0;
  if (state == 0) state = syscall(SYS_arch_prctl, 0x1023, 18) == 0 ? 1 : -1;
  return state > 0;
}
__attribute__((target("amx-tile"))) static void asc_amx_configure(void) {
  struct { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; } cfg;
  memset(&cfg, 0, sizeof cfg); /* every autosched tile is 16 rows x 64 bytes */
  cfg.palette = 1;
  for (int t = 0; t < 8; ++t) { cfg.colsb[t] = 64; cfg.rows[t] = 16; }
  _tile_loadconfig(&cfg);
}"""


def _vector(name: str, kind: str, mr: int, kc: int) -> str:
    a_bytes = 1 if kind == "vnni" else 2
    a_t, b_t, c_t = ("uint8_t", "int8_t", "int32_t") if kind == "vnni" else ("uint16_t", "uint16_t", "float")
    op = "_tile_dpbusd" if kind == "vnni" else "_tile_dpbf16ps"
    feature = "amx-tile,amx-int8" if kind == "vnni" else "amx-tile,amx-bf16"
    k_tile = 64 // (1 if kind == "vnni" else 2)  # k per A tile row
    blocks = mr // 16
    lines = [
        f'__attribute__((target("{feature}"))) static void {name}({c_t}* restrict C, '
        f"const {a_t}* restrict A, const {b_t}* restrict B, int lda, int ldc, int acc) {{",
        f"  if (!asc_amx_permitted()) {{ {name[:-2]}_c(C, A, B, lda, ldc, acc); return; }}",
        "  asc_amx_configure();",
        "  if (acc) {",
        *(f"    _tile_loadd({r}, C + (long){16 * r} * ldc, ldc * 4);" for r in range(blocks)),
        "  } else {",
        *(f"    _tile_zero({r});" for r in range(blocks)),
        "  }",
        f"  for (int kb = 0; kb < {kc // k_tile}; ++kb) {{",
        f"    _tile_loadd(7, B + kb * {16 * k_tile}, 64);",
    ]
    for r in range(blocks):
        t = 4 + r % 3
        lines.append(f"    _tile_loadd({t}, A + (long){16 * r} * lda + kb * {k_tile}, lda * {a_bytes});")
        lines.append(f"    {op}({r}, {t}, 7);")
    lines += ["  }", *(f"  _tile_stored({r}, C + (long){16 * r} * ldc, ldc * 4);" for r in range(blocks))]
    lines += ["  _tile_release(); /* tile state left in use slows every context switch after it */", "}"]
    return "\n".join(lines)


def amx_intrin(kind: str, mr: int = 32, kc: int = 1024) -> TensorIntrin:
    """The ``mr x 16 x kc`` block of ``kind`` (``"vnni"``: u8 x s8 -> s32, ``"bf16"``: bf16 ->
    f32) on AMX tiles; ``mr`` is 16, 32, 48 or 64 and ``kc`` a multiple of 64 (int8) or 32
    (bf16). A kernel using it needs ``amx_tile`` and ``amx_int8`` or ``amx_bf16``."""
    d = check_block(kind, mr, kc, "amx_intrin", 64 // (1 if kind == "vnni" else 2) if kind in KINDS else 1)
    if mr not in (16, 32, 48, 64):
        raise ValueError(f"amx_intrin: mr must be 16, 32, 48 or 64 (1 to 4 C tiles), got {mr!r}")
    name = f"amx_{kind}_{mr}x{kc}"
    vector = AMX_C + "\n" + _vector(f"asc_{name}_v", kind, mr, kc)
    requires = ("amx_tile", "amx_int8" if kind == "vnni" else "amx_bf16")
    return declare(d, mr, kc, name, vector, requires)
