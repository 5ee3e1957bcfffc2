"""What an x86 core here retires per cycle for int8 and bf16 dot products, and what the blocks of
``autosched/intrin/dot_avx2.py`` (AVX2) and ``autosched/intrin/dot.py`` (AVX-512 VNNI) reach on
data in L1: the measurements behind their design.

    python benchmarks/bench_dot_rates.py [--cc gcc]

1. Instruction rates: 10 independent chains of ``vfmadd231ps``, ``vpmaddwd`` (with and without
   the ``vpaddd`` that accumulates it) and ``vpmaddubsw`` on ymm registers, in inline assembly:
   nanoseconds per instruction (two per cycle: 0.18-0.19 ns at 2.7 GHz).
2. The ``mr x 16 x 512`` block (``avx2_vector``) called 400,000 times on operands in L1, GOP/s,
   as generated and with the empty ``asm`` after each accumulation taken out (what gcc 12 spills).
3. Where the CPU has AVX-512 VNNI: the same chains of ``vfmadd231ps``, ``vpdpbusd`` and (with
   AVX512-BF16) ``vdpbf16ps`` on zmm registers, and the VNNI blocks of ``dot.py`` (16 rows x 16
   columns, 8 x 32) as generated (each accumulation an ``asm`` statement) and through the
   ``_mm512_dpbusd_epi32`` intrinsic instead (around which gcc 12 copies the accumulators).
x86-64 with AVX2. Results are appended to benchmarks/results/dot_rates.json.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from pathlib import Path

from common import cpu_name, write_results

from autosched.intrin.dot import VNNI, avx512_vector
from autosched.intrin.dot_avx2 import KEEP, avx2_vector
from autosched.intrin.isa import host_extensions

RATES = r"""
#include <stdio.h>
#include <time.h>
static double now(void) {
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9;
}
#define TEN(op) op("%%ymm0") op("%%ymm1") op("%%ymm2") op("%%ymm3") op("%%ymm4") \
                op("%%ymm5") op("%%ymm6") op("%%ymm7") op("%%ymm8") op("%%ymm9")
#define FMA(r) "vfmadd231ps %%ymm14, %%ymm15, " r "\n"
#define MADD(r) "vpmaddwd %%ymm14, %%ymm15, " r "\n"
#define MADD_ADD(r) "vpmaddwd %%ymm14, %%ymm15, %%ymm13\n vpaddd %%ymm13, " r ", " r "\n"
#define MUBS(r) "vpmaddubsw %%ymm14, %%ymm15, " r "\n"
#define TIME(name, op) { double t = now(); \
  for (long n = 0; n < N; ++n) __asm__ volatile(TEN(op) ::: "memory"); \
  printf("%s %.3f\n", name, (now() - t) / N / 10 * 1e9); }
int main(void) {
  const long N = 100000000;
  YMM_TIMES
  return 0;
}
"""

BLOCK = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
KERNEL
static double now(void) {
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(void) {
  static uint8_t A[8 * 512]; static int8_t B[512 * 16]; static int32_t C[8 * 16];
  for (int i = 0; i < 8 * 512; ++i) A[i] = (uint8_t)rand();
  for (int i = 0; i < 512 * 16; ++i) B[i] = (int8_t)rand();
  const long R = 400000;
  double t = now();
  for (long r = 0; r < R; ++r) { kern(C, A, B, 512, 16, 1); __asm__ volatile("" :: "r"(C) : "memory"); }
  printf("%.1f\n", 2.0 * MR * 16 * 512 * R / (now() - t) / 1e9);
  return 0;
}
"""


YMM_TIMES = (
    'TIME("vfmadd231ps", FMA) TIME("vpmaddwd", MADD) TIME("vpmaddwd+vpaddd", MADD_ADD) '
    'TIME("vpmaddubsw", MUBS)'
)
ZMM_RATES = RATES.replace("YMM_TIMES", 'TIME("zmm vfmadd231ps", FMA) TIME("zmm vpdpbusd", DPBUSD) BF16_TIME')
ZMM_RATES = ZMM_RATES.replace("ymm", "zmm").replace(
    "#define TIME", '#define DPBUSD(r) "vpdpbusd %%zmm14, %%zmm15, " r "\\n"\n'
    '#define DPBF16(r) "vdpbf16ps %%zmm14, %%zmm15, " r "\\n"\n#define TIME',
)

VNNI_BLOCK = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
KERNEL
static double now(void) {
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9;
}
int main(void) {
  static uint8_t A[MR * 512] __attribute__((aligned(64)));
  static int8_t B[512 * COLS] __attribute__((aligned(64)));
  static int32_t C[MR * COLS] __attribute__((aligned(64)));
  for (int i = 0; i < MR * 512; ++i) A[i] = (uint8_t)rand();
  for (int i = 0; i < 512 * COLS; ++i) B[i] = (int8_t)rand();
  const long R = 200000;
  double t = now();
  for (long r = 0; r < R; ++r) { kern(C, A, B, 512, COLS, 1); __asm__ volatile("" :: "r"(C) : "memory"); }
  printf("%.1f\n", 2.0 * MR * COLS * 512 * R / (now() - t) / 1e9);
  return 0;
}
"""
#: dot.py's accumulation as gcc sees it through the intrinsic
ASM_STEP = re.compile(r'__asm__\("vpdpbusd %2, %1, %0" : "\+v"\((\w+)\) : "v"\(a\), "v"\((\w+)\)\);')


def _avx512(cc: str, folder: Path, out: dict[str, object]) -> None:
    bf16 = "avx512_bf16" in host_extensions()
    source = ZMM_RATES.replace("BF16_TIME", 'TIME("zmm vdpbf16ps", DPBF16)' if bf16 else "")
    rates = dict(line.rsplit(" ", 1) for line in _run(cc, source, folder, "zmm").splitlines())
    out["zmm_ns_per_instruction"] = {k: float(v) for k, v in rates.items()}
    for name, ns in rates.items():
        print(f"{name:22s} {float(ns):.3f} ns per instruction")
    blocks = {}
    for mr, cols in ((16, 16), (8, 32)):
        kernel = "#include <immintrin.h>\n" + avx512_vector("kern", VNNI, mr, 512, cols)
        plain = ASM_STEP.sub(r"\1 = _mm512_dpbusd_epi32(\1, a, \2);", kernel)
        for label, text in (("as generated", kernel), ("intrinsic", plain)):
            head = f"#define MR {mr}\n#define COLS {cols}\n"
            gops = float(_run(cc, VNNI_BLOCK.replace("KERNEL", head + text), folder, f"vnni{mr}"))
            blocks[f"{mr}x{cols} {label}"] = gops
            print(f"VNNI block {mr} x {cols} x 512, {label:12s} {gops:7.1f} GOP/s")
    out["vnni_block_gops"] = blocks


def _run(cc: str, source: str, folder: Path, name: str) -> str:
    (folder / f"{name}.c").write_text(source)
    exe = folder / name
    subprocess.run([cc, "-O3", "-march=native", "-o", str(exe), str(folder / f"{name}.c")], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cc", default="gcc")
    args = ap.parse_args()
    out: dict[str, object] = {"cc": args.cc}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        source = RATES.replace("YMM_TIMES", YMM_TIMES)
        rates = dict(line.split() for line in _run(args.cc, source, folder, "rates").splitlines())
        out["ns_per_instruction"] = {k: float(v) for k, v in rates.items()}
        for name, ns in rates.items():
            print(f"{name:18s} {float(ns):.3f} ns per instruction")
        blocks = {}
        for mr in (2, 3):
            kernel = avx2_vector("kern", mr, 512)
            plain = re.sub(re.escape(KEEP).replace(r"\{c\}", r"c\d_\d"), "", kernel)
            for label, text in (("as generated", kernel), ("without the asm", plain)):
                source = BLOCK.replace("KERNEL", f"#define MR {mr}\n{text}")
                gops = float(_run(args.cc, source, folder, f"block{mr}"))
                blocks[f"mr={mr} {label}"] = gops
                print(f"block {mr} x 16 x 512, {label:15s} {gops:6.1f} GOP/s")
        out["block_gops"] = blocks
        if "avx512_vnni" in host_extensions():
            _avx512(args.cc, folder, out)
    print(cpu_name())
    write_results("dot_rates", out)


if __name__ == "__main__":
    main()
