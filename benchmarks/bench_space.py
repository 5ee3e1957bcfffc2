"""Generated search spaces: how fast programs are produced, and how good random ones are.

1. Throughput on one core: programs per second for sample + schedule + lower (+ emit), for matmul
   1024^3 and the ResNet layer conv2d (64,56,56,64,3,1,1).
2. Quality: the best of N random programs from the generated space, measured (1 thread) side by
   side with numpy/OpenBLAS (matmul) or PyTorch (conv2d) and the hand-written schedule.

    python benchmarks/bench_space.py [--programs 300] [--seconds 5]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import clean_blas_env

clean_blas_env()

import numpy as np  # noqa: E402
from common import blas_info, interleaved, median, print_table, wall_timer, write_results  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.emit_c import emit_c, function_name  # noqa: E402
from autosched.lower import lower  # noqa: E402
from autosched.ops.schedules import conv2d_nchw_cpu, matmul_cpu  # noqa: E402
from autosched.runner import BuildError, compile_shared  # noqa: E402
from autosched.runner.load import load_kernel  # noqa: E402
from autosched.space.annotate import Annotation  # noqa: E402
from autosched.space.generated import SketchProgram, SketchSpace  # noqa: E402

TARGET = "c -num-threads=1"
CASES = {
    "matmul": (("matmul", (1024, 1024, 1024)), matmul_cpu),
    "conv2d": (("conv2d_nchw", (1, 64, 56, 56, 64, 3, 3, 1, 1)), conv2d_nchw_cpu),
}


REFERENCE = {"matmul": "numpy", "conv2d": "pytorch"}

# Programs of the generated space that match the hand-written schedules: the space contains them.
SPACE_POINTS = {
    "matmul": SketchProgram(
        1,
        Annotation(  # tile_cache: 6x64 register tile, k by 4, B packed per column
            tiles={"C": {"i": [1, 1, 6], "j": [1, 1, 64], "k": [4]}},
            parallel={"C": 0},
            vectorize={"C": True},
            unroll={"C": 512},
            pack={"C": "B"},
        ),
    ),
    "conv2d": SketchProgram(
        1,
        Annotation(  # tile_cache: 6 channels x 56 columns, padding computed once
            tiles={
                "conv": {
                    "n": [1, 1, 1],
                    "f": [1, 1, 6],
                    "y": [1, 1, 1],
                    "x": [1, 1, 56],
                    "rc": [1],
                    "ry": [1],
                    "rx": [1],
                }
            },
            parallel={"conv": 0, "pad": 0},
            vectorize={"conv": True, "pad": True},
            unroll={"conv": 512, "pad": 0},
            location={"pad": "root"},
            pack={"conv": ""},
        ),
    ),
}


def kernel_timer(kernel: object, arrays: list[np.ndarray]) -> Callable[[], float]:
    """Seconds per call of a built kernel, timed in C."""
    return lambda: kernel.time(*arrays, number=1, repeat=1, min_repeat_ms=100)[0]  # type: ignore[attr-defined]


def reference_timer(label: str, inputs: list[np.ndarray]) -> Callable[[], float]:
    """numpy's matmul or PyTorch's conv2d on the same inputs, one thread."""
    if label == "matmul":
        a, b = inputs
        return wall_timer(lambda: a @ b, 20)
    import torch

    torch.set_num_threads(1)
    tx, tw = (torch.from_numpy(x) for x in inputs)
    return wall_timer(lambda: torch.nn.functional.conv2d(tx, tw, padding=1), 50)


def throughput(space: SketchSpace, seconds: float) -> tuple[float, float]:
    """Programs per second: (sample + schedule + lower, the same + emit)."""
    rng = random.Random(0)
    tensors = space.workload.tensors()
    rates = []
    for with_emit in (False, True):
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            func = lower(space.schedule(space.sample(rng)), tensors)
            if with_emit:
                emit_c(func, 1, space.target.vector_bytes or 16)
            n += 1
        rates.append(n / (time.perf_counter() - t0))
    return rates[0], rates[1]


def best_random(space: SketchSpace, count: int, inputs: list[np.ndarray]) -> tuple[float, int, object, float]:
    """(seconds, errors, kernel, slowest build in seconds) of the fastest of ``count`` random programs."""
    rng = random.Random(1)
    wl, tensors = space.workload, space.workload.tensors()
    sources = [
        emit_c(lower(space.schedule(space.sample(rng)), tensors), 1, space.target.vector_bytes or 16)
        for _ in range(count)
    ]

    with tempfile.TemporaryDirectory() as cache:  # a fresh build cache: build times are real

        def build(src: str) -> tuple[Path | BuildError, float]:
            t0 = time.perf_counter()
            try:
                lib: Path | BuildError = compile_shared(src, space.target, timeout=60, cache_dir=Path(cache))
            except BuildError as err:
                lib = err
            return lib, time.perf_counter() - t0

        with ThreadPoolExecutor(2) as pool:
            built = list(pool.map(build, sources))
        kernels = [
            lib
            if isinstance(lib, Exception)
            else load_kernel(lib, function_name("default_function"), _specs(wl))
            for lib, _ in built
        ]
    outs = [np.zeros(t.shape, t.dtype) for t in wl.outputs]
    want = wl.reference(*inputs)[0]
    best: tuple[float, object] = (float("inf"), None)
    errors = 0
    for kernel in kernels:
        if isinstance(kernel, Exception):
            errors += 1
            continue
        kernel(*inputs, *outs)
        if not np.allclose(outs[0], want, rtol=1e-3, atol=1e-3):
            errors += 1
            continue
        t = kernel.time(*inputs, *outs, number=1, repeat=1, min_repeat_ms=10)[0]
        if t < best[0]:
            best = (t, kernel)
    return best[0], errors, best[1], max(t for _, t in built)


def _specs(wl: asc.Workload) -> list:
    from autosched.runner.kernel import ArgSpec

    outs = {t.name for t in wl.outputs}
    return [ArgSpec(t.name, tuple(t.shape), t.dtype, t.name in outs) for t in wl.tensors()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=300, help="random programs built and timed per workload")
    ap.add_argument("--seconds", type=float, default=5.0, help="duration of each throughput measurement")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds of the final candidates")
    args = ap.parse_args()
    rows, record = [], {}
    for label, ((name, wl_args), handwritten) in CASES.items():
        wl = asc.get_workload(name, wl_args)
        space = SketchSpace(wl, TARGET)
        lower_rate, emit_rate = throughput(space, args.seconds)
        inputs = wl.random_inputs(0)
        t_best, errors, best, slowest_build = best_random(space, args.programs, inputs)
        tensors = wl.tensors()
        hand = asc.build(handwritten(tensors, TARGET), tensors, TARGET)
        point = asc.build(space.schedule(SPACE_POINTS[label]), tensors, TARGET)
        outs = [np.zeros(t.shape, t.dtype) for t in wl.outputs]
        candidates = {
            "best random": kernel_timer(best, [*inputs, *outs]),
            "space point": kernel_timer(point, [*inputs, *outs]),
            "hand-written": kernel_timer(hand, [*inputs, *outs]),
            REFERENCE[label]: reference_timer(label, inputs),
        }
        with threadpool_limits(1):
            times = interleaved(candidates, args.rounds)
        med = {k: median(v) for k, v in times.items()}
        ref_name = REFERENCE[label]
        flops = wl.flops()
        rows.append(
            [
                label,
                f"{lower_rate:.0f}",
                f"{emit_rate:.0f}",
                f"{errors}/{args.programs}",
                f"{slowest_build:.1f}",
                flops / med["best random"] / 1e9,
                flops / med["space point"] / 1e9,
                flops / med["hand-written"] / 1e9,
                flops / med[ref_name] / 1e9,
                f"{med[ref_name] / med['best random']:.2f}",
                f"{med[ref_name] / med['space point']:.2f}",
            ]
        )
        record[label] = {
            "sample_lower_per_s": lower_rate,
            "sample_lower_emit_per_s": emit_rate,
            "programs": args.programs,
            "errors": errors,
            "slowest_build_s": slowest_build,
            "seconds": times,
            "sketches": [str(s) for s in space.sketches],
        }
    print(f"1 thread; numpy BLAS: {blas_info()}")
    print_table(
        [
            "workload",
            "sample+lower/s",
            "+emit/s",
            "errors",
            "slowest build s",
            "best random",
            "space point",
            "hand-written",
            "reference",
            "random/ref",
            "point/ref",
        ],
        rows,
    )
    print(
        "(GFLOP/s; reference: numpy/OpenBLAS for matmul, PyTorch/oneDNN for conv2d; 'space point' is a "
        "program of the generated space written down by hand, see SPACE_POINTS)"
    )
    print(f"results: {write_results('space', record)}")


if __name__ == "__main__":
    main()
