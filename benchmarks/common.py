"""Shared helpers for the benchmarks: a clean BLAS environment, interleaved timing, result files."""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def clean_blas_env() -> None:
    """Re-run this process without the variables that force a slow OpenBLAS kernel.

    OpenBLAS reads them once, when numpy loads it: this must run before numpy is imported (it
    raises otherwise, unless the variables are already gone: a benchmark importing another one).
    The new process gets the same interpreter options and arguments.
    """
    if "numpy" in sys.modules and any(v in os.environ for v in BLAS_ENV):
        raise RuntimeError("clean_blas_env() must be called before numpy is imported")
    if any(v in os.environ for v in BLAS_ENV):
        env = {k: v for k, v in os.environ.items() if k not in BLAS_ENV}
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def blas_env() -> dict[str, str]:
    """The OpenBLAS tuning variables set in this process (empty after :func:`clean_blas_env`)."""
    return {v: os.environ[v] for v in BLAS_ENV if v in os.environ}


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


def kernel_timer(
    kernel: Any, arrays: Sequence[Any], number: int = 1, min_repeat_ms: float = 0
) -> Callable[[], float]:
    """A timer for a built autosched kernel: seconds per call, timed in C (``Kernel.time``, one
    repeat of ``number`` calls, or more calls until the repeat lasts ``min_repeat_ms``), after one
    untimed warm-up call, like :func:`wall_timer` gives the reference libraries."""

    def run() -> float:
        kernel(*arrays)
        return float(kernel.time(*arrays, number=number, repeat=1, min_repeat_ms=min_repeat_ms)[0])

    return run


def network_kernel_timers(net: Any, x: Any, tag: str = "", min_repeat_ms: float = 20) -> tuple[dict, dict]:
    """Per distinct task of the network ``net`` (``asc.build_network``): a :func:`kernel_timer`
    of its kernel on copies of the arrays it gets in a forward pass of ``x`` (keys: the workload,
    then ``tag``), and how many times the pass runs it (keys: the workload)."""
    timers: dict[str, Callable[[], float]] = {}
    count: dict[str, int] = {}
    for step in net.steps(x):  # the network's own order: each kernel gets what it gets in a call
        wl = step.group.workload
        if wl is None:
            continue
        count[str(wl)] = count.get(str(wl), 0) + 1
        if f"{wl}{tag}" not in timers:
            arrays = [a.copy() for a in step.arrays]
            timers[f"{wl}{tag}"] = kernel_timer(net.kernels[wl], arrays, min_repeat_ms=min_repeat_ms)
    return timers, count


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


@contextmanager
def fresh_kernel_cache(enabled: bool = True) -> Iterator[None]:
    """Inside the block, compiled kernels go to a new empty cache (``AUTOSCHED_CACHE``), removed
    afterwards: a tuning run then compiles every program it measures, as a user's first run of a
    workload does, instead of loading the libraries an earlier benchmark run left in the shared
    cache (which makes compiling look free and the search's share of the wall time look larger).
    With ``enabled`` False the block uses the cache as it is."""
    if not enabled:
        yield
        return
    old = os.environ.get("AUTOSCHED_CACHE")
    path = tempfile.mkdtemp(prefix="autosched-bench-kernels-")
    os.environ["AUTOSCHED_CACHE"] = path
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("AUTOSCHED_CACHE", None)
        else:
            os.environ["AUTOSCHED_CACHE"] = old
        shutil.rmtree(path, ignore_errors=True)


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def machine() -> dict[str, object]:
    """What a result was measured on: CPU model, cores, OS, Python and library versions."""
    info: dict[str, object] = {
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "blas_env": blas_env(),
    }
    for module in ("numpy", "torch"):
        if module in sys.modules:
            info[module] = getattr(sys.modules[module], "__version__", "?")
    return info


def write_results(name: str, payload: dict[str, Any]) -> Path:
    """Append this run (``payload`` with the date and the machine added) to ``results/NAME.json``.

    The file holds a JSON list of runs, oldest first. A file in the older format (one run as a
    single JSON object) becomes the first entry of the list. Returns the file's path.
    """
    RESULTS.mkdir(exist_ok=True)
    run = {"benchmark": name, "date": time.strftime("%Y-%m-%d %H:%M:%S %z"), **machine(), **payload}
    path = RESULTS / f"{name}.json"
    runs = load_results(path)
    runs.append(run)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(runs, indent=2) + "\n")
    os.replace(tmp, path)
    return path


def load_results(path: Path) -> list[dict[str, Any]]:
    """The runs in a results file, oldest first ([] if there is none); old single-run files too."""
    if not path.exists():
        return []
    data = json.loads(path.read_text())
    return data if isinstance(data, list) else [data]


def print_table(headers: list[str], rows: list[list[object]]) -> None:
    """A plain aligned table on stdout."""
    cells = [headers] + [[f"{c:.1f}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for n, r in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
        if n == 0:
            print("  ".join("-" * w for w in widths))
