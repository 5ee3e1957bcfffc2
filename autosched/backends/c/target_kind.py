"""The ``c`` target kind: C compiled by gcc or clang (or a cross compiler) for a CPU, OpenMP for
threads; its options, the hardware defaults it fills and its compiler flags.

A C dialect added by a plugin subclasses :class:`CKind` (its ``like`` stays ``"c"``: it shares the
C templates and hand-written schedules).
"""

from __future__ import annotations

import dataclasses
import functools
import platform
from pathlib import Path
from typing import Any

from ...hardware import ARCH_DEFAULTS, GENERIC, compiler_arch, host_arch, host_hardware
from ...target import Target, TargetError, TargetKind
from .microcontroller import bare_metal_cflags, complete_bare_metal, is_bare_metal

_CPU_FLAG_STYLE: dict[str, tuple[str, ...]] = {
    "x86_64": ("-march={}", "-mtune={}"),
    "x86": ("-march={}", "-mtune={}"),
}
_DEFAULT_CPU_FLAG_STYLE = ("-mcpu={}",)


def _tune_name(flag: str, cpu: str) -> str:
    """gcc deprecates ``-mtune=x86-64*`` (an ISA level, not a CPU): tune for ``generic`` then."""
    return "generic" if flag.startswith("-mtune") and cpu.startswith("x86-64") else cpu


def openmp_flag(target: Target) -> str:
    """The OpenMP flag of a C target: ``-fopenmp``, or ``-fopenmp=libgomp`` for clang building for
    another architecture (LLVM's libomp is rarely installed for it; the cross gcc's libgomp is)."""
    cross_clang = "clang" in Path(target.cc or "gcc").name and target.is_cross
    return "-fopenmp=libgomp" if cross_clang else "-fopenmp"


def math_libs(target: Target) -> list[str]:
    """The math libraries C code for ``target`` links: ``-lm``, and first ``-lmvec`` (glibc's vector
    math, whose functions the emitted header declares vectorizable for gcc on x86_64 glibc) where
    gcc builds for this x86_64 glibc host."""
    gcc = "clang" not in Path(target.cc or "gcc").name
    vector = gcc and target.machine == "x86_64" and not target.is_cross and _host_libc() == "glibc"
    return ["-lmvec", "-lm"] if vector else ["-lm"]


@functools.cache
def _host_libc() -> str:
    """The C library of this host (``glibc``, or "" where Python cannot tell)."""
    return platform.libc_ver()[0]


class CKind(TargetKind):
    """C compiled by gcc or clang (or a cross compiler), OpenMP for threads."""

    name = "c"
    cpu = True
    like = "c"
    options = ("cc", "mcpu", "mfpu", "mtriple", "mattr", "cflags", "num-threads", "cores", "vector-bytes",
               "l1", "l2", "l3", "mfloat-abi", "ram")  # fmt: skip
    optional = frozenset({"mcpu", "mfpu", "mtriple", "mattr", "mfloat-abi", "ram"})

    def complete(self, given: dict[str, Any]) -> dict[str, Any]:
        """Fill the hardware from the host for a native compiler, from the core for a bare-metal one
        (:mod:`~autosched.backends.c.microcontroller`), else from the arch's defaults."""
        values = {"cc": "gcc", "extra_cflags": ()} | given
        arch = compiler_arch(values["cc"], values.get("mtriple"))
        if "mfpu" in given and arch != "arm":
            raise TargetError(f"-mfpu is for 32-bit ARM compilers (arm-linux-gnueabihf-gcc), not {arch} ones")
        if is_bare_metal(values["cc"], values.get("mtriple")):
            return complete_bare_metal(values)
        for option, field in (("mfloat-abi", "float_abi"), ("ram", "ram")):
            if field in given:
                raise TargetError(f"-{option} is for bare-metal targets (-cc=arm-none-eabi-gcc)")
        hw = host_hardware() if arch == host_arch() else ARCH_DEFAULTS.get(arch, GENERIC)
        values = dataclasses.asdict(hw) | values
        values.setdefault("num_threads", values["cores"])
        return values

    def machine(self, target: Target) -> str:
        """The architecture the target's compiler builds for."""
        assert target.cc is not None
        return compiler_arch(target.cc, target.mtriple)

    def is_cross(self, target: Target) -> bool:
        """True when the compiler builds for another architecture than the host's."""
        return self.machine(target) != host_arch()

    def cflags(self, target: Target, shared: bool) -> list[str]:
        """``-O3 -std=gnu11 -fPIC [-shared] -fopenmp -ffp-contract=fast -fno-math-errno`` + CPU flags
        + extras (kernels never read ``errno``: without it, loops calling ``expf``, ``logf``, ``powf``
        or ``sqrtf`` vectorize); a bare-metal target's own flags (no OpenMP, no ``-fPIC``)."""
        assert target.cc is not None
        if is_bare_metal(target.cc, target.mtriple):
            return bare_metal_cflags(target)
        flags = ["-O3", "-std=gnu11", "-fPIC", *(["-shared"] if shared else [])]
        flags += [openmp_flag(target), "-ffp-contract=fast", "-fno-math-errno"]
        if "clang" not in Path(target.cc or "gcc").name:
            # gcc 12.2 miscompiles if-converted, AVX-512-vectorized loops with guarded loads (seen on
            # a padded conv2d: tests/emit_c/test_emit_c.py::test_gcc_if_conversion_workaround); emitted
            # kernels vectorize explicitly, so only scalar fallback loops lose auto-vectorization
            flags.append("-fno-tree-loop-if-convert")
        if target.mtriple:
            flags.append(f"--target={target.mtriple}")
        arch = self.machine(target)
        cpu = target.mcpu or (None if self.is_cross(target) else "native")
        if cpu is not None:
            flags += [
                f.format(_tune_name(f, cpu)) for f in _CPU_FLAG_STYLE.get(arch, _DEFAULT_CPU_FLAG_STYLE)
            ]
        if target.mfpu:
            flags.append(f"-mfpu={target.mfpu}")
        return flags + list(target.extra_cflags)

    def libs(self, target: Target) -> list[str]:
        """The math libraries (see :func:`math_libs`)."""
        return math_libs(target)
