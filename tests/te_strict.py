"""A strict C99 compile of emitted kernels, shared by the te-language tests."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import autosched as asc

STRICT_FLAGS = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", "-c")


def compile_strict(sched: asc.Schedule, args: Sequence[asc.Tensor], tmp_path: Path) -> None:
    """Emit portable C for ``sched`` and compile it with ``-std=c99 -Wall -Wextra -Werror``."""
    src = asc.emit(sched, list(args), portable=True)
    path = tmp_path / "kernel.c"
    path.write_text(src)
    gcc = shutil.which("gcc")
    assert gcc is not None
    done = subprocess.run(
        [gcc, *STRICT_FLAGS, str(path), "-o", str(tmp_path / "kernel.o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
