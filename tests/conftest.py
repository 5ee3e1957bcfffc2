"""Shared test set-up: capability markers, an isolated kernel cache and tuning database.

Mark a test that needs a tool with ``@pytest.mark.requires("clang")`` (several names allowed); it
is skipped, with the missing tool named, where the tool is absent. Known tools: see ``PROBES``.

A test (or a fixture it uses) that runs a C compiler in the test process without a ``requires``
marker naming a compiler fails: without the marker it would fail, not skip, where gcc is missing.
(Compiles in worker processes, e.g. LocalBuilder's pool or a CLI subprocess, are not seen: mark
those tests by hand.)
"""

from __future__ import annotations

import functools
import importlib
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from ptxas_tool import ptxas_path


def _compiles(cc: str, *flags: str) -> bool:
    """Whether ``cc`` preprocesses a file including stdlib.h and omp.h with ``flags``."""
    if shutil.which(cc) is None:
        return False
    source = "#include <stdlib.h>\n#include <omp.h>\n"
    try:
        out = subprocess.run([cc, *flags, "-fopenmp", "-E", "-x", "c", "-"], input=source,
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0


def _imports(module: str, check: Callable[[object], object] = lambda m: True) -> bool:
    try:
        return bool(check(importlib.import_module(module)))
    except Exception:  # any failure to import or to probe means "absent"
        return False


#: why a probe found its tool unusable, where it can say more than the install hint
PROBE_NOTES: dict[str, str] = {}


def _opencl_builds() -> bool:
    """Whether pyopencl finds a device and builds a kernel on it: PoCL's LLVM may not know this CPU
    (on AMD Zen 5 it falls back to CPU 'generic', which its clang rejects)."""
    try:
        import pyopencl as cl

        device = cl.get_platforms()[0].get_devices()[0]
        cl.Program(cl.Context([device]), "__kernel void k(__global float* x) { x[0] = 1.0f; }").build()
    except Exception as e:  # any failure to import, to find a device or to build means "absent"
        lines = [ln.strip() for ln in str(e).splitlines() if "error" in ln.lower() and ln.strip()]
        PROBE_NOTES["pyopencl"] = f"here: {(lines or [type(e).__name__])[-1]}"
        return False
    return True


def _links_openblas() -> bool:
    """Whether gcc builds and links a program calling cblas_sgemm from OpenBLAS."""
    if shutil.which("gcc") is None:
        return False
    source = "#include <cblas.h>\nint main(void) { return cblas_sgemm == 0; }\n"
    try:
        out = subprocess.run(["gcc", "-x", "c", "-", "-o", "/dev/null", "-lopenblas"], input=source,
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0


def _builds_for_cortex_m() -> bool:
    """Whether arm-none-eabi-gcc compiles a float kernel calling libm for a Cortex-M4 with its FPU."""
    if shutil.which("arm-none-eabi-gcc") is None:
        return False
    source = "#include <math.h>\nfloat f(float x) { return expf(x); }\n"
    try:
        command = ["arm-none-eabi-gcc", "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-c", "-x", "c",
                   "-", "-o", "/dev/null"]
        out = subprocess.run(command, input=source, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0


def _cpu_has(*flags: str) -> bool:
    """Whether this CPU's /proc/cpuinfo lists all of ``flags``."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    have = set(next((ln.split(":", 1)[1] for ln in text.splitlines() if ln.startswith("flags")), "").split())
    return all(f in have for f in flags)


def _nvrtc_works(nvrtc: object) -> bool:
    err, *_ = nvrtc.nvrtcVersion()  # type: ignore[attr-defined]
    return int(err) == 0


def _cuda_device(drv: object) -> bool:
    drv.init()  # type: ignore[attr-defined]
    return int(drv.Device.count()) > 0  # type: ignore[attr-defined]


def _chromium_missing() -> list[str]:
    """What the headless-browser tests lack of Chromium, its driver and Selenium (empty: nothing)."""
    import importlib.util

    parts = [
        ("/usr/bin/chromium", Path("/usr/bin/chromium").is_file(), "apt-get install chromium"),
        ("/usr/bin/chromedriver", Path("/usr/bin/chromedriver").is_file(), "apt-get install chromium-driver"),
        ("selenium", importlib.util.find_spec("selenium") is not None, "pip install selenium"),
    ]
    return [f"{name} ({fix})" for name, present, fix in parts if not present]


PROBES: dict[str, tuple[Callable[[], bool], str]] = {
    "gcc": (lambda: _compiles("gcc"), "apt-get install gcc"),
    "clang": (lambda: _compiles("clang"), "apt-get install clang lld libomp-dev"),
    "aarch64-linux-gnu-gcc": (lambda: _compiles("aarch64-linux-gnu-gcc"),
                              "apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross"),
    "arm-linux-gnueabihf-gcc": (lambda: _compiles("arm-linux-gnueabihf-gcc"),
                                "apt-get install gcc-arm-linux-gnueabihf libc6-dev-armhf-cross"),
    "aarch64-linux-gnu-objdump": (lambda: shutil.which("aarch64-linux-gnu-objdump") is not None,
                                  "apt-get install binutils-aarch64-linux-gnu"),
    "qemu-aarch64": (lambda: shutil.which("qemu-aarch64") is not None, "apt-get install qemu-user"),
    "qemu-arm": (lambda: shutil.which("qemu-arm") is not None, "apt-get install qemu-user"),
    "arm-none-eabi-gcc": (_builds_for_cortex_m, "apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi"),
    "qemu-system-arm": (lambda: shutil.which("qemu-system-arm") is not None,
                        "apt-get install qemu-system-arm"),
    "pyopencl": (_opencl_builds, "pip install pyopencl pocl-binary-distribution, on a CPU PoCL's LLVM knows"),
    "nvrtc": (lambda: _imports("cuda.bindings.nvrtc", _nvrtc_works),
              "pip install cuda-bindings nvidia-cuda-nvrtc"),
    "ptxas": (lambda: ptxas_path() is not None,
              'pip install "nvidia-cuda-nvcc==13.0.*" (its ptxas), or a CUDA toolkit with ptxas on PATH'),
    "pycuda": (lambda: _imports("pycuda.driver", _cuda_device),
               "a CUDA GPU with its driver, and pip install pycuda"),
    "jupyter": (lambda: _imports("nbclient") and _imports("ipykernel"), "pip install nbclient ipykernel"),
    "sshd": (lambda: shutil.which("sshd") is not None or Path("/usr/sbin/sshd").exists(),
             "apt-get install openssh-server"),
    "make": (lambda: shutil.which("make") is not None, "apt-get install make"),
    "openblas": (_links_openblas, "apt-get install libopenblas-dev"),
    "distributed": (lambda: _imports("distributed"), 'pip install "dask[distributed]"'),
    "chromium": (lambda: not _chromium_missing() and _imports("selenium.webdriver"),
                 ", ".join(_chromium_missing()) or "selenium.webdriver fails: pip install selenium"),
    "torch": (lambda: _imports("torch.onnx") and _imports("torchvision"), "pip install torch torchvision"),
    # CPU extensions (/proc/cpuinfo flags) that kernels with low-precision intrinsics need
    "avx2": (lambda: _cpu_has("avx2"), "an x86 CPU with AVX2 (Haswell, Zen or later)"),
    "avx512_vnni": (lambda: _cpu_has("avx512_vnni"), "a CPU with AVX-512 VNNI (Ice Lake, Zen 4 or later)"),
    "avx512_bf16": (lambda: _cpu_has("avx512_bf16"), "a CPU with AVX512-BF16 (Cooper Lake, Zen 4 or later)"),
    "amx": (lambda: _cpu_has("amx_tile", "amx_int8", "amx_bf16"),
            "a CPU with AMX tiles, int8 and bf16 (Sapphire Rapids or later) and Linux 5.16+"),
}

#: The tools of PROBES that are C compilers.
COMPILERS = frozenset(
    {"gcc", "clang", "aarch64-linux-gnu-gcc", "arm-linux-gnueabihf-gcc", "arm-none-eabi-gcc"}
)


@functools.cache
def has_tool(name: str) -> bool:
    """Whether tool ``name`` (a key of ``PROBES``) works here; probed once per session."""
    return PROBES[name][0]()


_declared: set[str] = set()  # the tools the running test's markers name
_undeclared_compiles: list[str] = []  # compiler commands it ran without naming a compiler


#: The test functions of the slow tier (``<file>::<function>``), chosen by scripts/pick-slow-tests.
SLOW_TESTS = Path(__file__).with_name("slow_tests.txt")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``slow`` the tests listed in :data:`SLOW_TESTS`, all their parameter cases."""
    lines = SLOW_TESTS.read_text().splitlines() if SLOW_TESTS.exists() else []
    slow = {line.strip() for line in lines if line.strip() and not line.startswith("#")}
    for item in items:
        function = getattr(item, "originalname", item.name)
        if f"{item.path.name}::{function}" in slow:
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(tryfirst=True)  # before any fixture of the test is set up
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip tests whose ``requires`` marker names a tool that is missing."""
    _declared.clear()
    _undeclared_compiles.clear()
    for marker in item.iter_markers("requires"):
        for name in marker.args:
            if name not in PROBES:
                raise pytest.UsageError(f"requires({name!r}): unknown tool; known: {', '.join(PROBES)}")
            _declared.add(name)
            if not has_tool(name):
                note = f"; {PROBE_NOTES[name]}" if name in PROBE_NOTES else ""
                pytest.skip(f"needs {name} ({PROBES[name][1]}{note})")


@pytest.fixture(autouse=True)
def _compiler_needs_a_marker(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test that compiled C (itself or in a fixture) without a ``requires`` marker naming a
    compiler."""
    yield
    if _undeclared_compiles:
        compilers = ", ".join(dict.fromkeys(_undeclared_compiles))
        _undeclared_compiles.clear()
        pytest.fail(f"{request.node.nodeid} runs a C compiler ({compilers}) but has no "
                    f"@pytest.mark.requires naming one of {', '.join(sorted(COMPILERS))}", pytrace=False)


@pytest.fixture(autouse=True, scope="session")
def _compiles_need_a_marker() -> Iterator[None]:
    """Note every compiler command a test runs in this process without declaring a compiler."""
    from autosched.runner import compile as compile_module

    run, version = compile_module._run, compile_module.compiler_version

    def note(cc: str) -> None:
        if not _declared & COMPILERS and shutil.which(cc) is not None:
            _undeclared_compiles.append(shlex.quote(cc))

    def noted_run(command: list[str], timeout: float) -> None:  # every compile
        note(command[0])
        run(command, timeout)

    def noted_version(cc: str) -> str:  # every compile_shared, also when its cache has the library
        note(cc)
        return version(cc)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compile_module, "_run", noted_run)
        mp.setattr(compile_module, "compiler_version", noted_version)
        yield


@pytest.fixture(autouse=True, scope="session")
def _isolated_kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Point ``AUTOSCHED_CACHE`` at a per-session directory so tests never touch ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AUTOSCHED_CACHE", str(tmp_path_factory.mktemp("kernel-cache")))
        yield


@pytest.fixture(autouse=True, scope="session")
def _isolated_tuning_database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Point ``AUTOSCHED_DB`` at a per-session directory so no test (nor the subprocesses it
    starts) reads or writes the user's tuning database."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AUTOSCHED_DB", str(tmp_path_factory.mktemp("tuning-db")))
        yield
