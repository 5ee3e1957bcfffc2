"""Export a tuned program as a standalone C kernel for embedded builds (no autosched runtime).

``export_kernel(record, "out/")`` writes::

    kernel.c  kernel.h        the tuned program, renamed (``matmul_kernel``)
    reference.c reference.h   the same workload unscheduled, in portable C: an independent check
    main.c                    random inputs, kernel vs reference, then timing (ms, GFLOP/s)
    Makefile                  honors CC and CFLAGS; ``make``, ``make run``, ``make clean``

The kernel keeps the source that was measured (GNU C vector extensions, OpenMP when the program is
parallel) unless ``portable=True``, which emits strict C99. Cross-compile with
``make CC=aarch64-linux-gnu-gcc CFLAGS=-O2`` and run ``./bench`` on the board (or under qemu with
``make run RUN_WITH="qemu-aarch64 -L /usr/aarch64-linux-gnu"``).

A record comes from a log, and a log may be crafted: only checked values reach the files. The
target is read strictly (known options, whitelisted compiler flags), the compiler is this
machine's (never the log's), text from the log goes into comments only after
:func:`~autosched.diagnostics.printable`, and Makefile variables hold plain words only.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ..diagnostics import printable, warn
from ..dtypes import dtype as dtype_info
from ..emit_c import function_name
from ..expr import shape_vars, static_shape
from ..intrin.isa import HWCAPS, c_cpu_check, steps_extensions
from ..ops import Workload
from ..records.check import logged_target
from ..records.log import Record, RecordWarning
from ..runner.kernel import ArgSpec
from ..target import Target
from ..task import Task
from .makefile import make_comment, make_settings
from .user_code import with_code

#: relative tolerance by float dtype, as in the tuner's check; the absolute one is this times
#: max(1, max |expected|). Other dtypes compare exactly.
TOLERANCE: dict[str, float] = {"float16": 1e-2, "float32": 1e-3, "float64": 1e-9}

EXECUTABLE = "bench"

#: C helpers drawing input values, by kind of dtype (main.c defines only those it uses)
GENERATORS: dict[str, tuple[str, str]] = {
    "float": (
        "uniform()",
        "static double uniform(void) { return (double)(next_random() >> 11) / 4503599627370496.0 - 1.0; }\n",
    ),
    "int": ("integer()", "static int integer(void) { return (int)(next_random() % 9u) - 4; }\n"),
    "bool": ("(next_random() & 1u)", ""),
}


def _comment(text: str) -> str:
    """``text`` made safe inside a C block comment: printable (no newline, hence no line splice),
    no ``*/``, no trigraph (``??/`` is a backslash in strict C99), no backslash at its end."""
    safe = printable(text, limit=400).replace("*/", "* /").replace("??", "?\\?")
    return safe + "." if safe.endswith("\\") else safe


def function_params(source: str, name: str) -> str:
    """The parameter list of ``int name(...)`` in ``source`` (an internal error if it is absent)."""
    m = re.search(rf"^int {re.escape(name)}\((.*)\) \{{$", source, re.MULTILINE)
    if m is None:
        raise RuntimeError(f"emitted source has no function {name!r}")
    return m.group(1)


def with_header(source: str, name: str, header: str) -> str:
    """``source`` including ``header`` just before the function, so the compiler checks the prototype."""
    m = re.search(rf"^int {re.escape(name)}\(", source, re.MULTILINE)
    assert m is not None, "checked by function_params"
    return f'{source[: m.start()]}#include "{header}"\n\n{source[m.start() :]}'


def header_text(guard: str, name: str, params: str, doc: list[str]) -> str:
    """A header declaring ``int name(params)`` (without ``restrict``, so C++ can include it too)."""
    lines = ["/*", *(f" * {_comment(line)}".rstrip() for line in doc), " */"]
    lines += [f"#ifndef {guard}", f"#define {guard}", "", "#include <stdint.h>", ""]
    lines += ['#ifdef __cplusplus\nextern "C" {\n#endif', ""]
    lines += [f"int {name}({params.replace('* restrict ', '* ')});", ""]
    lines += ["#ifdef __cplusplus\n}\n#endif", "", f"#endif /* {guard} */", ""]
    return "\n".join(lines)


def _arg_lines(specs: list[ArgSpec]) -> list[str]:
    width = max(len(s.name) for s in specs)
    return [
        f"  {s.name:<{width}}  {s.dtype}{list(s.shape)}  {'output' if s.is_output else 'input'}"
        for s in specs
    ]


def _kind(spec: ArgSpec) -> str:
    """The key of :data:`GENERATORS` for the argument's dtype."""
    if spec.dtype == "bool":
        return "bool"
    return "float" if dtype_info(spec.dtype).is_float else "int"


def _fill(var: str, spec: ArgSpec, count: int) -> str:
    """C statements filling input ``var`` with deterministic pseudo-random values."""
    value = GENERATORS[_kind(spec)][0]
    return f"  for (i = 0; i < {count}u; ++i) {var}[i] = ({dtype_info(spec.dtype).c_name}){value};"


def _check(k: int, spec: ArgSpec, count: int) -> str:
    """C statements comparing output ``k`` of the kernel with the reference's."""
    tol = TOLERANCE.get(spec.dtype, 0.0)
    label = re.sub(r"[^A-Za-z0-9_.]", "_", spec.name)
    return f"""\
  scale = 1.0; max_err = 0.0; bad = 0;
  for (i = 0; i < {count}u; ++i) if (fabs((double)r{k}[i]) > scale) scale = fabs((double)r{k}[i]);
  for (i = 0; i < {count}u; ++i) {{
    double got = (double)a{k}[i], want = (double)r{k}[i], err = fabs(got - want);
    if (got == want || (got != got && want != want)) continue;
    if (err > max_err || err != err) max_err = err;
    if (!(err <= {tol!r} * (scale + fabs(want)))) ++bad;
  }}
  printf("output {label}: max abs error %.3g, %zu of %zu elements outside tolerance\\n",
         max_err, bad, (size_t){count}u);
  failed |= bad != 0;
"""


MAIN_HEAD = """\
/* generated by autosched: checks {kernel} against {reference}, then times it. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernel.h"
#include "reference.h"

#ifndef REPEATS
#define REPEATS 7 /* timed repeats; the median is reported */
#endif
#ifndef MIN_REPEAT_MS
#define MIN_REPEAT_MS 20.0 /* each repeat runs the kernel often enough to last this long */
#endif
#define FLOPS {flops:.1f} /* floating-point operations of one run of {workload} */

static uint64_t rng_state = UINT64_C(0x9E3779B97F4A7C15);

/* xorshift64*: the same inputs on every machine */
static uint64_t next_random(void) {{
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * UINT64_C(0x2545F4914F6CDD1D);
}}

{generators}
static void* allocate(size_t count, size_t size) {{
  void* p = calloc(count ? count : 1u, size);
  if (p == NULL) {{
    fprintf(stderr, "out of memory\\n");
    exit(2);
  }}
  return p;
}}

static double seconds(void) {{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}}

static int by_value(const void* a, const void* b) {{
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}}

/* seconds for `number` runs of the kernel; exits if the kernel runs out of memory */
static double run_kernel({params}, long number) {{
  long n;
  double t0 = seconds();
  for (n = 0; n < number; ++n) {{
    if ({kernel}({args}) != 0) {{
      fprintf(stderr, "{kernel}: out of memory\\n");
      exit(2);
    }}
  }}
  return seconds() - t0;
}}

int main(void) {{
  size_t i;
  int failed = 0;
  double scale, max_err, times[REPEATS], dt;
  size_t bad;
  long number = 1;
  int r;
"""

MAIN_TAIL = """\
  if (failed) {{
    printf("check: FAILED\\n");
    return 1;
  }}
  printf("check: OK\\n");

  /* warm-up and calibration: raise `number` until one repeat lasts MIN_REPEAT_MS */
  while ((dt = run_kernel({args}, number)) * 1e3 < MIN_REPEAT_MS && number < (1L << 30)) {{
    double want = number * MIN_REPEAT_MS / (dt > 0.0 ? dt * 1e3 : 1e-3) * 1.1 + 1.0;
    number = want < (double)(1L << 30) ? (long)want : (1L << 30);
  }}
  for (r = 0; r < REPEATS; ++r) times[r] = run_kernel({args}, number) / (double)number;
  qsort(times, REPEATS, sizeof(double), by_value);
  dt = REPEATS % 2 ? times[REPEATS / 2] : 0.5 * (times[REPEATS / 2 - 1] + times[REPEATS / 2]);
  printf("time: %.6f ms  %.3f GFLOP/s  (median of %d repeats x %ld runs)\\n", dt * 1e3,
         FLOPS / dt * 1e-9, REPEATS, number);
  return 0;
}}
"""


def main_c(
    task: Task, kernel: str, reference: str, sizes: Sequence[int] = (), extensions: Sequence[str] = ()
) -> str:
    """main.c; ``sizes`` are the values a symbolic kernel gets after its arrays. It first checks that
    the CPU has the ``extensions`` the kernel's intrinsics need that Linux's hwcaps show (AArch64's
    ``asimddp``: :func:`~autosched.intrin.isa.c_cpu_check`), else exits with status 5 and one line."""
    specs = task.arg_specs()
    counts = [math.prod(static_shape(s.shape)) for s in specs]
    outputs = [k for k, s in enumerate(specs) if s.is_output]
    kernel_args = ", ".join(f"a{k}" for k in range(len(specs)))
    ref_args = ", ".join(f"r{k}" if specs[k].is_output else f"a{k}" for k in range(len(specs)))
    # run_kernel's own parameters: the kernel's, renamed a0..an so main.c never depends on tensor names
    ctypes = [dtype_info(s.dtype).c_name for s in specs]
    run_params = ", ".join(f"{t}* a{k}" for k, t in enumerate(ctypes))
    text = MAIN_HEAD.format(
        kernel=kernel,
        reference=reference,
        flops=float(task.flops()),
        workload=_comment(str(task.workload)),
        params=run_params,
        args=kernel_args,
        generators="".join(sorted({GENERATORS[_kind(s)][1] for s in specs if not s.is_output})),
    )
    call = kernel_args + "".join(f", {n}" for n in sizes)
    text = text.replace(f"{kernel}({kernel_args})", f"{kernel}({call})")
    checked = [e for e in extensions if e in HWCAPS]
    body = ["  if (asc_cpu_check() != 0) return 5;"] if checked else []
    if checked:  # after the feature macros and includes, before main
        text = text.replace(
            "\nint main(void) {", "\n" + c_cpu_check(tuple(checked), kernel) + "\n\nint main(void) {", 1
        )
    for k, (spec, ctype, count) in enumerate(zip(specs, ctypes, counts, strict=True)):
        body.append(
            f"  {ctype}* a{k} = ({ctype}*)allocate({count}u, sizeof({ctype})); /* {_comment(str(spec))} */"
        )
        if spec.is_output:
            body.append(f"  {ctype}* r{k} = ({ctype}*)allocate({count}u, sizeof({ctype}));")
            # elements the kernel never writes then fail the check: NaN bytes, or 77 for integers
            fill = "0xFF" if dtype_info(spec.dtype).is_float else "0x4D"
            body.append(f"  memset(a{k}, {fill}, {count}u * sizeof({ctype}));")
    body.append("")
    body += [_fill(f"a{k}", specs[k], counts[k]) for k in range(len(specs)) if not specs[k].is_output]
    body.append(f"  if ({reference}({ref_args}) != 0 || {kernel}({call}) != 0) {{")
    body.append('    fprintf(stderr, "out of memory\\n");\n    return 2;\n  }')
    body += [_check(k, specs[k], counts[k]) for k in outputs]
    return text + "\n".join(body) + "\n" + MAIN_TAIL.format(args=kernel_args)


def _makefile(target: Target, portable: bool, openmp: bool, about: list[str]) -> str:
    about_lines = "".join(f"# {make_comment(line)}\n" for line in about[1:])
    return f"""\
# generated by autosched: {make_comment(about[0])}
{about_lines}#   make                                  build ./{EXECUTABLE}
#   make run                              check the kernel against the reference, then time it
#   make CC=aarch64-linux-gnu-gcc CFLAGS=-O2   cross-compile (CFLAGS replaces the tuned flags)
#   make run RUN_WITH="qemu-aarch64 -L /usr/aarch64-linux-gnu"   run under an emulator
{make_settings(target, portable, openmp)}
SOURCES = main.c kernel.c reference.c
HEADERS = kernel.h reference.h

.PHONY: all run clean

all: {EXECUTABLE}

{EXECUTABLE}: $(SOURCES) $(HEADERS)
\t$(CC) $(STD) $(OPENMP) $(CPPFLAGS) $(CFLAGS) -o $@ $(SOURCES) $(LDFLAGS) $(LDLIBS)

run: {EXECUTABLE}
\t$(RUN_WITH) ./{EXECUTABLE}

clean:
\trm -f {EXECUTABLE}
"""


def _when(timestamp: float) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(timestamp))
    except (OverflowError, OSError, ValueError):
        return "at an unknown time"


def export_files(
    record: Record,
    *,
    name: str | None = None,
    portable: bool = False,
    cc: str | None = None,
    symbolic: bool = False,
) -> dict[str, str]:
    """The files :func:`export_kernel` writes, by name, as text (nothing is written).

    ``symbolic``: the steps applied to every size (``Workload.symbolic_tensors``); the kernel
    takes the sizes as ``int`` parameters after the arrays; main.c checks it at the record's.

    The record's target is read as a log's target must be (known options, values of a strict
    form: :func:`~autosched.records.check.logged_target`), with the compiler ``cc`` (default:
    ``$CC``, else gcc) in place of the one the log names: a log never chooses the compiler. A
    differing compiler in the log is reported (a :class:`~autosched.records.RecordWarning` and a
    Makefile comment), never run. Raises ``ValueError`` (or a subclass: ``TargetError``,
    ``ScheduleError``) for a record that cannot be exported.
    """
    if not record.ok:
        raise ValueError(f"record of {record.workload_key} has no valid measurement ({record.error_no.name})")
    target, logged_cc = logged_target(record.target, cc)
    task = Task(Workload.from_json(record.workload), target=target)
    wl = task.workload
    kernel = function_name(name or f"{wl.name}_kernel")
    reference = function_name(f"{name}_reference" if name else f"{wl.name}_reference")
    source = task.source(record.steps, name=kernel, portable=portable, timing=False, symbolic=symbolic)
    sizes: list[tuple[str, int]] = []
    if symbolic:
        tensors, values = wl.symbolic_tensors()
        sizes = [(v.name, values[v.name]) for v in shape_vars(tensors)]
    ref_src = task.source((), name=reference, portable=True)
    params, ref_params = function_params(source, kernel), function_params(ref_src, reference)

    seconds, flops = record.median, task.flops()
    specs = task.arg_specs()
    about = [f"{wl} tuned for {record.target}"]
    if logged_cc is not None:
        note = f"the log names the compiler {logged_cc}, not used: a log does not choose the compiler"
        about.append(note)
        warn(f"{record.origin or 'the record'}: {note}; the Makefile uses {target.cc}", RecordWarning)
    doc = [
        f"{kernel}: {wl}, exported by autosched {record.version or '?'} from a tuning log.",
        "",
        f"target:   {record.target}",
        f"compiler: {record.compiler or 'not recorded'}",
        f"measured: {seconds * 1e3:.6f} ms per run ({flops / seconds / 1e9:.3f} GFLOP/s), "
        + _when(record.timestamp),
        f"program:  {len(record.steps)} schedule steps, key {record.program_key}",
        "",
        f"int {kernel}(...) returns 0, or -1 if a temporary buffer cannot be allocated.",
        "Arguments: C-contiguous (row-major) arrays that do not overlap; inputs, then outputs:",
        *_arg_lines(specs),
    ]
    if sizes:
        doc += [
            f"then the sizes as int: {', '.join(n for n, _ in sizes)} (any values; tuned at "
            + ", ".join(f"{n}={v}" for n, v in sizes)
            + "); the array shapes above are at the tuned sizes."
        ]
    ref_doc = [
        f"{reference}: {wl} unscheduled, in portable C99: the independent check of {kernel}.",
        "Same arguments as kernel.h.",
    ]
    guard = f"{kernel.upper()}_H"
    return {
        "kernel.c": with_header(source, kernel, "kernel.h"),
        "kernel.h": header_text(guard, kernel, params, doc),
        "reference.c": with_header(ref_src, reference, "reference.h"),
        "reference.h": header_text(f"{reference.upper()}_H", reference, ref_params, ref_doc),
        "main.c": main_c(task, kernel, reference, [v for _, v in sizes], steps_extensions(record.steps)),
        "Makefile": with_code(_makefile(task.target, portable, "#pragma omp" in source, about), task.code),
    }


def write_files(files: dict[str, str], out_dir: str | Path) -> Path:
    """Write ``files`` (name -> text) into ``out_dir`` (created if missing); returns the directory.

    Each file is written to a temporary name and renamed into place, so an existing link in the
    directory is replaced, never followed: nothing is written outside ``out_dir``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for filename, text in files.items():
        fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{filename}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.chmod(tmp, 0o644)
            os.replace(tmp, out / filename)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
    return out


def export_kernel(
    record: Record,
    out_dir: str | Path,
    *,
    name: str | None = None,
    portable: bool = False,
    cc: str | None = None,
    symbolic: bool = False,
) -> Path:
    """Write the program of ``record`` as a standalone kernel directory; returns the directory.

    ``name`` is the kernel's C name (sanitized; default ``<workload>_kernel``); the reference is
    called ``<name>_reference`` (default ``<workload>_reference``). ``portable`` emits strict C99
    instead of the measured GNU C. ``cc`` is the compiler the Makefile uses by default (default:
    ``$CC``, else gcc; never the one the log names). Raises ``ValueError`` for a record without a
    valid measurement or of a workload that is not registered here (see :func:`export_files`).
    """
    return write_files(export_files(record, name=name, portable=portable, cc=cc, symbolic=symbolic), out_dir)
