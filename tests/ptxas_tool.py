"""ptxas, the CUDA assembler, for tests that read a kernel's resource use without a GPU: the one on
PATH (a CUDA toolkit) or the one in pip's ``nvidia-cuda-nvcc`` wheel."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import tempfile
from pathlib import Path


def ptxas_path() -> str | None:
    """The ptxas to run, or None."""
    found = shutil.which("ptxas")
    if found is not None:
        return found
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        for candidate in sorted(Path(root).glob("cu*/bin/ptxas")):
            return str(candidate)
    return None


def ptxas_usage(ptx: bytes, arch: str) -> dict[str, int]:
    """Assemble ``ptx`` for ``arch`` (``sm_90``) and read ``ptxas -v``: ``registers``,
    ``stack`` (bytes of stack frame), ``spill_stores`` and ``spill_loads`` (bytes)."""
    tool = ptxas_path()
    assert tool is not None, "no ptxas"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.ptx"
        path.write_bytes(ptx.rstrip(b"\0"))  # NVRTC's PTX ends in the C string's NUL
        done = subprocess.run([tool, "-v", f"--gpu-name={arch}", str(path), "-o", str(Path(tmp) / "k.cubin")],
                              capture_output=True, text=True, timeout=120, check=True)
    log = done.stdout + done.stderr
    frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
    regs = re.search(r"Used (\d+) registers", log)
    assert frame is not None and regs is not None, log
    return {"registers": int(regs.group(1)), "stack": int(frame.group(1)),
            "spill_stores": int(frame.group(2)), "spill_loads": int(frame.group(3))}
