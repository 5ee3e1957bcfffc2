"""What gcc's vectorizer made of a program: counts read from ``-fopt-info-vec-optimized``.

A diagnostic for the cost model (``bench_model_transfer.py --within LOG --gcc-report MARCH``): the
loop features describe the nest the emitter prints; these counts say what the compiler did with it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from autosched.runner.measure import MeasureInput

#: the columns :func:`vectorizer_reports` returns, in order
REPORT_COLUMNS = ("loops vectorized, 32+ byte", "loops vectorized, 16 byte", "basic blocks", "outer loops")
_MARCH = re.compile(r"[A-Za-z0-9_.+-]{1,40}")
_LINE = re.compile(r":(\d+):\d+: optimized: (.*)")


def _holds_a_loop(source: list[str], line: int) -> bool:
    """Whether the loop starting at (1-based) ``line`` has another ``for`` inside it, judged by
    braces (the emitter prints one statement per line and braces every loop body)."""
    depth = 0
    for text in source[line - 1 : line + 200]:
        if depth > 0 and "for (" in text:
            return True
        depth += text.count("{") - text.count("}")
        if depth <= 0 and "}" in text:
            return False
    return False


def vectorizer_report(program: MeasureInput, march: str, path: Path) -> np.ndarray:
    """The counts of :data:`REPORT_COLUMNS` for ``program``'s kernel (no timing harness), compiled
    with the runner's optimization flags and ``-march=MARCH``; its source is written to ``path``."""
    path.write_text(program.task.source(program.steps, timing=False))
    flags = ["-O3", "-std=gnu11", "-fopenmp", "-ffp-contract=fast", "-fno-tree-loop-if-convert"]
    flags.append(f"-march={march}")
    command = ["gcc", *flags, "-fopt-info-vec-optimized", "-c", str(path), "-o", "/dev/null"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    source = path.read_text().splitlines()
    counts = np.zeros(len(REPORT_COLUMNS), dtype=np.float32)
    for match in map(_LINE.search, done.stderr.splitlines()):
        if match is None:
            continue
        line, message = int(match.group(1)), match.group(2)
        if "loop vectorized" in message:
            counts[1 if "16 byte" in message else 0] += 1
            counts[3] += _holds_a_loop(source, line)
        elif "basic block" in message:
            counts[2] += 1
    return counts


def check_march(march: str) -> str:
    """``march`` if it looks like a gcc ``-march`` value (letters, digits, ``_.+-``), else ValueError."""
    if not _MARCH.fullmatch(march):
        raise ValueError(f"not a gcc -march value: {march!r}")
    return march


def vectorizer_reports(programs: list[MeasureInput], march: str, jobs: int = 2) -> np.ndarray:
    """:func:`vectorizer_report` of every program (``jobs`` compiles at once): programs x columns."""
    check_march(march)
    if shutil.which("gcc") is None:
        raise SystemExit("the vectorizer report needs gcc: apt-get install gcc")
    with tempfile.TemporaryDirectory(prefix="vecreport-") as folder, ThreadPoolExecutor(jobs) as pool:
        paths = [Path(folder) / f"p{i}.c" for i in range(len(programs))]
        rows = list(pool.map(vectorizer_report, programs, [march] * len(programs), paths))
    return np.stack(rows)
