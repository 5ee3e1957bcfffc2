"""Building C kernels: compile with gcc/clang/cross compilers, cache, errors, timeouts, loading."""

from __future__ import annotations

import gzip
import json
import math
import os
import stat
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import autosched as asc
from autosched.boards import RemoteBuilder
from autosched.hardware import host_arch
from autosched.runner import (
    ArgSpec,
    BuildTimeout,
    CompileError,
    CompilerNotFound,
    Kernel,
    LoadError,
    compile_object,
    compile_shared,
    default_cache_dir,
    elf_machine,
    load_kernel,
)
from autosched.runner.aligned import aligned_array, aligned_empty
from autosched.runner.measure import MeasureInput
from autosched.runner.measure_worker import fresh_output
from autosched.schedule.steps import AnnotateStep, PragmaStep, ReorderStep, SplitStep
from autosched.target import Target

N = 1000

VADD = f"""
#define _POSIX_C_SOURCE 199309L
#include <time.h>

int vadd(void *a_, void *b_, void *c_) {{
  const float *a = (const float *)a_;
  const float *b = (const float *)b_;
  float *c = (float *)c_;
  #pragma omp parallel for
  for (int i = 0; i < {N}; ++i) c[i] = a[i] + b[i];
  return 0;
}}

double vadd__time(void *a, void *b, void *c, int number) {{
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int n = 0; n < number; ++n) vadd(a, b, c);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}}
"""

VADD_ARGS = [
    ArgSpec("A", (N,), "float32"),
    ArgSpec("B", (N,), "float32"),
    ArgSpec("C", (N,), "float32", is_output=True),
]

VADD_MAIN = """
#include <stdio.h>
int vadd(void *a, void *b, void *c);
int main(void) {
  static float a[1000], b[1000], c[1000];
  for (int i = 0; i < 1000; ++i) { a[i] = (float)i; b[i] = 2.0f * (float)i; }
  vadd(a, b, c);
  double s = 0;
  for (int i = 0; i < 1000; ++i) s += c[i];
  printf("%.1f\\n", s);
  return 0;
}
"""


def _script(path: Path, body: str) -> Path:
    """An executable shell script that answers --version/-dumpmachine like gcc, then runs ``body``."""
    path.write_text(f'#!/bin/sh\ncase "$1" in --version|-dumpmachine) exec gcc "$@";; esac\n{body}\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _vadd_arrays() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(N).astype(np.float32) for _ in range(2))
    return a, b, np.full(N, -1.0, dtype=np.float32)


@pytest.fixture(scope="module")
def vadd(tmp_path_factory: pytest.TempPathFactory) -> Kernel:
    """(Tests that use it are marked ``requires("gcc")``.)"""
    lib = compile_shared(VADD, Target.parse("c"), cache_dir=tmp_path_factory.mktemp("vadd"))
    return load_kernel(lib, "vadd", VADD_ARGS)


COMPILERS = [
    pytest.param("gcc", marks=pytest.mark.requires("gcc")),
    pytest.param("clang", marks=pytest.mark.requires("clang")),
]


@pytest.mark.parametrize("cc", COMPILERS)
def test_build_load_run_and_time(cc: str, tmp_path: Path) -> None:
    lib = compile_shared(VADD, Target.parse(f"c -cc={cc}"), cache_dir=tmp_path)
    assert lib.parent == tmp_path and lib.suffix == ".so"
    assert elf_machine(lib) == host_arch()
    k = load_kernel(lib, "vadd", VADD_ARGS)
    a, b, c = _vadd_arrays()
    k(a, b, c)
    np.testing.assert_array_equal(c, a + b)
    times = k.time(a, b, c, number=5, repeat=4)
    assert len(times) == 4 and all(isinstance(t, float) and 0 < t < 1 for t in times)


@pytest.mark.requires("gcc")
def test_cache_hit_does_not_recompile(tmp_path: Path) -> None:
    log = tmp_path / "calls"
    cc = _script(tmp_path / "cc-counting", f'echo compile >> {log}\nexec gcc "$@"')
    cache = tmp_path / "cache"
    target = Target.parse(f"c -cc={cc}")
    first = compile_shared(VADD, target, cache_dir=cache)
    mtime = first.stat().st_mtime_ns
    second = compile_shared(VADD, target, cache_dir=cache)
    assert second == first and first.stat().st_mtime_ns == mtime
    assert log.read_text().count("compile") == 1
    other = compile_shared(VADD, Target.parse(f"c -cc={cc} -cflags=-DUNUSED=1"), cache_dir=cache)
    assert other != first and log.read_text().count("compile") == 2
    assert compile_shared(VADD + "\n", target, cache_dir=cache) not in (first, other)
    assert not [p for p in cache.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.requires("gcc")
def test_concurrent_builds_of_one_source_share_one_library(tmp_path: Path) -> None:
    target = Target.parse("c")
    with ThreadPoolExecutor(4) as pool:
        libs = list(pool.map(lambda _: compile_shared(VADD, target, cache_dir=tmp_path), range(4)))
    assert len(set(libs)) == 1
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".c", ".sha256", ".so"]  # .sha256: its record
    a, b, c = _vadd_arrays()
    load_kernel(libs[0], "vadd", VADD_ARGS)(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_default_cache_dir_follows_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AUTOSCHED_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path
    monkeypatch.delenv("AUTOSCHED_CACHE")
    assert default_cache_dir() == Path.home() / ".cache" / "autosched" / "kernels"


@pytest.mark.requires("gcc")
def test_compile_error_keeps_stderr_and_command(tmp_path: Path) -> None:
    with pytest.raises(CompileError) as info:
        compile_shared("void f(void) { this is not C; }\n", Target.parse("c"), cache_dir=tmp_path)
    err = info.value
    assert "error" in err.stderr
    assert err.command[0] == "gcc" and "-O3" in err.command
    assert "compile failed: gcc" in str(err) and "error" in str(err)
    assert not list(tmp_path.glob("*.so*"))


@pytest.mark.parametrize(("cc", "hint"), [("no-such-cc", "install"), ("clang-99", "libomp-dev"),
                                          ("aarch64-linux-gnu-gcc-99", "gcc-aarch64-linux-gnu")])
def test_missing_compiler_says_what_to_install(cc: str, hint: str, tmp_path: Path) -> None:
    with pytest.raises(CompilerNotFound, match=f"{cc}.*not found.*{hint}"):
        compile_shared(VADD, Target.parse(f"c -cc={cc}"), cache_dir=tmp_path)
    with pytest.raises(CompilerNotFound, match=hint):
        compile_object(VADD, Target.parse(f"c -cc={cc}"), tmp_path / "k.o")


@pytest.mark.requires("gcc")
def test_timeout_kills_the_compiler_and_its_children(tmp_path: Path) -> None:
    pidfile, finished = tmp_path / "pid", tmp_path / "finished"
    # the child holds the compiler's output pipe: had it not been killed, compile_shared would wait
    # for it to end (and find the file it writes when it does)
    cc = _script(tmp_path / "cc-slow", f"(sleep 20; touch {finished}) &\necho $! > {pidfile}\nwait")
    with pytest.raises(BuildTimeout, match="killed after 0.5 s") as info:
        compile_shared(VADD, Target.parse(f"c -cc={cc}"), timeout=0.5, cache_dir=tmp_path / "cache")
    assert not finished.exists(), "compile_shared waited for the compiler's child to finish"
    assert info.value.timeout == 0.5
    pid = int(pidfile.read_text())
    for _ in range(100):
        stat_file = Path(f"/proc/{pid}/stat")
        if not stat_file.exists() or stat_file.read_text().split()[2] == "Z":
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the compiler's child {pid} survived the timeout")
    assert not [p for p in (tmp_path / "cache").iterdir() if p.suffix in (".so", ".tmp")]


@pytest.mark.parametrize("cc", COMPILERS)
@pytest.mark.parametrize(
    ("flags", "bad_source"),
    [(["-Wall", "-Wextra", "-Werror"], "int f(int x) { int unused; return x; }\n"),
     (["-std=c99", "-pedantic", "-Werror"], "int f(void) { return 0b101; }\n")],
)
def test_compile_object_with_strict_flags(cc: str, flags: list[str], bad_source: str, tmp_path: Path) -> None:
    target = Target.parse(f"c -cc={cc}")
    obj = compile_object(VADD, target, tmp_path / "vadd.o", extra_flags=flags)
    assert obj == tmp_path / "vadd.o" and elf_machine(obj) == host_arch()
    with pytest.raises(CompileError, match="error"):
        compile_object(bad_source, target, tmp_path / "bad.o", extra_flags=flags)


CROSS = "c -cc=aarch64-linux-gnu-gcc -mcpu=cortex-a72"


@pytest.mark.requires("aarch64-linux-gnu-gcc")
def test_cross_compile_to_aarch64(tmp_path: Path) -> None:
    target = Target.parse(CROSS)
    obj = compile_object(VADD, target, tmp_path / "vadd.o", extra_flags=["-Wall", "-Werror"])
    assert elf_machine(obj) == "aarch64"
    lib = compile_shared(VADD, target, cache_dir=tmp_path)
    assert elf_machine(lib) == "aarch64"
    if host_arch() != "aarch64":
        assert target.is_cross
        with pytest.raises(LoadError, match="built for aarch64 but this host is .*run it on its board"):
            load_kernel(lib, "vadd", VADD_ARGS)


@pytest.mark.requires("aarch64-linux-gnu-gcc", "qemu-aarch64")
def test_cross_compiled_kernel_runs_under_qemu(tmp_path: Path) -> None:
    target = Target.parse(CROSS)
    (tmp_path / "main.c").write_text(VADD_MAIN)
    (tmp_path / "vadd.c").write_text(VADD)
    exe = tmp_path / "vadd"
    subprocess.run([str(target.cc), *target.cflags(shared=False), "-static", "-o", str(exe),
                    str(tmp_path / "main.c"), str(tmp_path / "vadd.c"), "-lm"], check=True)
    out = subprocess.run(["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", str(exe)],
                         capture_output=True, text=True, check=True, timeout=60)
    assert float(out.stdout) == 3 * sum(range(1000))


# -- Kernel: argument checks and timing -------------------------------------------------------


@pytest.mark.requires("gcc")
def test_kernel_checks_every_argument_before_running(vadd: Kernel) -> None:
    a, b, c = _vadd_arrays()
    ro = c.copy()
    ro.flags.writeable = False
    bad: list[tuple[tuple[Any, ...], type[Exception], str]] = [
        ((a, b), TypeError, r"kernel 'vadd' takes 3 arrays \(A, B, C\), got 2"),
        ((a, b, c, c), TypeError, "takes 3 arrays"),
        ((a.tolist(), b, c), TypeError, "argument 0 'A': expected a numpy.ndarray, got list"),
        ((a.astype(np.float64), b, c), TypeError, "argument 0 'A': expected dtype float32, got float64"),
        ((a, b[:-1], c), ValueError, r"argument 1 'B': expected shape \(1000,\), got \(999,\)"),
        ((a, b.reshape(10, 100), c), ValueError, r"expected shape \(1000,\), got \(10, 100\)"),
        ((a, np.zeros(2 * N, np.float32)[::2], c), ValueError, "argument 1 'B': array is not C-contiguous"),
        ((a, b, ro), ValueError, r"argument 2 'C' \(output\): output array is read-only"),
        ((a, b, a), ValueError, "'C' \\(output\\): output shares memory with argument 0 'A'"),
        ((a, b, b[::-1].copy()[::-1]), ValueError, "not C-contiguous"),
    ]
    big = np.zeros(N + 1, np.float32)
    bad.append(((big[1:], b, big[:-1]), ValueError, "output shares memory with argument 0 'A'"))
    for args, exc, message in bad:
        before = [x.copy() for x in args if isinstance(x, np.ndarray)]
        with pytest.raises(exc, match=message):
            vadd(*args)
        with pytest.raises(exc, match=message):
            vadd.time(*args)
        with pytest.raises(exc, match=message):
            vadd.bind(*args)
        after = [x for x in args if isinstance(x, np.ndarray)]
        assert all(np.array_equal(x, y) for x, y in zip(before, after, strict=True)), message
    a_ro = a.copy()
    a_ro.flags.writeable = False
    vadd(a_ro, a_ro, c)
    np.testing.assert_array_equal(c, 2 * a)


ALIGNED_CASES = [((3, 5), "float32"), ((7,), "float64"), ((0,), "int32"), ((2, 3), "bool")]


@pytest.mark.parametrize(("shape", "dtype"), ALIGNED_CASES)
def test_aligned_arrays_start_on_a_cache_line_and_measurement_arrays_are_aligned(
    shape: tuple[int, ...], dtype: str
) -> None:
    for _ in range(4):  # numpy alone puts large arrays 16 bytes past a boundary; small ones anywhere
        a = aligned_empty(shape, dtype)
        assert a.shape == shape and a.dtype == dtype and a.flags.c_contiguous
        assert a.size == 0 or a.ctypes.data % 64 == 0  # an empty array has no data to place
    src = np.arange(math.prod(shape)).astype(dtype).reshape(shape)
    copy = aligned_array(src)
    assert (copy.size == 0 or copy.ctypes.data % 64 == 0) and np.array_equal(copy, src)
    assert not np.shares_memory(copy, src)
    out = fresh_output(ArgSpec("out", shape, dtype, is_output=True))
    assert (out.size == 0 or out.ctypes.data % 64 == 0) and out.shape == shape


@pytest.mark.requires("gcc")
def test_a_bound_kernel_runs_on_what_its_arrays_hold_at_each_call(vadd: Kernel) -> None:
    a, b, c = _vadd_arrays()
    run = vadd.bind(a, b, c)
    run()
    np.testing.assert_array_equal(c, a + b)
    a += 1  # new contents, same array: the next call reads them
    c[:] = 0
    assert run() is None
    np.testing.assert_array_equal(c, a + b)


@pytest.mark.requires("gcc")
def test_kernel_time_repeats_and_min_repeat_ms(vadd: Kernel) -> None:
    a, b, c = _vadd_arrays()
    assert len(vadd.time(a, b, c)) == 3
    start = time.perf_counter()
    times = vadd.time(a, b, c, repeat=2, min_repeat_ms=20)
    # Calibration stops only after one timed run of >= 20 ms. The repeats after it may be shorter
    # (a run the machine interrupted can end calibration early), so only that run is certain.
    assert time.perf_counter() - start >= 0.02
    assert vadd.last_number > 1  # one call of a 1000-element add is microseconds
    assert len(times) == 2 and all(t > 0 for t in times)  # other tests may load the cores
    for kwargs in ({"number": 0}, {"number": 1.5}, {"repeat": 0}, {"min_repeat_ms": -1}):
        with pytest.raises(ValueError, match=next(iter(kwargs))):
            vadd.time(a, b, c, **kwargs)


@pytest.mark.requires("gcc")
def test_kernel_repr_names_arguments(vadd: Kernel) -> None:
    assert repr(vadd) == "<Kernel vadd(A: float32[1000], B: float32[1000], C: float32[1000] (output))>"


def test_argspec_validation() -> None:
    assert ArgSpec("X", [2, 3], "int8").shape == (2, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown dtype 'float128'"):
        ArgSpec("X", (2,), "float128")
    with pytest.raises(ValueError, match="negative extent"):
        ArgSpec("X", (2, -1), "float32")


INT8_COPY = """
#include <stdint.h>
int copy8(void *x, void *y) {
  for (int i = 0; i < 16; ++i) ((int8_t *)y)[i] = ((const int8_t *)x)[i];
  return 0;
}
double copy8__time(void *x, void *y, int number) { for (int n = 0; n < number; ++n) copy8(x, y); return 0.0; }
"""


@pytest.mark.requires("gcc")
def test_any_dtype_passes_as_a_pointer(tmp_path: Path) -> None:
    k = load_kernel(compile_shared(INT8_COPY, Target.parse("c"), cache_dir=tmp_path), "copy8",
                    [ArgSpec("X", (16,), "int8"), ArgSpec("Y", (16,), "int8", is_output=True)])
    x = np.arange(-8, 8, dtype=np.int8)
    y = np.zeros(16, np.int8)
    k(x, y)
    np.testing.assert_array_equal(x, y)
    assert k.time(x, y, number=3) == [0.0, 0.0, 0.0]


@pytest.mark.requires("gcc")
def test_load_errors(tmp_path: Path) -> None:
    lib = compile_shared(INT8_COPY, Target.parse("c"), cache_dir=tmp_path)
    specs = [ArgSpec("X", (16,), "int8"), ArgSpec("Y", (16,), "int8", is_output=True)]
    with pytest.raises(LoadError, match="lacks a symbol"):
        load_kernel(lib, "vadd", specs)
    with pytest.raises(LoadError, match="does not exist"):
        load_kernel(tmp_path / "missing.so", "copy8", specs)
    with pytest.raises(ValueError, match="not a C identifier"):
        load_kernel(lib, "copy8; rm -rf", specs)
    not_a_library = tmp_path / "text.so"
    not_a_library.write_text("hello")
    with pytest.raises(LoadError, match="cannot load"):
        load_kernel(not_a_library, "copy8", specs)
    assert os.path.exists(lib)


@pytest.mark.requires("gcc")
def test_the_timing_loop_runs_a_kernel_the_compiler_could_inline_and_run_once(tmp_path: Path) -> None:
    """A fully unrolled 8x8x8 matmul computes the same C from the same A and B on every call. In a
    board's static executable (no -fPIC: nothing stops inlining) gcc -O3 inlined it into the timer
    and ran it once per loop, so calibration grew ``number`` to 2**31 - 1 and the repeats, which
    call it for real, ran for minutes: the board's trial timed out. Built here for this machine."""
    task = asc.Task("matmul", (8, 8, 8), target="c -num-threads=1 -vector-bytes=16")
    splits = [SplitStep("C", f"{ax}{'.inner' * d}", 8, None) for ax in "ij" for d in range(3)]
    order = ("i.outer", "j.outer", "i.inner.outer", "j.inner.outer", "k.outer", "i.inner.inner.outer",
             "j.inner.inner.outer", "k.inner", "i.inner.inner.inner", "j.inner.inner.inner")  # fmt: skip
    unroll = PragmaStep("C", "i.outer", "auto_unroll_max_step", 512)
    steps = (*splits, SplitStep("C", "k", 8, None), ReorderStep("C", order),
             AnnotateStep("C", "j.inner.inner.inner", "vectorize"), unroll)  # fmt: skip
    built = RemoteBuilder(cache_dir=tmp_path / "cache").build([MeasureInput(task, steps)])[0]
    assert built.lib_path is not None, built.error_msg
    exe = tmp_path / "cand"
    exe.write_bytes(gzip.decompress(Path(built.lib_path).read_bytes()))
    exe.chmod(0o700)
    a, b = (np.random.default_rng(i).standard_normal((8, 8)).astype(np.float32) for i in range(2))
    (tmp_path / "data").mkdir()
    for k, x in enumerate((a, b)):
        x.tofile(tmp_path / "data" / f"in{k}.bin")
    run = subprocess.run([str(exe), "data", "1", "2", "5.0", "0", "0"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=30)  # fmt: skip
    assert run.returncode == 0, run.stderr
    timing = json.loads(run.stdout)
    assert timing["number"] < 2**31 - 1 and min(timing["costs"]) > 1e-10, timing
    out = np.fromfile(tmp_path / "out0.bin", dtype=np.float32).reshape(8, 8)
    np.testing.assert_allclose(out, a @ b, rtol=1e-5)
