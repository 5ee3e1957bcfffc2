"""Search spaces: how fast programs are produced, and how good random ones are.

1. Throughput on one core: programs per second for sample + schedule + lower (+ emit), for matmul
   1024^3 and the ResNet layer conv2d (64,56,56,64,3,1,1).
2. Quality: the best of N random programs from the space, measured (1 thread) side by side with
   numpy/OpenBLAS (matmul) or PyTorch (conv2d) and the hand-written schedule (and, in the
   generated space, the "space point": the program of the space that matches the hand-written
   schedule; in the template space the hand-written schedule is itself a point).

``--space sketch`` (default) samples the generated space (Ansor sketches); ``--space template``
samples distinct configurations of the knob templates (AutoTVM). Every candidate gets one untimed
warm-up call before each timed round; numpy writes into a preallocated output (``out=``);
PyTorch's conv2d has no ``out=`` and allocates its output. The run is appended to
results/space.json (results/space_template.json for ``--space template``).

    python benchmarks/bench_space.py [--programs 300] [--seconds 5] [--rounds 7]
                                     [--space sketch|template] [--only matmul|conv2d]
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
from common import (  # noqa: E402
    blas_info,
    interleaved,
    kernel_timer,
    median,
    print_table,
    wall_timer,
    write_results,
)
from threadpoolctl import threadpool_limits  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.emit_c import emit_c, function_name  # noqa: E402
from autosched.lower import lower  # noqa: E402
from autosched.ops.schedules import conv2d_nchw_cpu, matmul_cpu  # noqa: E402
from autosched.runner import BuildError, compile_shared  # noqa: E402
from autosched.runner.load import load_kernel  # noqa: E402
from autosched.space.annotate import Annotation  # noqa: E402
from autosched.space.generated import SketchProgram, SketchSpace  # noqa: E402
from autosched.space.templates import instantiate, template_space  # noqa: E402

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


def timer(kernel: object, arrays: list[np.ndarray]) -> Callable[[], float]:
    """Seconds per call of a built kernel, timed in C (repeats of at least 100 ms)."""
    return kernel_timer(kernel, arrays, min_repeat_ms=100)


def reference_timer(label: str, inputs: list[np.ndarray]) -> Callable[[], float]:
    """numpy's matmul or PyTorch's conv2d on the same inputs, one thread."""
    if label == "matmul":
        a, b = inputs
        out = np.empty((a.shape[0], b.shape[1]), np.float32)
        return wall_timer(lambda: np.matmul(a, b, out=out), 20)
    import torch

    torch.set_num_threads(1)
    tx, tw = (torch.from_numpy(x) for x in inputs)
    return wall_timer(lambda: torch.nn.functional.conv2d(tx, tw, padding=1), 50)


def sampler(kind: str, wl: asc.Workload) -> Callable[[random.Random], asc.Schedule]:
    """A function drawing one random program of the ``kind`` space ("sketch" or "template")."""
    if kind == "sketch":
        space = SketchSpace(wl, TARGET)
        return lambda rng: space.schedule(space.sample(rng))
    configs = template_space(wl, TARGET)
    return lambda rng: instantiate(wl, TARGET, configs.get(rng.randrange(configs.size)))


def random_programs(kind: str, wl: asc.Workload, count: int, seed: int) -> list[asc.Schedule]:
    """``count`` random programs: sketch samples, or distinct template configurations."""
    if kind == "sketch":
        draw, rng = sampler(kind, wl), random.Random(seed)
        return [draw(rng) for _ in range(count)]
    return [instantiate(wl, TARGET, cfg) for cfg in template_space(wl, TARGET).sample(seed, count)]


def throughput(kind: str, wl: asc.Workload, seconds: float) -> tuple[float, float]:
    """Programs per second: (sample + schedule + lower, the same + emit)."""
    rng = random.Random(0)
    draw, tensors, vector_bytes = sampler(kind, wl), wl.tensors(), asc.Target.parse(TARGET).vector_bytes or 16
    rates = []
    for with_emit in (False, True):
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            func = lower(draw(rng), tensors)
            if with_emit:
                emit_c(func, 1, vector_bytes)
            n += 1
        rates.append(n / (time.perf_counter() - t0))
    return rates[0], rates[1]


def best_random(
    kind: str, wl: asc.Workload, count: int, inputs: list[np.ndarray]
) -> tuple[float, int, object, float, float]:
    """(seconds, errors, kernel) of the fastest of ``count`` random programs, the slowest build and
    the wall time of building all of them (two at a time), in seconds."""
    tensors, target = wl.tensors(), asc.Target.parse(TARGET)
    programs = random_programs(kind, wl, count, seed=1)
    sources = [emit_c(lower(s, tensors), 1, target.vector_bytes or 16) for s in programs]

    with tempfile.TemporaryDirectory() as cache:  # a fresh build cache: build times are real

        def build(src: str) -> tuple[Path | BuildError, float]:
            t0 = time.perf_counter()
            try:
                lib: Path | BuildError = compile_shared(src, target, timeout=60, cache_dir=Path(cache))
            except BuildError as err:
                lib = err
            return lib, time.perf_counter() - t0

        start = time.perf_counter()
        with ThreadPoolExecutor(2) as pool:
            built = list(pool.map(build, sources))
        build_wall = time.perf_counter() - start
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
    return best[0], errors, best[1], max(t for _, t in built), build_wall


def _specs(wl: asc.Workload) -> list:
    from autosched.runner.kernel import ArgSpec

    outs = {t.name for t in wl.outputs}
    return [ArgSpec(t.name, tuple(t.shape), t.dtype, t.name in outs) for t in wl.tensors()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=300, help="random programs built and timed per workload")
    ap.add_argument("--seconds", type=float, default=5.0, help="duration of each throughput measurement")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds of the final candidates")
    ap.add_argument("--space", choices=["sketch", "template"], default="sketch", help="which space to sample")
    ap.add_argument("--only", choices=sorted(CASES), help="one workload instead of both")
    args = ap.parse_args()
    rows, record = [], {}
    for label, ((name, wl_args), handwritten) in CASES.items():
        if args.only not in (None, label):
            continue
        wl = asc.get_workload(name, wl_args)
        lower_rate, emit_rate = throughput(args.space, wl, args.seconds)
        inputs = wl.random_inputs(0)
        t_best, errors, best, slowest_build, build_wall = best_random(args.space, wl, args.programs, inputs)
        tensors = wl.tensors()
        hand = asc.build(handwritten(tensors, TARGET), tensors, TARGET)
        outs = [np.zeros(t.shape, t.dtype) for t in wl.outputs]
        candidates = {"best random": timer(best, [*inputs, *outs])}
        if args.space == "sketch":  # (a template space's hand-written point is the hand-written schedule)
            point = asc.build(SketchSpace(wl, TARGET).schedule(SPACE_POINTS[label]), tensors, TARGET)
            candidates["space point"] = timer(point, [*inputs, *outs])
        candidates["hand-written"] = timer(hand, [*inputs, *outs])
        candidates[REFERENCE[label]] = reference_timer(label, inputs)
        with threadpool_limits(1):
            times = interleaved(candidates, args.rounds)
        med = {k: median(v) for k, v in times.items()}
        ref_name = REFERENCE[label]
        flops = wl.flops()

        gflops = {k: flops / t / 1e9 for k, t in med.items()}
        vs_ref = {k: f"{med[ref_name] / t:.2f}" for k, t in med.items()}
        rows.append(
            [
                label,
                f"{lower_rate:.0f}",
                f"{emit_rate:.0f}",
                f"{errors}/{args.programs}",
                f"{slowest_build:.1f}",
                f"{build_wall:.0f}",
                *(gflops.get(k, "-") for k in ("best random", "space point", "hand-written", ref_name)),
                vs_ref["best random"],
                vs_ref.get("space point", "-"),
            ]
        )
        record[label] = {
            "sample_lower_per_s": lower_rate,
            "sample_lower_emit_per_s": emit_rate,
            "programs": args.programs,
            "errors": errors,
            "slowest_build_s": slowest_build,
            "build_wall_s": build_wall,
            "seconds": times,
        }
        if args.space == "sketch":
            record[label]["sketches"] = [str(s) for s in SketchSpace(wl, TARGET).sketches]
    print(f"{args.space} space, 1 thread; numpy BLAS: {blas_info()}")
    print_table(
        [
            "workload",
            "sample+lower/s",
            "+emit/s",
            "errors",
            "slowest build s",
            "all builds s",
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
    payload = {"space": args.space, "rounds": args.rounds, "seconds": args.seconds, **record}
    print(f"results: {write_results('space' if args.space == 'sketch' else 'space_template', payload)}")


if __name__ == "__main__":
    main()
