"""Which machine a tuning record is valid for: a short fingerprint of the hardware a target runs on.

Timings and the code ``-march=native`` produces depend on the CPU, so the tuning database keeps
one directory per machine. For a native C target (the host's compiler, ``-march=native`` unless
``-mcpu`` says otherwise, timed on this host) the machine is this host: its CPU model, the ISA
extensions code generation uses (AVX2, AVX-512, FMA, NEON, SVE...), its SIMD width and
architecture. For any other target (a cross compiler for an SSH board, a GPU) the target string
itself names the hardware: its architecture, ``-mcpu``, ``-mtriple``, vector width, GPU
architecture. :func:`fingerprint` hashes a description into ``<arch>-<12 hex digits>``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import re
from pathlib import Path
from typing import Any

from ..hardware import host_arch, host_hardware
from ..target import Target, TargetError

__all__ = ["describe", "fingerprint", "fingerprint_for", "host_description", "summary"]

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

#: /proc/cpuinfo keys naming the CPU, in order of preference
_MODEL_KEYS = ("model name", "Model", "cpu model", "uarch", "Hardware", "Processor")


def _cpuinfo(text: str) -> dict[str, str]:
    """The first value of each key of ``/proc/cpuinfo`` text."""
    info: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            info.setdefault(key.strip(), value.strip())
    return info


def _cpu_model(info: dict[str, str]) -> str:
    for key in _MODEL_KEYS:
        if info.get(key):
            return info[key]
    if "CPU implementer" in info:  # arm without a model name: implementer and part numbers
        return f"implementer {info['CPU implementer']} part {info.get('CPU part', '?')}"
    return platform.processor() or "unknown"


def _isa(info: dict[str, str]) -> list[str]:
    flags = set((info.get("flags") or info.get("Features") or "").split())
    isa = sorted(flags & ISA_FLAGS)
    if info.get("isa"):  # risc-v: the ISA string (rv64imafdcv...) says it all
        isa.append(info["isa"])
    return isa


@functools.cache
def host_description() -> dict[str, Any]:
    """This host as the database describes it (read once per process from ``/proc/cpuinfo``)."""
    try:
        info = _cpuinfo(Path("/proc/cpuinfo").read_text())
    except OSError:
        info = {}
    return {
        "kind": "host",
        "arch": host_arch(),
        "cpu": _cpu_model(info),
        "isa": _isa(info),
        "vector_bytes": host_hardware().vector_bytes,
    }


def describe(target: str | Target) -> dict[str, Any]:
    """The machine records of ``target`` are valid for: this host for a native C target, else
    the hardware the target string names."""
    tgt = Target.parse(target)
    if tgt.kind == "c" and not tgt.is_cross:
        return dict(host_description())
    try:
        arch: str | None = tgt.machine
    except TargetError:  # GPU kinds have no CPU architecture
        arch = None
    return {
        "kind": "target",
        "target_kind": tgt.kind,
        "arch": arch,
        "mcpu": tgt.mcpu,
        "mtriple": tgt.mtriple,
        "vector_bytes": tgt.vector_bytes,
        "gpu_arch": tgt.gpu_arch,
    }


def fingerprint(description: dict[str, Any]) -> str:
    """``<arch>-<hash>``: a short stable id of a machine description."""
    text = json.dumps(description, sort_keys=True, separators=(",", ":"))
    prefix = re.sub(r"[^A-Za-z0-9_]", "_", str(description.get("arch") or description.get("target_kind")))
    return f"{prefix}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def fingerprint_for(target: str | Target) -> str:
    """The fingerprint of the machine records of ``target`` are valid for."""
    return fingerprint(describe(target))


def summary(description: dict[str, Any]) -> str:
    """One line about a machine description (untrusted text: pass it through ``printable``)."""
    if description.get("kind") == "host":
        isa = " ".join(map(str, description.get("isa") or [])) or "no ISA flags known"
        return (
            f"{description.get('cpu', 'unknown CPU')}, {description.get('arch')}, "
            f"{description.get('vector_bytes')}-byte vectors, {isa}"
        )
    parts = [f"{k}={v}" for k, v in sorted(description.items()) if k != "kind" and v is not None]
    return "target hardware: " + (", ".join(parts) or "unknown")
