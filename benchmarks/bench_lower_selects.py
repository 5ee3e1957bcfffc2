"""What the lowering's select splitting buys: ResNet-18's kernels and network, with and without it.

Every kernel of ResNet-18's untuned network is built twice from the same schedule: lowered as
usual, and lowered without :func:`autosched.lower.selects.split_selects` (the vectorized loops
that select per element, such as each convolution's padded copy, then print as scalar loops).
Each pair is timed alone in C in interleaved rounds (medians); then the two networks, alternating
calls. Results go to benchmarks/results/lower_selects.json.

    python benchmarks/bench_lower_selects.py [--threads 2] [--rounds 7] [--calls 25]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from common import clean_blas_env

clean_blas_env()

import numpy as np  # noqa: E402
from common import interleaved, median, network_kernel_timers, print_table, write_results  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.task import LOWERING_CACHE  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import graph_models  # noqa: E402  (the ONNX model writer of the tests)

LOWER = sys.modules["autosched.lower"]  # the package (``asc.lower`` is the function)


@contextmanager
def without_split() -> Iterator[None]:
    """Lowering without select splitting (the lowering cache emptied on entry and exit)."""
    keep = LOWER.split_selects
    LOWER.split_selects = lambda body, ranges: body
    LOWERING_CACHE.clear()
    try:
        yield
    finally:
        LOWER.split_selects = keep
        LOWERING_CACHE.clear()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds of the kernel timings")
    ap.add_argument("--calls", type=int, default=25, help="alternating calls of the two networks")
    args = ap.parse_args()
    graph = asc.from_onnx(graph_models.resnet18(224))
    target = f"c -num-threads={args.threads}"
    x = np.random.default_rng(0).standard_normal(graph.shapes["x"]).astype(np.float32)
    new = asc.build_network(graph, target=target)
    with without_split():
        old = asc.build_network(graph, target=target)
    error = float(np.abs(np.asarray(new(x)) - np.asarray(old(x))).max())
    timers = network_kernel_timers(new, x)[0] | network_kernel_timers(old, x, " (no split)")[0]
    times = {k: median(v) for k, v in interleaved(timers, args.rounds, settle=0.1).items()}  # type: ignore[arg-type]
    tasks = sorted((k for k in times if not k.endswith(" (no split)")), key=lambda k: -times[k])
    rows = [[f"{times[k + ' (no split)'] * 1e3:.3f}", f"{times[k] * 1e3:.3f}",
             f"{times[k + ' (no split)'] / times[k]:.2f}", k] for k in tasks]  # fmt: skip
    print(f"ResNet-18 224², {args.threads} threads: each kernel alone, medians of {args.rounds} rounds")
    print_table(["ms, no split", "ms, split", "ratio", "task"], rows)
    calls: dict[str, list[float]] = {"no split": [], "split": []}
    for _ in range(3):
        old(x), new(x)
    for _ in range(args.calls):
        for name, net in (("no split", old), ("split", new)):
            t0 = time.perf_counter()
            net(x)
            calls[name].append(time.perf_counter() - t0)
    network = {k: median(v) * 1e3 for k, v in calls.items()}
    print(f"network, alternating calls (medians of {args.calls}): no split {network['no split']:.2f} ms, "
          f"split {network['split']:.2f} ms ({network['no split'] / network['split']:.2f}x); "
          f"max |difference| {error:.1e}")  # fmt: skip
    payload = {"threads": args.threads, "kernels_s": times, "network_ms": network, "max_difference": error}
    print(f"results: {write_results('lower_selects', payload)}")


if __name__ == "__main__":
    main()
