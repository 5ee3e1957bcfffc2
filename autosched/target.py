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
is present (each kind's ``device`` module under :mod:`autosched.backends`), else from defaults
(cross-compiling). ``str(target)``
is the canonical string, with every parameter spelled out, and parses back to an equal target.

Each kind (its options, defaults and compiler flags: a :class:`TargetKind`) lives with its backend
under ``autosched/backends/<kind>/`` and is registered with it
(:func:`~autosched.backends.register_backend`); this module holds what all kinds share.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from .diagnostics import printable
from .dtypes import dtype as _dtype
from .hardware import parse_mattr, parse_size


class TargetError(ValueError):
    """A target string or target parameter that cannot be used."""


# ---------------------------------------------------------------------------------------------
# Option values


#: OpenCL device types a target may select
DEVICE_TYPES = ("cpu", "gpu", "accelerator")

_PLATFORM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._()+-]{0,63}")


def check_platform_name(text: str) -> str:
    """A platform name (or part of one): letters, digits, spaces and ``._()+-``, at most 64."""
    if not _PLATFORM_NAME.fullmatch(text):
        raise ValueError("expected a platform name of letters, digits, spaces and ._()+- (at most 64)")
    return text


def check_device_type(text: str) -> str:
    """One of :data:`DEVICE_TYPES`."""
    if text not in DEVICE_TYPES:
        raise ValueError(f"expected one of {', '.join(DEVICE_TYPES)}")
    return text


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


def _float_abi(text: str) -> str:
    """One of gcc's ``-mfloat-abi`` values: soft, softfp or hard."""
    if text not in ("soft", "softfp", "hard"):
        raise ValueError("expected soft, softfp or hard")
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
        Option("mfloat-abi", "float_abi", _float_abi, "bare-metal float ABI: soft, softfp or hard (gcc "
               "-mfloat-abi=; default hard where the -mcpu has an FPU)"),
        Option("ram", "ram", parse_size, "RAM bytes a bare-metal board gives a model (e.g. 256K): an "
               "embedded export whose workspace exceeds it is refused"),
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
    #: whether programs are C for a CPU, built by a C compiler (:attr:`Target.is_cpu`)
    cpu: ClassVar[bool] = False
    #: the kind whose templates and hand-written schedules this one uses (None: its own name); a
    #: C dialect registered by a plugin names ``"c"``
    like: ClassVar[str | None] = None

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

    def libs(self, target: Target) -> list[str]:
        """Libraries every program of ``target`` links (``-lm``), after its own."""
        return []


#: the GPU fields a device query fills
GPU_HARDWARE = frozenset({"max_threads_per_block", "shared_memory_bytes", "warp_size", "compute_units"})


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
        if host is not None and not Target.parse(host).is_cpu:
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
    float_abi: str | None = None
    ram: int | None = None

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

    @property
    def is_cpu(self) -> bool:
        """Whether this target's programs are C for a CPU (``c``, or a C dialect a plugin adds)."""
        return _kind(self.kind).cpu

    @property
    def is_native(self) -> bool:
        """Whether this target's programs are C that runs on this host's CPU."""
        return self.is_cpu and not self.is_cross

    @property
    def like(self) -> str:
        """The kind whose templates and hand-written schedules this target uses."""
        return _kind(self.kind).like or self.kind

    def vector_lanes(self, dtype: str) -> int:
        """Elements of ``dtype`` in one SIMD register (at least 1)."""
        if self.vector_bytes is None:
            raise TargetError(f"{self.kind} targets have no SIMD width")
        return max(1, self.vector_bytes // _dtype(dtype).bytes)

    def cflags(self, shared: bool = True) -> list[str]:
        """C compiler flags; ``shared=False`` leaves out ``-shared`` (objects, executables)."""
        return _kind(self.kind).cflags(self, shared)

    def libs(self) -> list[str]:
        """Libraries every program of this target links, after its own (``-lmvec -lm`` for C)."""
        return _kind(self.kind).libs(self)
