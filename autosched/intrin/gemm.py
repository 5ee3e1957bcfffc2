"""A register-blocked GEMM micro-kernel as a tensor intrinsic: ``C[mr, nr] (+)= A[mr, kc] @ B[kc, nr]``
with row strides ``lda``, ``ldb``, ``ldc`` (unit column strides).

The C holds an ``mr x (nr / W)`` block of vector accumulators (W lanes) that stay in registers
over the ``kc`` loop: per step, ``nr / W`` vector loads of B, one broadcast of each of A's ``mr``
values, and ``mr * nr / W`` fused multiply-adds. Implementations:

- x86-64: AVX-512F and AVX2+FMA written with ``immintrin.h`` intrinsics, each in a function with
  its own ``__attribute__((target(...)))``, chosen per call from the CPU
  (``__builtin_cpu_supports``), so the kernel builds without ``-march=native`` and runs on any x86;
- aarch64: NEON (``arm_neon.h``), chosen at compile time;
- a portable C99 fallback (what ``portable=True`` builds and other CPUs use; ``isa="portable"``
  forces it).
An ISA whose vector width does not divide ``nr`` is left out (the next one is used).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import expr as te
from ..dtypes import dtype as _dtype
from ..te.buffer import decl_buffer
from ..te.intrin import CImpl, TensorIntrin, decl_tensor_intrin

ISAS = ("auto", "portable", "avx2", "avx512", "neon")
_X86 = "#if defined(__GNUC__) && defined(__x86_64__)"
_NEON = "#if defined(__aarch64__) && defined(__ARM_NEON)"
PARAMS = "C, A, B, lda, ldb, ldc"


@dataclass(frozen=True, slots=True)
class VectorISA:
    """How one instruction set writes the micro-kernel's vector operations (``{T}`` lanes type)."""

    name: str
    guard: str
    attribute: str
    bytes: int
    vtype: dict[str, str]
    load: str  # {p}: pointer
    store: str  # {p}, {v}
    zero: str
    fma: str  # {c} += {a} (scalar pointer) * {b}
    suffix: dict[str, str]


def _x86(name: str, features: str, bits: int) -> VectorISA:
    """AVX2 (256-bit) or AVX-512 (512-bit): the same intrinsics with another width prefix."""
    mm = f"_mm{bits}"
    return VectorISA(
        name, _X86, f'__attribute__((target("{features}"))) ', bits // 8,
        {"float32": f"__m{bits}", "float64": f"__m{bits}d"},
        mm + "_loadu_{s}({p})", mm + "_storeu_{s}({p}, {v})", mm + "_setzero_{s}()",
        "{c} = " + mm + "_fmadd_{s}(" + mm + "_set1_{s}(*({a})), {b}, {c})",
        {"float32": "ps", "float64": "pd"},
    )  # fmt: skip


AVX2 = _x86("avx2", "avx2,fma", 256)
AVX512 = _x86("avx512", "avx512f", 512)
NEON = VectorISA(
    "neon", _NEON, "", 16, {"float32": "float32x4_t", "float64": "float64x2_t"},
    "vld1q_{s}({p})", "vst1q_{s}({p}, {v})", "vmovq_n_{s}(0)",
    "{c} = vfmaq_n_{s}({c}, {b}, *({a}))", {"float32": "f32", "float64": "f64"},
)  # fmt: skip
_BY_ISA = {
    "auto": (AVX512, AVX2, NEON),
    "portable": (),
    "avx2": (AVX2,),
    "avx512": (AVX512,),
    "neon": (NEON,),
}


def _signature(name: str, ctype: str, attribute: str = "") -> str:
    return (
        f"{attribute}static void {name}({ctype}* restrict C, const {ctype}* restrict A, "
        f"const {ctype}* restrict B, int lda, int ldb, int ldc, int acc)"
    )


def portable_kernel(name: str, mr: int, nr: int, kc: int, ctype: str) -> str:
    """The C99 fallback: an ``mr x nr`` local accumulator tile."""
    return f"""{_signature(name, ctype)} {{
  {ctype} t[{mr}][{nr}];
  for (int i = 0; i < {mr}; ++i)
    for (int j = 0; j < {nr}; ++j) t[i][j] = acc ? C[(long)i * ldc + j] : ({ctype})0;
  for (int k = 0; k < {kc}; ++k) {{
    const {ctype}* b = B + (long)k * ldb;
    for (int i = 0; i < {mr}; ++i) {{
      const {ctype} a = A[(long)i * lda + k];
      for (int j = 0; j < {nr}; ++j) t[i][j] += a * b[j];
    }}
  }}
  for (int i = 0; i < {mr}; ++i)
    for (int j = 0; j < {nr}; ++j) C[(long)i * ldc + j] = t[i][j];
}}"""


def vector_kernel(isa: VectorISA, name: str, mr: int, nr: int, kc: int, dtype: str) -> str:
    """The kernel for one ISA, fully unrolled over the register block."""
    ctype, vt = _dtype(dtype).c_name, isa.vtype[dtype]
    s = isa.suffix[dtype]
    width = isa.bytes // _dtype(dtype).bytes
    nv = nr // width
    acc = [f"c{i}_{v}" for i in range(mr) for v in range(nv)]
    lines = [_signature(name, ctype, isa.attribute) + " {", f"  {vt} {', '.join(acc)};", "  if (acc) {"]
    lines += [
        f"    c{i}_{v} = {isa.load.format(s=s, p=f'C + (long){i} * ldc + {v * width}')};"
        for i in range(mr)
        for v in range(nv)
    ]
    lines += ["  } else {", *(f"    {c} = {isa.zero.format(s=s)};" for c in acc), "  }"]
    lines += [f"  for (int k = 0; k < {kc}; ++k) {{", f"    const {ctype}* bk = B + (long)k * ldb;"]
    lines += [f"    const {vt} b{v} = {isa.load.format(s=s, p=f'bk + {v * width}')};" for v in range(nv)]
    for i in range(mr):
        for v in range(nv):
            fma = isa.fma.format(c=f"c{i}_{v}", a=f"A + (long){i} * lda + k", b=f"b{v}", s=s)
            lines.append(f"    {fma};")
    lines.append("  }")
    lines += [
        f"  {isa.store.format(s=s, p=f'C + (long){i} * ldc + {v * width}', v=f'c{i}_{v}')};"
        for i in range(mr)
        for v in range(nv)
    ]
    return "\n".join([*lines, "}"])


def preamble(tag: str, mr: int, nr: int, kc: int, dtype: str, isas: tuple[VectorISA, ...]) -> str:
    """File-scope C: the kernels and the dispatching ``asc_gemm_<tag>``."""
    ctype = _dtype(dtype).c_name
    usable = [isa for isa in isas if nr % (isa.bytes // _dtype(dtype).bytes) == 0]
    parts = [portable_kernel(f"asc_gemm_{tag}_c", mr, nr, kc, ctype)]
    head = {_X86: "#include <immintrin.h>", _NEON: "#include <arm_neon.h>"}
    for guard in dict.fromkeys(isa.guard for isa in usable):
        body = [
            vector_kernel(isa, f"asc_gemm_{tag}_{isa.name}", mr, nr, kc, dtype)
            for isa in usable
            if isa.guard == guard
        ]
        parts.append("\n".join([guard, head[guard], *body, "#endif"]))
    dispatch = [_signature(f"asc_gemm_{tag}", ctype).replace("static void", "static inline void") + " {"]
    for isa in usable:
        call = f"asc_gemm_{tag}_{isa.name}({PARAMS}, acc); return;"
        if isa.guard == _X86:
            feature = ' && __builtin_cpu_supports("fma")' if isa is AVX2 else ""
            test = f'__builtin_cpu_supports("{"avx512f" if isa is AVX512 else "avx2"}"){feature}'
            dispatch += [isa.guard, f"  if ({test}) {{ {call} }}", "#endif"]
        else:
            dispatch += [isa.guard, f"  {call}", "#endif"]
    dispatch += [f"  asc_gemm_{tag}_c({PARAMS}, acc);", "}"]
    return "\n\n".join([*parts, "\n".join(dispatch)])


def gemm_ukernel(mr: int, nr: int, kc: int, dtype: str = "float32", isa: str = "auto") -> TensorIntrin:
    """The intrinsic ``c[i, j] = sum(a[i, k] * b[k, j], k)`` over an ``mr x nr x kc`` block, passed
    with row strides ``lda``, ``ldb``, ``ldc`` (see the module docstring for the implementations;
    ``isa`` keeps only the named one and the fallback). Tensorize the loop over ``mr`` rows of a
    matmul whose inner loops are (i: mr, j: nr, k: kc)."""
    if isa not in ISAS:
        raise ValueError(f"gemm_ukernel: isa must be one of {', '.join(ISAS)}, got {isa!r}")
    if dtype not in ("float32", "float64"):
        raise ValueError(f"gemm_ukernel: dtype must be float32 or float64, got {dtype!r}")
    for what, n in (("mr", mr), ("nr", nr), ("kc", kc)):
        if not isinstance(n, int) or isinstance(n, bool) or not 0 < n <= 4096:
            raise ValueError(f"gemm_ukernel: {what} must be an int in [1, 4096], got {n!r}")
    a = te.placeholder((mr, kc), dtype, name="a")
    b = te.placeholder((kc, nr), dtype, name="b")
    k = te.reduce_axis(kc, name="k")
    c = te.compute((mr, nr), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="c")
    binds = {
        a: decl_buffer(a.shape, dtype, "A", strides=[te.var("lda"), 1]),
        b: decl_buffer(b.shape, dtype, "B", strides=[te.var("ldb"), 1]),
        c: decl_buffer(c.shape, dtype, "C", strides=[te.var("ldc"), 1]),
    }
    tag = f"{mr}x{nr}x{kc}_{dtype}_{isa}"
    reset = f"  for (int i = 0; i < {mr}; ++i)\n    for (int j = 0; j < {nr}; ++j) C[(long)i * ldc + j] = 0;"
    impl = CImpl(
        body=f"  asc_gemm_{tag}({PARAMS}, 0);",
        reset=reset,
        update=f"  asc_gemm_{tag}({PARAMS}, 1);",
        preamble=preamble(tag, mr, nr, kc, dtype, _BY_ISA[isa]),
        portable_preamble=preamble(tag, mr, nr, kc, dtype, ()),
    )
    return decl_tensor_intrin(c.op, impl, name=f"gemm_ukernel_{tag}", binds=binds)
