"""Microcontroller (bare-metal Cortex-M) C targets: ``c -cc=arm-none-eabi-gcc -mcpu=cortex-m4``.

A compiler building for no operating system (``*-none-eabi``) makes a bare-metal target. Its
hardware comes from the CPU named with ``-mcpu`` (required: there is no host to ask), not from a
Linux-class default:

- one core, one thread (no OpenMP: a parallel loop runs serially);
- ``vector_bytes``: 16 where the core has Helium (MVE: cortex-m55, cortex-m85), else 4 (no SIMD
  registers for floats: the FPU of an M4 or M7 is scalar), so vector loops print as plain loops;
- the floating-point unit from the CPU and ``-mfloat-abi`` (``hard`` by default where the core has
  an FPU, ``soft`` where it has none). A kernel computing in a float type the FPU lacks (any float
  without an FPU, ``float64`` on a single-precision one) is refused (:func:`check_float_support`):
  gcc would emulate it in software, tens of times slower, which is rarely what the caller wants.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...dtypes import dtype as dtype_info
from ...target import Target, TargetError


@dataclass(frozen=True, slots=True)
class CortexM:
    """What a kernel can use of one Cortex-M core."""

    #: floating-point unit: "" (none), "sp" (single precision), "dp" (single and double)
    fpu: str
    #: Helium (M-profile vector extension, 128-bit vectors, float lanes too)
    mve: bool = False


#: the Cortex-M cores gcc knows, as the Arm reference configurations have them (the FPU is optional
#: on M4/M7/M33/M55 silicon: a part without one is ``-mfloat-abi=soft``)
CORTEX_M: dict[str, CortexM] = {
    "cortex-m0": CortexM(""),
    "cortex-m0plus": CortexM(""),
    "cortex-m1": CortexM(""),
    "cortex-m3": CortexM(""),
    "cortex-m23": CortexM(""),
    "cortex-m4": CortexM("sp"),
    "cortex-m7": CortexM("dp"),
    "cortex-m33": CortexM("sp"),
    "cortex-m35p": CortexM("sp"),
    "cortex-m55": CortexM("dp", mve=True),
    "cortex-m85": CortexM("dp", mve=True),
}

#: bytes of an MVE (Q) register
MVE_BYTES = 16
#: ``vector_bytes`` of a core without float SIMD: one float32 per "vector", loops stay scalar
SCALAR_BYTES = 4


def is_bare_metal(cc: str, mtriple: str | None = None) -> bool:
    """Whether the compiler builds for no operating system (``arm-none-eabi-gcc``, or clang with
    ``-mtriple=thumbv7em-none-eabi``)."""
    return "-none-" in (mtriple or Path(cc).name)


def core(target: Target) -> CortexM:
    """The core of a bare-metal target (its ``-mcpu``)."""
    return CORTEX_M[str(target.mcpu)]


def complete_bare_metal(values: dict[str, Any]) -> dict[str, Any]:
    """The hardware fields of a bare-metal target from its ``-mcpu`` (see the module's doc)."""
    cpu = values.get("mcpu")
    if cpu not in CORTEX_M:
        known = ", ".join(CORTEX_M)
        raise TargetError(f"a bare-metal target names its core with -mcpu= ({known}); got {cpu or 'none'}")
    spec = CORTEX_M[cpu]
    abi = values.get("float_abi") or ("hard" if spec.fpu else "soft")
    if abi != "soft" and not spec.fpu:
        raise TargetError(f"{cpu} has no floating-point unit: -mfloat-abi={abi} needs one (use soft)")
    if values.get("num_threads", 1) != 1 or values.get("cores", 1) != 1:
        raise TargetError(f"{cpu} is one core running no OS: -num-threads and -cores are 1")
    vector = MVE_BYTES if spec.mve and abi != "soft" else SCALAR_BYTES
    defaults = {"cores": 1, "num_threads": 1, "vector_bytes": vector, "l1": 0, "l2": 0, "l3": 0}
    return defaults | values | {"float_abi": abi}


def is_clang(cc: str) -> bool:
    """Whether ``cc`` is clang (by its name), which builds for any Arm core with ``--target=``."""
    return "clang" in Path(cc).name


#: the compiler whose C library (newlib) and link a bare-metal clang build uses
GNU_ARM = "arm-none-eabi-gcc"


@functools.cache
def newlib_include() -> str:
    """The folder of newlib's headers, as :data:`GNU_ARM` searches them (clang has its own
    ``stdint.h`` and ``stdarg.h``, not ``math.h`` or ``string.h`` for a bare-metal Arm core)."""
    gcc = shutil.which(GNU_ARM)
    if gcc is None:
        raise TargetError(f"clang builds for a bare-metal core with the C library of {GNU_ARM}, which is "
                          "missing (Debian packages gcc-arm-none-eabi libnewlib-arm-none-eabi)")
    done = subprocess.run([gcc, "-xc", "-E", "-v", os.devnull], capture_output=True, text=True, timeout=60)
    lines = done.stderr.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("#include <...>")), len(lines))
    for line in lines[start + 1 :]:
        if not line.startswith(" "):
            break
        if (Path(line.strip()) / "math.h").is_file():
            return str(Path(line.strip()).resolve())
    raise TargetError(f"{GNU_ARM} searches no folder with newlib's math.h: install libnewlib-arm-none-eabi")


def gnu_arm_flags(target: Target) -> list[str]:
    """The core and float ABI as :data:`GNU_ARM` takes them (it links a clang build's objects)."""
    return ["-mthumb", f"-mcpu={target.mcpu}", f"-mfloat-abi={target.float_abi}"]


def bare_metal_cflags(target: Target) -> list[str]:
    """Flags for a bare-metal target: optimized Thumb code for its core and float ABI, no OpenMP
    runtime (``-fopenmp-simd`` reads the vector loops' ``omp simd`` hints, and needs no library) nor
    position independence (there is no loader), and math that never sets ``errno``; clang gets its
    ``--target=`` triple and newlib's headers (:func:`newlib_include`)."""
    flags = ["-O2", "-std=gnu11", *gnu_arm_flags(target)]
    flags += ["-fopenmp-simd", "-ffp-contract=fast", "-fno-math-errno"]
    if target.mtriple:
        flags.append(f"--target={target.mtriple}")
    if target.cc is not None and is_clang(target.cc):  # newlib's headers, and its ABI's enum sizes
        flags += ["-isystem", newlib_include(), "-fshort-enums"]
    if target.mfpu:
        flags.append(f"-mfpu={target.mfpu}")
    return flags + list(target.extra_cflags)


def check_float_support(target: Target, dtypes: Iterable[str]) -> None:
    """Refuse, in one line, float types the target's FPU does not compute in (see the module's doc);
    nothing for other targets."""
    if target.kind != "c" or target.cc is None or not is_bare_metal(target.cc, target.mtriple):
        return
    spec = core(target)
    fpu = spec.fpu if target.float_abi != "soft" else ""
    for name in sorted(set(dtypes)):
        if not dtype_info(name).is_float:
            continue
        if not fpu:
            why = "has no floating-point unit" if not spec.fpu else "is built with -mfloat-abi=soft"
            raise TargetError(
                f"{target.mcpu} {why}: {name} kernels would run in software emulation; "
                "use a core with an FPU (-mcpu=cortex-m4 -mfloat-abi=hard) or an integer workload"
            )
        if name == "float64" and fpu == "sp":
            raise TargetError(f"{target.mcpu}'s FPU is single precision: float64 kernels would run "
                              "in software emulation; use float32")
