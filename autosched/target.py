"""Targets: what a program is compiled for, and the hardware parameters a schedule may use.

A target is written as a string, ``KIND -option=value ...``::

    c                                              the host CPU, gcc, -march=native
    c -cc=clang -num-threads=1
    c -cc=aarch64-linux-gnu-gcc -mcpu=cortex-a72   an ARM board (cross-compiled)
    c -cc=arm-linux-gnueabihf-gcc -mcpu=cortex-a7 -mfpu=neon-vfpv4   a 32-bit ARM board with NEON
    c -cc=clang -mtriple=aarch64-linux-gnu         clang cross-compiling (--target=)
    cuda -arch=sm_80 -max-threads-per-block=1024
    opencl -shared-memory-bytes=65536
    opencl -device=gpu -platform='NVIDIA CUDA'      the first GPU of a platform named like that

:meth:`Target.parse` turns it into a frozen :class:`Target` whose every hardware parameter is set:
options given win, the rest come from the host (for a native C compiler) or from defaults for the
compiler's architecture (for a cross compiler); a GPU target reads them from the device when one
is present (see :mod:`autosched.devices`), else from defaults (cross-compiling). ``str(target)``
is the canonical string, with every parameter spelled out, and parses back to an equal target.

Kinds are registered with :func:`register_kind`; each kind names the options it accepts.
"""

from __future__ import annotations

import dataclasses
import functools
import platform
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from .devices import DeviceNotFound, check_device_type, check_platform_name, cuda_limits, opencl_limits
from .diagnostics import printable
from .dtypes import dtype as _dtype
from .hardware import ARCH_DEFAULTS, GENERIC, compiler_arch, host_arch, host_hardware, parse_mattr, parse_size


class TargetError(ValueError):
    """A target string or target parameter that cannot be used."""


# ---------------------------------------------------------------------------------------------
# Option values


_WORD = re.compile(r"[A-Za-z0-9_.+/=-]+")


def _positive(text: str) -> int:
    """A positive integer."""
    if not re.fullmatch(r"\d+", text) or int(text) < 1:
        raise ValueError("expected a positive integer")
    return int(text)


def _word(text: str) -> str:
    """A compiler command, CPU name or triple: non-empty, no spaces or quotes."""
    if not _WORD.fullmatch(text):
        raise ValueError("expected a name of letters, digits and ._+/=-")
    return text


def _gpu_arch(text: str) -> str:
    """A CUDA virtual or real architecture such as ``sm_80`` or ``compute_90a``."""
    if not re.fullmatch(r"(sm|compute)_\d+[a-z]?", text):
        raise ValueError("expected sm_NN or compute_NN, e.g. sm_80")
    return text


def _flags(text: str) -> tuple[str, ...]:
    """Extra compiler flags, separated by spaces (quote the option value)."""
    return tuple(shlex.split(text))


@dataclass(frozen=True, slots=True)
class Option:
    """One ``-name=value`` option: the Target field it sets and how its value is read."""

    name: str
    field: str
    parse: Callable[[str], Any]
    doc: str

    def render(self, value: Any) -> str:
        """The ``-name=value`` text for ``value``, quoted so that it parses back."""
        text = shlex.join(value) if isinstance(value, tuple) else str(value)
        return f"-{self.name}={shlex.quote(text)}"


OPTIONS: dict[str, Option] = {
    o.name: o
    for o in (
        Option("cc", "cc", _word, "C compiler command (default gcc)"),
        Option("mcpu", "mcpu", _word, "CPU to tune for (default: the host's own, -march=native)"),
        Option("mfpu", "mfpu", _word, "32-bit ARM floating-point unit, e.g. neon-vfpv4 (gcc -mfpu=)"),
        Option("mtriple", "mtriple", _word, "clang --target triple, e.g. aarch64-linux-gnu"),
        Option("mattr", "mattr", parse_mattr, "CPU extensions kernels may use, e.g. avx512_vnni,amx_int8 "
               "(default: the host's; none: portable paths only)"),
        Option("cflags", "extra_cflags", _flags, "extra compiler flags, quoted: -cflags='-a -b'"),
        Option("num-threads", "num_threads", _positive, "OpenMP threads a kernel runs with (default: cores)"),
        Option("cores", "cores", _positive, "CPU cores"),
        Option("vector-bytes", "vector_bytes", _positive, "SIMD register width in bytes"),
        Option("l1", "l1", parse_size, "L1 data cache bytes per core"),
        Option("l2", "l2", parse_size, "L2 cache bytes per core"),
        Option("l3", "l3", parse_size, "L3 cache bytes in all (0: none)"),
        Option("arch", "gpu_arch", _gpu_arch, "CUDA architecture, e.g. sm_80 (default: the device's)"),
        Option("max-threads-per-block", "max_threads_per_block", _positive, "threads per block/work-group"),
        Option("shared-memory-bytes", "shared_memory_bytes", parse_size, "shared memory bytes per block"),
        Option("warp-size", "warp_size", _positive, "threads per warp (sub-group)"),
        Option("compute-units", "compute_units", _positive, "compute units (CUDA SMs)"),
        Option("device", "device_type", check_device_type, "OpenCL device type: cpu, gpu or accelerator"),
        Option("platform", "platform", check_platform_name, "OpenCL platform, part of its name, quoted"),
    )
}


# ---------------------------------------------------------------------------------------------
# Target kinds


class TargetKind:
    """How one kind of target reads its options, fills defaults and builds C code."""

    name: ClassVar[str]
    options: ClassVar[tuple[str, ...]]
    optional: ClassVar[frozenset[str]] = frozenset()
    #: arithmetic operations per second that no device of this kind reaches (see :func:`peak_ops`)
    peak_ops: ClassVar[float] = 1e16

    def complete(self, given: dict[str, Any]) -> dict[str, Any]:
        """All fields of a target of this kind: ``given`` plus defaults for the rest."""
        raise NotImplementedError

    def machine(self, target: Target) -> str:
        """The architecture code for ``target`` runs on."""
        raise TargetError(f"{self.name} targets have no CPU architecture")

    def is_cross(self, target: Target) -> bool:
        """Whether code built for ``target`` cannot run on this host."""
        return False

    def cflags(self, target: Target, shared: bool) -> list[str]:
        """Flags for the C compiler."""
        raise TargetError(f"{self.name} targets are not built with a C compiler")


_KINDS: dict[str, TargetKind] = {}
K = TypeVar("K", bound=type[TargetKind])


def register_kind(cls: K) -> K:
    """Class decorator: register a :class:`TargetKind` under its ``name``."""
    unknown = [o for o in cls.options if o not in OPTIONS]
    if unknown:
        raise TargetError(f"target kind {cls.name!r} names unknown options {unknown}")
    _KINDS[cls.name] = cls()
    return cls


def target_kinds() -> list[str]:
    """Names of the registered target kinds."""
    return sorted(_KINDS)


def kind_options(name: str) -> tuple[str, ...]:
    """The options (``cc``, ``num-threads``, ...) that targets of kind ``name`` accept."""
    return _kind(name).options


def peak_ops(name: str) -> float:
    """Arithmetic operations per second (as :mod:`autosched.flops` counts them) that no device of
    target kind ``name`` reaches: a measurement faster than that is not a real one. The bounds are
    about ten times the fastest hardware of the kind (AMX int8 on an 8-socket Xeon is about
    2e15 operations per second; a GPU's sparse int8 or fp8 tensor cores about 1e16)."""
    return _kind(name).peak_ops


def _kind(name: str) -> TargetKind:
    try:
        return _KINDS[name]
    except KeyError:
        raise TargetError(f"unknown target kind {name!r}; known kinds: {', '.join(target_kinds())}") from None


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


@register_kind
class CKind(TargetKind):
    """C compiled by gcc or clang (or a cross compiler), OpenMP for threads."""

    name = "c"
    options = ("cc", "mcpu", "mfpu", "mtriple", "mattr", "cflags", "num-threads", "cores", "vector-bytes",
               "l1", "l2", "l3")  # fmt: skip
    optional = frozenset({"mcpu", "mfpu", "mtriple", "mattr"})

    def complete(self, given: dict[str, Any]) -> dict[str, Any]:
        """Fill the hardware from the host for a native compiler, else from the arch's defaults."""
        values = {"cc": "gcc", "extra_cflags": ()} | given
        arch = compiler_arch(values["cc"], values.get("mtriple"))
        if "mfpu" in given and arch != "arm":
            raise TargetError(f"-mfpu is for 32-bit ARM compilers (arm-linux-gnueabihf-gcc), not {arch} ones")
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
        or ``sqrtf`` vectorize)."""
        flags = ["-O3", "-std=gnu11", "-fPIC", *(["-shared"] if shared else [])]
        flags += [openmp_flag(target), "-ffp-contract=fast", "-fno-math-errno"]
        if "clang" not in Path(target.cc or "gcc").name:
            # gcc 12.2 miscompiles if-converted, AVX-512-vectorized loops with guarded loads (seen on
            # a padded conv2d: tests/test_emit_c.py::test_gcc_if_conversion_workaround); emitted
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


@register_kind
class CudaKind(TargetKind):
    """CUDA C compiled by NVRTC."""

    name = "cuda"
    peak_ops = 1e17
    options = ("arch", "max-threads-per-block", "shared-memory-bytes", "warp-size", "compute-units")
    optional = frozenset({"arch", "compute-units"})

    def complete(self, given: dict[str, Any]) -> dict[str, Any]:
        """Read from CUDA device 0 where a driver and a GPU are, else defaults of current NVIDIA
        GPUs: 1024 threads, 48 KiB static shared memory, warps of 32."""
        defaults = {"max_threads_per_block": 1024, "shared_memory_bytes": 48 << 10, "warp_size": 32}
        found = {} if given.keys() >= _HARDWARE else cuda_limits()
        return defaults | found | given


@register_kind
class OpenCLKind(TargetKind):
    """OpenCL C compiled by the OpenCL driver (PoCL on CPUs)."""

    name = "opencl"
    peak_ops = 1e17
    options = (
        "max-threads-per-block",
        "shared-memory-bytes",
        "warp-size",
        "compute-units",
        "device",
        "platform",
    )
    optional = frozenset({"compute-units", "device", "platform"})

    def complete(self, given: dict[str, Any]) -> dict[str, Any]:
        """Read from the selected device where pyopencl finds one (a ``-device`` or ``-platform``
        that matches nothing is an error), else defaults any OpenCL 1.2 device meets: work-groups
        of 256, 32 KiB local memory."""
        defaults = {"max_threads_per_block": 256, "shared_memory_bytes": 32 << 10, "warp_size": 1}
        found: dict[str, Any] = {}
        if not given.keys() >= _HARDWARE:
            try:
                found = opencl_limits(given.get("device_type"), given.get("platform"))
            except DeviceNotFound as e:
                if "device_type" in given or "platform" in given:
                    raise TargetError(str(e)) from None
        return defaults | found | given


#: the GPU fields a device query fills
_HARDWARE = frozenset({"max_threads_per_block", "shared_memory_bytes", "warp_size", "compute_units"})


# ---------------------------------------------------------------------------------------------
# Target


class _TvmStyle(type):
    """Lets ``Target(target="c", host="c")`` (TVM's constructor) read a target string."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if "target" not in kwargs and "host" not in kwargs:
            return super().__call__(*args, **kwargs)
        spec, host = kwargs.pop("target", None), kwargs.pop("host", None)
        if args or kwargs or not isinstance(spec, (str, Target)):
            raise TargetError("Target(target=STRING, host=None) takes a target string and nothing else")
        target = Target.parse(spec)
        if host is not None and Target.parse(host).kind != "c":
            raise TargetError(f"a target's host is a c target (this machine's CPU), not {printable(host)}")
        return target


@dataclass(frozen=True, slots=True)
class Target(metaclass=_TvmStyle):
    """A fully specified target. Build one with :meth:`Target.parse` (or TVM's ``Target(target=STRING,
    host=...)``: the host, the CPU that launches GPU kernels, is always this machine's C compiler);
    fields a kind does not use are None."""

    kind: str
    cc: str | None = None
    mcpu: str | None = None
    mfpu: str | None = None
    mtriple: str | None = None
    mattr: str | None = None
    extra_cflags: tuple[str, ...] = ()
    num_threads: int | None = None
    cores: int | None = None
    vector_bytes: int | None = None
    l1: int | None = None
    l2: int | None = None
    l3: int | None = None
    gpu_arch: str | None = None
    max_threads_per_block: int | None = None
    shared_memory_bytes: int | None = None
    warp_size: int | None = None
    compute_units: int | None = None
    device_type: str | None = None
    platform: str | None = None

    def __post_init__(self) -> None:
        kind = _kind(self.kind)
        accepted = {OPTIONS[o].field: o for o in kind.options}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "kind":
                continue
            if f.name not in accepted and value not in (None, ()):
                raise TargetError(f"{self.kind} targets take no {f.name}")
            if f.name in accepted and value is None and accepted[f.name] not in kind.optional:
                raise TargetError(f"{self.kind} target without {f.name}: build targets with Target.parse")

    @classmethod
    def parse(cls, spec: str | Target) -> Target:
        """Read a target string such as ``"c -cc=clang -num-threads=1"`` (a Target is returned as is)."""
        if isinstance(spec, Target):
            return spec
        try:
            tokens = shlex.split(spec)
        except ValueError as e:
            raise TargetError(f"cannot read target {spec!r}: {e}") from None
        if not tokens:
            raise TargetError(f"empty target string; known kinds: {', '.join(target_kinds())}")
        kind = _kind(tokens[0])
        given: dict[str, Any] = {}
        for token in tokens[1:]:
            m = re.fullmatch(r"-([a-z0-9-]+)=(.*)", token, re.DOTALL)
            if m is None:
                raise TargetError(f"malformed option {token!r} in target {spec!r}: expected -name=value")
            name, text = m.groups()
            if name not in kind.options:
                accepted = ", ".join(f"-{o}" for o in kind.options)
                raise TargetError(f"unknown option -{name} for {kind.name} targets; accepted: {accepted}")
            option = OPTIONS[name]
            if option.field in given:
                raise TargetError(f"option -{name} given twice in target {spec!r}")
            try:
                given[option.field] = option.parse(text)
            except ValueError as e:
                raise TargetError(f"bad value -{name}={text!r} ({option.doc}): {e}") from None
        return cls(kind=kind.name, **kind.complete(given))

    @classmethod
    def host(cls) -> Target:
        """The host CPU with the default C compiler: ``Target.parse("c")``."""
        return cls.parse("c")

    def __str__(self) -> str:
        parts = [self.kind]
        for name in _kind(self.kind).options:
            value = getattr(self, OPTIONS[name].field)
            if value not in (None, ()):
                parts.append(OPTIONS[name].render(value))
        return " ".join(parts)

    @property
    def machine(self) -> str:
        """The CPU architecture the code runs on (``x86_64``, ``aarch64``, ...)."""
        return _kind(self.kind).machine(self)

    @property
    def is_cross(self) -> bool:
        """Whether code built for this target runs elsewhere than on this host."""
        return _kind(self.kind).is_cross(self)

    def vector_lanes(self, dtype: str) -> int:
        """Elements of ``dtype`` in one SIMD register (at least 1)."""
        if self.vector_bytes is None:
            raise TargetError(f"{self.kind} targets have no SIMD width")
        return max(1, self.vector_bytes // _dtype(dtype).bytes)

    def cflags(self, shared: bool = True) -> list[str]:
        """C compiler flags; ``shared=False`` leaves out ``-shared`` (objects, executables)."""
        return _kind(self.kind).cflags(self, shared)
