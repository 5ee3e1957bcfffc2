"""CPU extensions of targets and kernels: which ones a target lets kernels use (``-mattr``, the
host's by default) and the check that refuses to load a kernel needing one the CPU lacks."""

from __future__ import annotations

import ctypes
import functools
import os
import re
from collections.abc import Iterable

from ..hardware import host_cpuinfo, isa_extensions
from ..schedule.steps import Step, TensorizeStep
from ..target import Target
from ..te.intrin import lookup_intrin

#: the extensions the library's low-precision intrinsics use (``/proc/cpuinfo`` names)
LOWP_EXTENSIONS = ("avx2", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16", "asimddp")

#: AArch64 extensions -> (auxiliary vector entry, bit) of Linux's hwcaps (``<bits/hwcap.h>``)
HWCAPS = {"asimddp": ("AT_HWCAP", 20), "i8mm": ("AT_HWCAP2", 13), "bf16": ("AT_HWCAP2", 14)}


@functools.cache
def host_extensions() -> frozenset[str]:
    """The CPU extensions of this host (``/proc/cpuinfo`` flags)."""
    return frozenset(isa_extensions(host_cpuinfo()))


def target_extensions(target: Target) -> tuple[str, ...]:
    """The extensions kernels for ``target`` may use: its ``-mattr`` list, else the host's for a
    native C target, else none."""
    if target.mattr is not None:
        return () if target.mattr == "none" else tuple(target.mattr.split(","))
    if not target.is_native:
        return ()
    return tuple(sorted(host_extensions() & set(LOWP_EXTENSIONS)))


ARCH_REQ_XCOMP_PERM = 0x1023
XFEATURE_XTILEDATA = 18
_SYS_ARCH_PRCTL = 158  # x86-64


@functools.cache
def request_amx() -> None:
    """Ask Linux, once per process, for the AMX tile data state; raise ``RuntimeError`` naming the
    refusal (a kernel using AMX tiles needs it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(_SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0:
        err = ctypes.get_errno()
        raise RuntimeError(
            f"AMX: Linux refused the tile data permission (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE 18): "
            f"{os.strerror(err)}; AMX needs Linux 5.16 or later (or build with -mattr leaving out amx_tile)"
        )


def missing_extensions(needed: tuple[str, ...] | list[str]) -> list[str]:
    """The extensions of ``needed`` this CPU lacks."""
    return [e for e in needed if e not in host_extensions()]


def check_extensions(needed: tuple[str, ...] | list[str], what: str) -> None:
    """Raise ``RuntimeError`` (one line naming them) if this CPU lacks any of the extensions
    ``needed`` by ``what``; ask for the AMX permission where AMX tiles are needed."""
    lacking = missing_extensions(needed)
    if lacking:
        raise RuntimeError(
            f"{what} uses CPU extension(s) {', '.join(lacking)}, which this CPU lacks: build it for this "
            "CPU (the default target) or a target whose -mattr leaves them out"
        )
    if "amx_tile" in needed:
        request_amx()


def steps_extensions(steps: Iterable[Step]) -> tuple[str, ...]:
    """The CPU extensions the intrinsics tensorized by ``steps`` need (those declared in this
    process, or by their names: the library's; sorted)."""
    found = [lookup_intrin(s.intrin) for s in steps if isinstance(s, TensorizeStep)]
    return tuple(sorted({e for intrin in found if intrin is not None for e in intrin.requires}))


def c_cpu_check(needed: tuple[str, ...], func_name: str) -> str:
    """C text defining ``static int asc_cpu_check(void)``: 0 on a CPU with all the AArch64
    extensions ``needed`` (Linux's hwcaps), else 1 after printing one line on stderr naming
    kernel ``func_name`` and the extensions it lacks (as :func:`check_extensions` words it).
    Executables for a board call it first; a kernel library loaded here is checked by the loader
    instead. Extensions without a hwcap bit here (x86's) are not checked."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", func_name):
        raise ValueError(f"c_cpu_check: kernel name {func_name!r} is not a C identifier")
    checked = [e for e in needed if e in HWCAPS]
    lines = [
        "#include <stdio.h>",
        "#include <string.h>",
        *(["#include <sys/auxv.h>"] if checked else []),
        "static int asc_cpu_check(void) {",
        '  char lacking[128] = "";',
    ]
    for ext in checked:
        entry, bit = HWCAPS[ext]
        lines.append(f"  if (!((getauxval({entry}) >> {bit}) & 1u))")
        lines.append(f'    strcat(lacking, lacking[0] ? ", {ext}" : "{ext}");')
    lines += [
        "  if (!lacking[0]) return 0;",
        f"  fprintf(stderr, \"kernel '{func_name}' uses CPU extension(s) %s, which this CPU lacks: "
        'build it for a target whose -mattr leaves them out\\n", lacking);',
        "  return 1;",
        "}",
    ]
    return "\n".join(lines)
