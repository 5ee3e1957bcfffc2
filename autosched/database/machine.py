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
import re
from typing import Any

from ..hardware import cpu_model, host_arch, host_cpuinfo, host_hardware, isa_extensions
from ..target import Target, TargetError

__all__ = ["describe", "fingerprint", "fingerprint_for", "host_description", "summary"]


@functools.cache
def host_description() -> dict[str, Any]:
    """This host as the database describes it (read once per process from ``/proc/cpuinfo``)."""
    info = host_cpuinfo()
    return {
        "kind": "host",
        "arch": host_arch(),
        "cpu": cpu_model(info),
        "isa": isa_extensions(info),
        "vector_bytes": host_hardware().vector_bytes,
    }


def describe(target: str | Target) -> dict[str, Any]:
    """The machine records of ``target`` are valid for: this host for a native C target, else
    the hardware the target string names."""
    tgt = Target.parse(target)
    if tgt.is_native:
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
