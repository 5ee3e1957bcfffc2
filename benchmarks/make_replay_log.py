"""Make the replay log of the search tests: thousands of real measurements of one small workload.

Random programs of the generated (sketch) space of a small workload are built with the system's
gcc, checked against the reference and timed on one thread, each logged as it is made (the log
in ``benchmarks/results/logs/`` is resumable: run the command again to continue). At the end the
log is written gzip-compressed to ``--out`` (by default under ``tests/data/``), where
:class:`autosched.search.replay.ReplayRunner` serves it to the tuner tests as if it were a device.

    python benchmarks/make_replay_log.py [--case matmul128|conv2d_small] [--trials 3000]
    python benchmarks/make_replay_log.py --pack-only      # only compress what the log has so far
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import autosched as asc
from autosched.runner.measure import MeasureOption

TARGET = "c -num-threads=1"
CASES = {
    "matmul128": ("matmul", (128, 128, 128)),
    "conv2d_small": ("conv2d_nchw", (1, 16, 14, 14, 32, 3, 3, 1, 1)),
}
ROOT = Path(__file__).resolve().parent
LOGS = ROOT / "results" / "logs"
DATA = ROOT.parent / "tests" / "data"
#: robust timing on a busy machine: 31 repeats of one kernel run each, the median kept. Repeats
#: this short mostly fit between two preemptions; with repeats of 5 ms (3 of them) on two cores
#: shared by ~8 busy processes the recorded times were mostly noise (re-measured, the log's
#: top 60 ran no faster than its middle), with these a program's time repeats within a few %.
OPTION = MeasureOption(number=1, repeat=31, min_repeat_ms=0.0, build_timeout=60.0, run_timeout=20.0)


def pack(log: Path, out: Path) -> int:
    """Write ``log`` gzip-compressed (deterministic: no file name or time in the header) to ``out``."""
    data = log.read_bytes()
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("wb") as raw, gzip.GzipFile("", "wb", 9, raw, mtime=0) as f:
        f.write(data)
    return data.count(b"\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=sorted(CASES), default="matmul128")
    parser.add_argument("--trials", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="compressed log (default tests/data/replay_CASE.jsonl.gz)")
    parser.add_argument("--pack-only", action="store_true", help="compress the log so far, measure nothing")
    opts = parser.parse_args()
    name, args = CASES[opts.case]
    task = asc.Task(name, args, target=TARGET)
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"replay_{opts.case}.jsonl"
    out = opts.out or DATA / f"replay_{opts.case}.jsonl.gz"
    if not opts.pack_only:
        print(f"{task}: {opts.trials} random programs of the sketch space, log {log}", flush=True)
        result = asc.tune(
            task, trials=opts.trials, log=log, tuner="random", space="sketch", seed=opts.seed,
            option=OPTION, progress=True,
        )
        print(f"{result.trials} trials ({result.valid_trials} valid, errors {result.errors}); "
              f"best {result.best_gflops or 0:.2f} GFLOP/s", flush=True)
    lines = pack(log, out)
    print(f"{lines} lines -> {out} ({out.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
