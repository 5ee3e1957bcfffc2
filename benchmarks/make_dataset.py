"""Make a multi-workload dataset of real measurements, for cost-model quality on unseen workloads.

Random programs of the generated (sketch) space of several operators and shapes (matmuls, dense,
batch matmul, ResNet-like conv2d layers in NCHW and NHWC, depthwise) are built with the system's
gcc, checked against the reference and timed on one thread with the robust settings of the replay
log (many one-run repeats, so that a busy machine still gives usable labels). One log per workload
goes to ``--out`` (resumable: run again to continue). Then rank each workload with a model
trained on the others only:

    python benchmarks/make_dataset.py [--programs 64] [--out benchmarks/results/dataset]
    python benchmarks/bench_model.py --only-quality --unseen --log benchmarks/results/dataset/*.jsonl
"""

from __future__ import annotations

import argparse
from pathlib import Path

from make_replay_log import OPTION, TARGET

import autosched as asc

#: label -> (operator, arguments): diverse loop structures, each run a few ms on one core
WORKLOADS: dict[str, tuple[str, tuple[object, ...]]] = {
    "matmul_256": ("matmul", (256, 256, 256)),
    "matmul_128x512x256": ("matmul", (128, 512, 256)),
    "matmul_512x64x384": ("matmul", (512, 64, 384)),
    "matmul_bt_256": ("matmul", (256, 256, 256, "float32", True)),
    "dense_64x512x512": ("dense", (64, 512, 512)),
    "batch_matmul_8x128x128x64": ("batch_matmul", (8, 128, 128, 64)),
    "conv_64_28_3x3": ("conv2d_nchw", (1, 64, 28, 28, 64, 3, 3, 1, 1)),
    "conv_128_14_3x3": ("conv2d_nchw", (1, 128, 14, 14, 128, 3, 3, 1, 1)),
    "conv_256_14_3x3_s2": ("conv2d_nchw", (1, 256, 14, 14, 256, 3, 3, 2, 1)),
    "conv_64_28_1x1": ("conv2d_nchw", (1, 64, 28, 28, 128, 1, 1, 1, 0)),
    "conv_nhwc_28_3x3": ("conv2d_nhwc", (1, 28, 28, 64, 64, 3, 3, 1, 1)),
    "depthwise_128_28": ("depthwise_conv2d_nchw", (1, 128, 28, 28, 3, 3, 1, 1)),
    # the second dozen (2026-12-05): other shapes of the same operators, and other operators
    "matmul_384x384x128": ("matmul", (384, 384, 128)),
    "matmul_64x1024x256": ("matmul", (64, 1024, 256)),
    "matmul_bt_128x256x512": ("matmul", (128, 256, 512, "float32", True)),
    "batch_matmul_4x64x256x128": ("batch_matmul", (4, 64, 256, 128)),
    "fused_dense_128x256x1024": ("fused_dense", (128, 256, 1024, "bias,relu")),
    "conv_32_56_3x3": ("conv2d_nchw", (1, 32, 56, 56, 64, 3, 3, 1, 1)),
    "conv_256_14_1x1": ("conv2d_nchw", (1, 256, 14, 14, 256, 1, 1, 1, 0)),
    "conv_128_28_3x3_s2": ("conv2d_nchw", (1, 128, 28, 28, 128, 3, 3, 2, 1)),
    "conv_nhwc_14_3x3": ("conv2d_nhwc", (1, 14, 14, 128, 128, 3, 3, 1, 1)),
    "conv_packed_64_28_3x3": ("fused_conv2d_packed", (1, 64, 28, 28, 64, 3, 3, 1, 1, 16)),
    "depthwise_256_28_s2": ("depthwise_conv2d_nchw", (1, 256, 28, 28, 3, 3, 2, 1)),
    "softmax_256x1024": ("softmax", (256, 1024)),
    # the third dozen (2026-12-05)
    "matmul_96x768x192": ("matmul", (96, 768, 192)),
    "matmul_bt_512x128x128": ("matmul", (512, 128, 128, "float32", True)),
    "batch_matmul_16x64x64x64": ("batch_matmul", (16, 64, 64, 64)),
    "fused_batch_matmul_8x64x128x64": ("fused_batch_matmul", (8, 64, 128, 64, "relu")),
    "conv_16_112_3x3": ("conv2d_nchw", (1, 16, 112, 112, 16, 3, 3, 1, 1)),
    "conv_128_28_1x1": ("conv2d_nchw", (1, 128, 28, 28, 64, 1, 1, 1, 0)),
    "conv_96_14_3x3": ("conv2d_nchw", (1, 96, 14, 14, 192, 3, 3, 1, 1)),
    "conv_nhwc_56_3x3": ("conv2d_nhwc", (1, 56, 56, 32, 32, 3, 3, 1, 1)),
    "fused_conv_64_28_3x3": ("fused_conv2d", (1, 64, 28, 28, 64, 3, 3, 1, 1, 1, "bias,relu")),
    "depthwise_64_56": ("depthwise_conv2d_nchw", (1, 64, 56, 56, 3, 3, 1, 1)),
    "max_pool_64_56": ("max_pool2d", (1, 64, 56, 56, 3, 2, 1)),
    "layer_norm_256x768": ("layer_norm", (256, 768)),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=64, help="random programs per workload")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "dataset")
    parser.add_argument("--only", nargs="*", choices=sorted(WORKLOADS), help="these workloads only")
    parser.add_argument("--first", type=int, default=len(WORKLOADS),
                        help="the first N workloads of the table only (12: the first dozen, 24: two)")
    parser.add_argument("--seed", type=int, default=0)
    opts = parser.parse_args()
    opts.out.mkdir(parents=True, exist_ok=True)
    for label in opts.only or list(WORKLOADS)[: opts.first]:
        name, args = WORKLOADS[label]
        task = asc.Task(name, args, target=TARGET)
        log = opts.out / f"{label}.jsonl"
        print(f"{label}: {task}, {opts.programs} random programs -> {log}", flush=True)
        result = asc.tune(task, trials=opts.programs, log=log, tuner="random", space="sketch",
                          seed=opts.seed, option=OPTION, progress=False)
        best = result.best_gflops or 0.0
        print(f"  {result.trials} trials ({result.valid_trials} valid); best {best:.2f} GFLOP/s", flush=True)


if __name__ == "__main__":
    main()
