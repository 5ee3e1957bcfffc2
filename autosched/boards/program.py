"""Candidates for a board: one static executable each, built here with the target's (cross) compiler.

The executable is the candidate's C source (the kernel and the timing harness of
:func:`~autosched.emit_c.timing_entries`, the same as the local runner times) plus a small ``main``::

    ./candidate DATA_DIR NUMBER REPEAT MIN_REPEAT_MS FLUSH_BYTES COOLDOWN_MS

It reads input ``k`` from ``DATA_DIR/in<k>.bin`` (raw C-order bytes), runs the kernel once on
outputs pre-filled with a marker (NaN bytes for floats), writes output ``k`` to ``out<k>.bin`` in
the current directory, then times the kernel (warm-up and calibration, ``REPEAT`` repeats, an
optional cache flush) and prints one JSON line ``{"number": N, "costs": [seconds, ...]}``. Exit
status 3: an input file is missing or short; 4: out of memory; 5: the candidate's intrinsics need
an AArch64 extension the board's CPU lacks (one line on stderr names it; checked first, from
Linux's hwcaps). Nothing but the C library is needed on the board (the executable is linked
``-static``).
"""

from __future__ import annotations

import contextlib
import gzip
import math
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path

from ..dtypes import dtype as dtype_info
from ..expr import static_shape
from ..intrin.isa import HWCAPS, c_cpu_check, steps_extensions
from ..runner.compile import BuildTimeout, CompileError, compile_executable
from ..runner.compile import default_cache_dir as kernel_cache
from ..runner.kernel import ArgSpec
from ..runner.measure import BuildResult, Closing, MeasureErrorNo, MeasureInput
from ..task import Task

__all__ = ["RemoteBuilder", "elf_arch", "main_source", "runs_natively"]

#: ELF ``e_machine`` numbers -> architecture names (as :func:`~autosched.hardware.normalize_arch`)
_ELF_MACHINES = {3: "x86", 40: "arm", 62: "x86_64", 183: "aarch64", 243: "riscv64"}

#: architectures whose machines also run another's executables natively (64-bit running 32-bit)
_ALSO_RUNS = {"x86_64": "x86", "aarch64": "arm"}

_MAIN = """
/* ---- autosched: the board's main (reads inputs, writes outputs, prints timings) ---- */
#include <stdio.h>
#include <string.h>

static void* asc_main_alloc(size_t bytes) {{
  void* p = malloc(bytes ? bytes : 1u);
  if (p == NULL) {{
    fputs("out of memory\\n", stderr);
    exit(4);
  }}
  return p;
}}

static void asc_main_read(const char* dir, int k, void* buf, size_t bytes) {{
  char path[4096];
  snprintf(path, sizeof path, "%s/in%d.bin", dir, k);
  FILE* f = fopen(path, "rb");
  if (f == NULL || fread(buf, 1, bytes, f) != bytes) {{
    fprintf(stderr, "cannot read input %d (%zu bytes)\\n", k, bytes);
    exit(3);
  }}
  fclose(f);
}}

static void asc_main_write(int k, const void* buf, size_t bytes) {{
  char path[64];
  snprintf(path, sizeof path, "out%d.bin", k);
  FILE* f = fopen(path, "wb");
  if (f == NULL || fwrite(buf, 1, bytes, f) != bytes || fclose(f) != 0) {{
    fprintf(stderr, "cannot write output %d\\n", k);
    exit(3);
  }}
}}

int main(int argc, char** argv) {{
  if (argc != 7) {{
    fputs("usage: candidate DATA_DIR NUMBER REPEAT MIN_REPEAT_MS FLUSH_BYTES COOLDOWN_MS\\n", stderr);
    return 2;
  }}
  int number = atoi(argv[2]), repeat = atoi(argv[3]);
  double min_repeat_ms = atof(argv[4]), cooldown_ms = atof(argv[6]);
  size_t flush_bytes = (size_t)strtoull(argv[5], NULL, 10);
  if (repeat < 1) repeat = 1;
{check}{setup}
  if ({name}({args}) != 0) {{
    fputs("out of memory\\n", stderr);
    return 4;
  }}
{write}
  unsigned char* flush_buf = flush_bytes ? (unsigned char*)asc_main_alloc(flush_bytes) : NULL;
  if (flush_buf) memset(flush_buf, 0, flush_bytes);
  double* times = (double*)asc_main_alloc(sizeof(double) * (size_t)repeat);
  int used = {name}__bench({args}, number, repeat, min_repeat_ms, flush_buf, flush_bytes,
                           cooldown_ms, times);
  if (used < 0) {{
    fputs("out of memory\\n", stderr);
    return 4;
  }}
  printf("{{\\"number\\": %d, \\"costs\\": [", used);
  for (int r = 0; r < repeat; ++r) printf("%s%.9e", r ? ", " : "", times[r]);
  printf("]}}\\n");
  return 0;
}}
"""


def _bytes(spec: ArgSpec) -> int:
    return math.prod(static_shape(spec.shape)) * dtype_info(spec.dtype).bytes


def main_source(func_name: str, specs: Sequence[ArgSpec], extensions: Sequence[str] = ()) -> str:
    """The ``main`` appended to a candidate's source (see the module docstring), which first checks
    that the CPU has the ``extensions`` the kernel's intrinsics need (those with a Linux hwcap:
    :func:`~autosched.intrin.isa.c_cpu_check`): local names are ``m<k>``, never the tensors' own,
    so no tensor name reaches this code."""
    setup, write, ins = [], [], 0
    for k, spec in enumerate(specs):
        ctype = dtype_info(spec.dtype).c_name
        size = _bytes(spec)
        setup.append(f"  {ctype}* m{k} = ({ctype}*)asc_main_alloc({size}u);")
        if spec.is_output:
            marker = "0xFF" if dtype_info(spec.dtype).is_float else "0x4D"  # NaN bytes / an odd value
            setup.append(f"  memset(m{k}, {marker}, {size}u);")
            write.append(f"  asc_main_write({k - ins}, m{k}, {size}u);")
        else:
            setup.append(f"  asc_main_read(argv[1], {ins}, m{k}, {size}u);")
            ins += 1
    args = ", ".join(f"m{k}" for k in range(len(specs)))
    checked = tuple(e for e in extensions if e in HWCAPS)
    check = "  if (asc_cpu_check() != 0) return 5;\n" if checked else ""
    main = _MAIN.format(
        name=func_name, args=args, check=check, setup="\n".join(setup), write="\n".join(write)
    )
    return ("\n" + c_cpu_check(checked, func_name) + "\n" if checked else "") + main


def gzipped(path: Path) -> Path:
    """``path`` compressed as ``path.gz`` (made once, atomically): half the bytes to send a board."""
    out = path.with_name(path.name + ".gz")
    if not out.exists():
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=out.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(gzip.compress(path.read_bytes(), 6))
            os.replace(tmp, out)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return out


def elf_arch(path: str | Path) -> str | None:
    """The architecture of the gzip-compressed executable ``path`` (as :func:`gzipped` makes), read
    from its ELF header; None for an unknown machine or a file that is not ELF."""
    with gzip.open(path, "rb") as f:
        head = f.read(20)
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    return _ELF_MACHINES.get(int.from_bytes(head[18:20], "little" if head[5] == 1 else "big"))


def runs_natively(board_arch: str, exe_arch: str) -> bool:
    """Whether a machine of ``board_arch`` runs ``exe_arch`` executables without an emulator."""
    return exe_arch in (board_arch, _ALSO_RUNS.get(board_arch))


class RemoteBuilder(Closing):
    """Builds candidates into static executables for a board (the :class:`Builder` protocol).

    ``n_parallel`` compilers (default 2) run at once, each limited to ``timeout`` seconds, into
    ``cache_dir`` (default: the kernel cache). :attr:`BuildResult.lib_path` is the executable,
    stripped and gzip-compressed (the board runs ``gzip -dc``).
    A missing compiler or an unwritable cache raises (an infrastructure failure).
    """

    def __init__(self, n_parallel: int | None = None, timeout: float = 60.0, cache_dir: Path | None = None):
        self.n_parallel = max(1, n_parallel or 2)
        self.timeout = timeout
        self.cache_dir = cache_dir
        self.emit_time = 0.0  # seconds spent lowering and emitting, all batches

    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]:
        """Build every candidate of ``inputs``; one :class:`BuildResult` per input, in order.

        Sources are made here, one after another (lowering shares a cache); compilers run in
        parallel threads.
        """
        sources = [self._source(inp) for inp in inputs]
        with ThreadPoolExecutor(self.n_parallel, thread_name_prefix="remote-build") as pool:
            return list(pool.map(self._compile, inputs, sources))

    def build_each(self, inputs: Sequence[MeasureInput]) -> Iterator[tuple[int, BuildResult]]:
        """(index, :class:`BuildResult`) for each candidate of ``inputs`` as soon as it is built:
        sources are made one after another in the iterating thread, compilers run in parallel, so
        a board can time the first candidates while the others compile."""
        with ThreadPoolExecutor(self.n_parallel, thread_name_prefix="remote-build") as pool:
            todo: dict[Future[BuildResult], int] = {}
            for i, inp in enumerate(inputs):
                todo[pool.submit(self._compile, inp, self._source(inp))] = i
                for done in [f for f in todo if f.done()]:
                    yield todo.pop(done), done.result()
            for done in as_completed(todo):
                yield todo[done], done.result()

    def _source(self, inp: MeasureInput) -> BuildResult | tuple[str, float]:
        """The candidate's full source and the seconds it took, or its failed :class:`BuildResult`."""
        start = time.perf_counter()
        task: Task = inp.task
        try:
            source = task.source(inp.steps)  # declares the intrinsics the steps name
            source += main_source(task.func_name, task.arg_specs(), steps_extensions(inp.steps))
        except Exception as e:  # illegal steps, or a lowering/emission failure
            kind, message = MeasureErrorNo.INSTANTIATION_ERROR, f"{type(e).__name__}: {e}"
            return BuildResult(None, task.func_name, (), kind, message, time.perf_counter() - start)
        seconds = time.perf_counter() - start
        self.emit_time += seconds
        return source, seconds

    def _compile(self, inp: MeasureInput, made: BuildResult | tuple[str, float]) -> BuildResult:
        if isinstance(made, BuildResult):
            return made
        source, seconds = made
        task, start = inp.task, time.perf_counter() - seconds
        specs = tuple(task.arg_specs())
        cache = self.cache_dir if self.cache_dir is not None else kernel_cache() / "boards"
        kind, message, exe = MeasureErrorNo.NO_ERROR, "", None
        try:  # a missing compiler or an unwritable cache raises: the machine's fault
            exe = str(gzipped(compile_executable(source, task.target, timeout=self.timeout, cache_dir=cache)))
        except CompileError as e:
            kind, message = MeasureErrorNo.COMPILE_ERROR, str(e)
        except BuildTimeout as e:
            kind, message = MeasureErrorNo.BUILD_TIMEOUT, str(e)
        return BuildResult(exe, task.func_name, specs, kind, message, time.perf_counter() - start)
