"""Shared helpers for the benchmarks: a clean BLAS environment, interleaved timing, result files."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def clean_blas_env() -> None:
    """Re-run this process without the variables that force a slow OpenBLAS kernel.

    Must be called before numpy is imported.
    """
    if any(v in os.environ for v in BLAS_ENV):
        env = {k: v for k, v in os.environ.items() if k not in BLAS_ENV}
        os.execve(sys.executable, [sys.executable, *sys.argv], env)


def blas_info() -> str:
    """Which BLAS numpy uses and which kernel (threadpoolctl), e.g. 'openblas SkylakeX'."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unknown (pip install threadpoolctl)"
    libs = [
        f"{i['internal_api']} {i.get('architecture', '?')} {i.get('version', '')}".strip()
        for i in threadpool_info()
        if i["user_api"] == "blas"
    ]
    return ", ".join(libs) or "none found"


def cpu_name() -> str:
    """The CPU model string."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def interleaved(
    candidates: dict[str, Callable[[], float]], rounds: int, settle: float = 0.5
) -> dict[str, list[float]]:
    """Call each candidate's timer once per round, in turn, so noise hits all of them alike.

    Before each timer the process idles ``settle`` seconds: the thread pools of OpenBLAS and
    OpenMP spin for a while after their last call and would steal cores from the next candidate.
    Each timer returns seconds per call; the result maps names to the per-round values.
    """
    out: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, timer in candidates.items():
            time.sleep(settle)
            out[name].append(timer())
    return out


def wall_timer(fn: Callable[[], object], number: int) -> Callable[[], float]:
    """A timer for a Python callable: seconds per call over ``number`` calls, after one untimed
    warm-up call (the reference libraries' thread pools and caches are cold after an idle pause)."""

    def run() -> float:
        fn()
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        return (time.perf_counter() - t0) / number

    return run


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def write_results(name: str, payload: dict) -> Path:
    """Write ``results/NAME.json`` with the date and machine added; return its path."""
    RESULTS.mkdir(exist_ok=True)
    payload = {
        "benchmark": name,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        **payload,
    }
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def print_table(headers: list[str], rows: list[list[object]]) -> None:
    """A plain aligned table on stdout."""
    cells = [headers] + [[f"{c:.1f}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, r in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
        if n == 0:
            print("  ".join("-" * w for w in widths))
