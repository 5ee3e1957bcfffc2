"""Packed convolution kernels: blocks of 8 vs 16 output channels, the hand-written schedule, vs PyTorch.

A network's convolutions on a CPU read their kernel packed by blocks of output channels
(``autosched.graph.layout.conv_blocks``: one float32 vector, 16 channels with AVX-512, else 8).
For each ResNet-18 layer this builds ``fused_conv2d_packed``'s hand-written schedule with each
block size, checks it against PyTorch's output and times both block sizes and PyTorch's
``conv2d`` (oneDNN) interleaved, medians over ``--rounds``, GFLOP/s. Appended to
results/conv_blocks.json.

    python benchmarks/bench_conv_blocks.py [--rounds 7] [--blocks 8 16]
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from common import clean_blas_env

clean_blas_env()

import numpy as np  # noqa: E402
from common import cpu_name, interleaved, kernel_timer, median, print_table, wall_timer, write_results  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.graph.fused import unpack_kernel  # noqa: E402
from autosched.ops.schedules import default_schedule  # noqa: E402
from autosched.target import Target  # noqa: E402

THREADS = len(os.sched_getaffinity(0))
#: ResNet-18 layers (C, H, W, K, R, stride, pad)
LAYERS = {
    "(64,56,56,64,3,1,1)": (64, 56, 56, 64, 3, 1, 1),
    "(128,28,28,128,3,1,1)": (128, 28, 28, 128, 3, 1, 1),
    "(256,14,14,512,3,2,1)": (256, 14, 14, 512, 3, 2, 1),
    "(64,56,56,128,1,2,0)": (64, 56, 56, 128, 1, 2, 0),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--blocks", type=int, nargs="+", default=[8, 16])
    opts = ap.parse_args()
    try:
        import torch
    except ImportError:
        torch = None
        print("PyTorch is not installed (pip install torch): timing autosched alone")
    target = f"c -num-threads={THREADS}"
    timers: dict[str, Callable[[], float]] = {}
    flops: dict[str, int] = {}
    for name, (c, h, w, k, r, stride, pad) in LAYERS.items():
        for block in opts.blocks:
            args = (1, c, h, w, k, r, r, stride, pad, block, "")
            task = asc.Task("fused_conv2d_packed", args, target=target)
            sched = default_schedule(task.workload, task.target)[0]
            kernel = asc.build(sched, task.workload.tensors(), task.target)
            x, weight = task.workload.random_inputs(0)
            out = np.zeros(task.workload.outputs[0].shape, np.float32)
            kernel(x, weight, out)
            if torch is not None:
                ref = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(unpack_kernel(weight)),
                                                 stride=stride, padding=pad).numpy()
                np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)
            timers[f"{name} blocks of {block}"] = kernel_timer(kernel, [x, weight, out], min_repeat_ms=50)
            flops[name] = task.flops()
        if torch is not None:
            torch.set_num_threads(THREADS)
            tx, tw = torch.from_numpy(x), torch.from_numpy(unpack_kernel(weight))
            timers[f"{name} pytorch"] = wall_timer(
                lambda tx=tx, tw=tw, stride=stride, pad=pad: torch.nn.functional.conv2d(
                    tx, tw, stride=stride, padding=pad), 10)
    with threadpool_limits(THREADS):
        times = interleaved(timers, opts.rounds)
    columns = [f"blocks of {b}" for b in opts.blocks] + (["pytorch"] if torch is not None else [])
    gflops = {key: flops[key.split()[0]] / median(times[key]) / 1e9 for key in timers}
    print(f"{cpu_name()}; {THREADS} threads; hand-written packed conv2d, GFLOP/s (median of {opts.rounds})")
    print_table(["layer", *columns], [[name, *(f"{gflops[f'{name} {col}']:.1f}" for col in columns)]
                                      for name in LAYERS])
    payload = {"threads": THREADS, "rounds": opts.rounds, "target": str(Target.parse(target)),
               "gflops": gflops}
    print(f"\nresults: {write_results('conv_blocks', payload)}")


if __name__ == "__main__":
    main()
