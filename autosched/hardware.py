"""CPU hardware parameters: detected on the host, or defaults per architecture for cross targets.

Used by :mod:`autosched.target` to fill the parameters a target string leaves out. The one reader
of ``/proc/cpuinfo`` text (:func:`parse_cpuinfo`, :func:`cpu_model`, :func:`isa_extensions`): the
tuning database describes this host with it (:mod:`autosched.database.machine`), the SSH boards
describe a board (:mod:`autosched.boards.board`).
"""

from __future__ import annotations

import functools
import os
import platform
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

_SIZE_SUFFIXES = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(text: str) -> int:
    """A byte count: ``32768``, ``32K``, ``1M`` or ``0`` (none)."""
    m = re.fullmatch(r"(\d+)([kKmMgG]?)[bB]?", text.strip())
    if m is None:
        raise ValueError("expected a byte count such as 32768, 32K or 1M")
    return int(m.group(1)) * _SIZE_SUFFIXES[m.group(2).lower()]


@dataclass(frozen=True, slots=True)
class Hardware:
    """CPU parameters a schedule can use."""

    cores: int
    vector_bytes: int
    l1: int
    l2: int
    l3: int


#: Parameters assumed for a cross target's architecture when its target string leaves them out.
ARCH_DEFAULTS: dict[str, Hardware] = {
    "x86_64": Hardware(cores=4, vector_bytes=32, l1=32 << 10, l2=1 << 20, l3=8 << 20),
    "x86": Hardware(cores=2, vector_bytes=16, l1=32 << 10, l2=256 << 10, l3=0),
    "aarch64": Hardware(cores=4, vector_bytes=16, l1=32 << 10, l2=1 << 20, l3=0),
    "arm": Hardware(cores=4, vector_bytes=16, l1=32 << 10, l2=512 << 10, l3=0),
    "riscv64": Hardware(cores=4, vector_bytes=16, l1=32 << 10, l2=1 << 20, l3=0),
}
#: Parameters for an architecture not in ARCH_DEFAULTS.
GENERIC = Hardware(cores=1, vector_bytes=16, l1=32 << 10, l2=256 << 10, l3=0)

_ARCH_ALIASES = {
    "amd64": "x86_64",
    "x64": "x86_64",
    "i386": "x86",
    "i486": "x86",
    "i586": "x86",
    "i686": "x86",
    "arm64": "aarch64",
    "ppc64le": "ppc64",
}
_X86_VECTOR_FLAGS = (("avx512f", 64), ("avx2", 32), ("avx", 32))


def normalize_arch(name: str) -> str:
    """The architecture family of a machine name or triple's first part (``arm64`` -> ``aarch64``)."""
    name = name.lower()
    name = _ARCH_ALIASES.get(name, name)
    return "arm" if name.startswith("arm") else name


def host_arch() -> str:
    """The architecture this Python process runs on."""
    return normalize_arch(platform.machine())


#: CPU flags (``/proc/cpuinfo``) that change what a C compiler emits or how fast it runs
ISA_FLAGS = frozenset(
    {
        # x86
        "sse2", "pni", "sse3", "ssse3", "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f",
        "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512ifma", "avx512vbmi", "avx512_vnni",
        "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8",
        # arm / aarch64
        "neon", "vfpv4", "asimd", "asimdhp", "asimddp", "fphp", "sve", "sve2", "i8mm", "bf16",
    }
)  # fmt: skip

def parse_mattr(text: str) -> str:
    """A target's ``-mattr``: :data:`ISA_FLAGS` names (``+`` optional) joined by commas, or ``none``;
    returned sorted, so that equal lists print equal."""
    names = sorted({n.lstrip("+") for n in re.split(r"[,\s]+", text.strip()) if n.lstrip("+")})
    if names == ["none"]:
        return "none"
    unknown = [n for n in names if n not in ISA_FLAGS]
    if unknown or not names:
        known = ", ".join(sorted(ISA_FLAGS))
        raise ValueError(f"unknown CPU extension(s) {unknown or [text]}; known: {known}")
    return ",".join(names)


#: /proc/cpuinfo keys naming the CPU, in order of preference
_MODEL_KEYS = ("model name", "Model", "cpu model", "uarch", "Hardware", "Processor")


def parse_cpuinfo(text: str) -> dict[str, str]:
    """The first value of each key of ``/proc/cpuinfo`` text (this host's or a board's)."""
    info: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            info.setdefault(key.strip(), value.strip())
    return info


def host_cpuinfo() -> dict[str, str]:
    """This host's ``/proc/cpuinfo`` as :func:`parse_cpuinfo` reads it; empty where there is none."""
    try:
        return parse_cpuinfo(Path("/proc/cpuinfo").read_text())
    except OSError:
        return {}


def cpu_model(info: dict[str, str]) -> str:
    """The CPU's name in parsed cpuinfo, or implementer and part numbers (arm), or ``unknown``."""
    for key in _MODEL_KEYS:
        if info.get(key):
            return info[key]
    if "CPU implementer" in info:  # arm without a model name: implementer and part numbers
        return f"implementer {info['CPU implementer']} part {info.get('CPU part', '?')}"
    return platform.processor() or "unknown"


def isa_extensions(info: dict[str, str]) -> list[str]:
    """The :data:`ISA_FLAGS` parsed cpuinfo lists, sorted; then a RISC-V ISA string if it has one."""
    flags = set((info.get("flags") or info.get("Features") or "").split())
    isa = sorted(flags & ISA_FLAGS)
    if info.get("isa"):  # risc-v: the ISA string (rv64imafdcv...) says it all
        isa.append(info["isa"])
    return isa


def _cpu_flags() -> set[str]:
    return set(host_cpuinfo().get("flags", "").split())


def _host_caches(default: Hardware) -> tuple[int, int, int]:
    sizes = {1: default.l1, 2: default.l2, 3: default.l3}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = parse_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if level in sizes and kind in ("Data", "Unified"):
            sizes[level] = size
    return sizes[1], sizes[2], sizes[3]


@functools.lru_cache(maxsize=1)
def host_hardware() -> Hardware:
    """The host CPU's parameters, read from the OS (affinity, /proc/cpuinfo, /sys caches)."""
    arch = host_arch()
    default = ARCH_DEFAULTS.get(arch, GENERIC)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    vector_bytes = default.vector_bytes
    if arch in ("x86_64", "x86"):
        flags = _cpu_flags()
        vector_bytes = next((width for flag, width in _X86_VECTOR_FLAGS if flag in flags), 16)
    l1, l2, l3 = _host_caches(default)
    return Hardware(cores=cores, vector_bytes=vector_bytes, l1=l1, l2=l2, l3=l3)


@functools.cache
def compiler_arch(cc: str, mtriple: str | None = None) -> str:
    """The architecture a C compiler builds for.

    Read from ``mtriple`` if given, else from a triple prefix in the compiler's name
    (``aarch64-linux-gnu-gcc``), else by asking ``cc -dumpmachine``; a compiler that cannot be run
    is taken to be native (building with it will then say that it is missing).
    """
    if mtriple:
        return normalize_arch(mtriple.split("-")[0])
    prefix = normalize_arch(Path(cc).name.split("-")[0])
    if prefix in ARCH_DEFAULTS:
        return prefix
    try:
        out = subprocess.run([cc, "-dumpmachine"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return host_arch()
    machine = out.stdout.strip()
    return normalize_arch(machine.split("-")[0]) if machine else host_arch()
