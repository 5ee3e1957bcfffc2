"""The C emitter: a lowered function becomes one C translation unit (pure: it never compiles)."""

from __future__ import annotations

from collections.abc import Sequence

from ..lower.ir import PrimFunc
from .names import Namer
from .printer import CPrinter

HEADER = """\
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#if defined(__GNUC__) && !defined(__clang__)
/* local tiles are written before they are read, under guards gcc cannot match up; vector helpers
   are static, so the ABI note about wide vectors does not apply */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
/* glibc's vector math library (libmvec, within 4 ulp): gcc vectorizes loops calling these */
#define ASC_SIMD __attribute__((__simd__("notinbranch")))
#if __GLIBC_PREREQ(2, 22)
extern float expf(float) ASC_SIMD;
extern float logf(float) ASC_SIMD;
extern float powf(float, float) ASC_SIMD;
extern double exp(double) ASC_SIMD;
extern double log(double) ASC_SIMD;
extern double pow(double, double) ASC_SIMD;
#endif
#if __GLIBC_PREREQ(2, 35)
extern float tanhf(float) ASC_SIMD;
extern float erff(float) ASC_SIMD;
extern double tanh(double) ASC_SIMD;
extern double erf(double) ASC_SIMD;
#endif
#undef ASC_SIMD
#endif
"""

PORTABLE_HEADER = """\
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
"""

# Helpers of the timing harness. They sit at file scope, before any kernel parameter is declared,
# so a tensor called `nanosleep` cannot shadow the library function they call.
_HARNESS_HELPERS = """\
static void asc_sleep_ms(double ms) {{
  if (!(ms > 0)) return;
  struct timespec t;
  t.tv_sec = (time_t)(ms / 1e3);
  t.tv_nsec = (long)((ms - 1e3 * (double)t.tv_sec) * 1e6);
  nanosleep(&t, NULL); /* a signal may cut the pause short */
}}

static void asc_flush(unsigned char* buf, size_t bytes) {{
{pragma}  for (size_t i = 0; i < bytes; ++i) buf[i] = (unsigned char)(buf[i] + 1u);
}}"""

_BENCH = """\
int {name}__bench({params}int asc_number, int asc_repeat, double asc_min_repeat_ms,
    unsigned char* asc_flush_buf, size_t asc_flush_bytes, double asc_cooldown_ms, double* asc_times) {{
  double asc_elapsed;
  if (asc_number < 1) asc_number = 1;
  for (;;) {{ /* warm-up and calibration: grow number until one repeat lasts min_repeat_ms */
    asc_elapsed = {name}__time({args}asc_number);
    if (asc_elapsed < 0) return -1;
    if (1e3 * asc_elapsed >= asc_min_repeat_ms || asc_number == 2147483647) break;
    double asc_grow = asc_elapsed > 0 ? 1.2 * asc_min_repeat_ms / (1e3 * asc_elapsed) : 10.0;
    double asc_next = ceil((double)asc_number * (asc_grow < 10.0 ? asc_grow : 10.0));
    if (asc_next >= 2147483647.0) asc_number = 2147483647;
    else asc_number = asc_next > (double)asc_number ? (int)asc_next : asc_number + 1;
  }}
  for (int asc_r = 0; asc_r < asc_repeat; ++asc_r) {{
    asc_sleep_ms(asc_cooldown_ms);
    if (asc_flush_buf && asc_flush_bytes > 0) asc_flush(asc_flush_buf, asc_flush_bytes);
    asc_elapsed = {name}__time({args}asc_number);
    if (asc_elapsed < 0) return -1;
    asc_times[asc_r] = asc_elapsed / (double)asc_number;
  }}
  return asc_number;
}}"""


def function_name(name: str) -> str:
    """The C identifier the emitter gives a function called ``name``."""
    return Namer()(("func", name), name)


def timing_entries(
    name: str,
    params: Sequence[tuple[str, str]],
    num_threads: int = 1,
    sizes: Sequence[str] = (),
    scalars: Sequence[tuple[str, str]] = (),
) -> str:
    """The timing harness of kernel ``int <name>(T0* p0, ..., int n0, ..., S0 s0, ...)``, given
    ``params`` as (C type, name), the names of its ``int`` size parameters ``sizes`` and its scalar
    parameters ``scalars`` as (C type, name) (see ``emit_c``).

    Needs :data:`HEADER` (``time.h``, ``math.h``, ``stdlib.h``, POSIX 2008). Two entries:

    - ``double <name>__time(args..., int number)``: seconds for ``number`` calls, or -1 if the
      kernel returned non-zero.
    - ``int <name>__bench(args..., int number, int repeat, double min_repeat_ms, unsigned char*
      flush_buf, size_t flush_bytes, double cooldown_ms, double* times)``: first a warm-up and
      calibration run that grows ``number`` until one repeat lasts ``min_repeat_ms`` (it runs at
      least once, so ``min_repeat_ms`` = 0 is a single warm-up repeat); then ``repeat`` repeats of
      ``number`` calls, each after a ``cooldown_ms`` pause and, when ``flush_buf`` is not NULL, after
      writing ``flush_bytes`` of it (the caller sizes it beyond the last-level cache; with
      ``num_threads`` > 1 every kernel thread writes a share, evicting the per-core caches too).
      Writes seconds per call of each repeat to ``times``; returns the final ``number``, or -1 if
      the kernel returned non-zero.
    """
    decls = "".join(f"{ctype}* {pname}, " for ctype, pname in params)  # each with its comma
    decls += "".join(f"int {n}, " for n in sizes) + "".join(f"{c} {n}, " for c, n in scalars)
    names = [pname for _, pname in params] + list(sizes) + [n for _, n in scalars]
    args = "".join(f"{n}, " for n in names)
    call = ", ".join(names)
    pragma = f"  #pragma omp parallel for num_threads({num_threads})\n" if num_threads > 1 else ""
    timer = "\n".join(
        [
            f"double {name}__time({decls}int asc_number) {{",
            "  /* called through a volatile pointer: a function computing the same outputs from the same",
            "     inputs on every call must not be inlined and then run once for the whole loop (its",
            "     type the function's own: its read-only arguments are const) */",
            f"  __typeof__({name})* volatile asc_fn = {name};",
            "  struct timespec asc_t0, asc_t1;",
            "  clock_gettime(CLOCK_MONOTONIC, &asc_t0);",
            "  for (int asc_r = 0; asc_r < asc_number; ++asc_r) {",
            f"    if (asc_fn({call}) != 0) return -1.0;",
            "  }",
            "  clock_gettime(CLOCK_MONOTONIC, &asc_t1);",
            "  return (double)(asc_t1.tv_sec - asc_t0.tv_sec)",
            "         + 1e-9 * (double)(asc_t1.tv_nsec - asc_t0.tv_nsec);",
            "}",
        ]
    )
    return "\n\n".join(
        [_HARNESS_HELPERS.format(pragma=pragma), timer, _BENCH.format(name=name, params=decls, args=args)]
    )


#: the string constant naming the CPU extensions a kernel's intrinsics need (absent: none)
EXTENSIONS_SYMBOL = "asc_cpu_extensions"


def emit_c(
    func: PrimFunc,
    num_threads: int = 1,
    vector_bytes: int = 32,
    portable: bool = False,
    timing: bool | None = None,
) -> str:
    """C source for ``func``: ``int <name>(T* restrict arg, ..., int n, ...)`` returning 0, or -1
    when a temporary buffer cannot be allocated, plus the timing harness (:func:`timing_entries`)
    when ``timing`` (default: unless ``portable``).

    A kernel over tensors with symbolic shapes takes the values of its shape variables
    (``func.sizes``: in order of first appearance in the arguments' shapes) as ``int``
    parameters after the buffers, then its scalar arguments (``func.scalars``) as parameters of
    their dtypes.

    A kernel calling tensor intrinsics that need CPU extensions names them in the string
    ``asc_cpu_extensions`` (comma-separated), which the loader checks against the CPU.

    ``portable`` emits strict C99 without vector extensions, attributes or pragmas (and so
    without the harness, which needs POSIX clocks).
    """
    if timing is None:
        timing = not portable
    if timing and portable:
        raise ValueError("the timing harness is not strict C99: emit portable code without timing")
    printer = CPrinter(num_threads=num_threads, vector_bytes=vector_bytes, portable=portable)
    name, text = printer.function(func)
    parts = [f"/* generated by autosched: {name} */", PORTABLE_HEADER if portable else HEADER]
    if func.code.text():  # the user's C (extern stages, call_extern): headers, functions it calls
        parts.append(func.code.text())
    parts.extend(printer.helpers.values())
    parts.append(text)
    if printer.extensions:  # read by the loader, which refuses the kernel on a CPU without them
        parts.append(f'const char {EXTENSIONS_SYMBOL}[] = "{",".join(sorted(printer.extensions))}";')
    if timing:
        params = [(printer.ctype(b.dtype), printer.buf(b)) for b in func.args]
        sizes = [printer.var(v) for v in func.sizes]
        scalars = [(printer.ctype(v.dtype), printer.var(v)) for v in func.scalars]
        parts.append(timing_entries(name, params, num_threads, sizes, scalars))
    return "\n\n".join(parts) + "\n"


__all__ = ["EXTENSIONS_SYMBOL", "HEADER", "CPrinter", "emit_c", "function_name", "timing_entries"]
