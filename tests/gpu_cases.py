"""Cases shared by the GPU tests that run programs on a device (OpenCL on PoCL in CI, CUDA where a
GPU is): the hand-written schedules on dividing and non-dividing shapes, the template cases, the
workloads of the random-program tests, and the check against the numpy reference."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
from odd_shapes import ODD_SHAPES

import autosched as asc
from autosched.backends.gpu_conv import conv2d_gpu, direct_gpu
from autosched.backends.gpu_schedules import batch_matmul_gpu, dense_gpu, matmul_gpu
from autosched.space.generated import SketchProgram
from autosched.space.gpu_sketch import sample_gpu_annotation
from autosched.space.gpu_space import GpuSketchSpace

SMALL = {"block": 4, "reg": 2, "k_tile": 4}
TILED = {"threads": (2, 4, 4), "reg": 2, "rc_tile": 2}
#: (workload, arguments, hand-written GPU schedule, its parameters)
CASES: list[tuple[str, tuple, Callable[..., asc.Schedule], dict]] = [
    ("batch_matmul", (2, 32, 32, 16), batch_matmul_gpu, SMALL),
    ("batch_matmul", (3, 37, 45, 19), batch_matmul_gpu, SMALL),
    ("dense", (32, 64, 16), dense_gpu, SMALL),
    ("dense", (37, 45, 19), dense_gpu, SMALL),
    # one output per thread, guarded stores and a cooperative fetch under a guard (was a compile error)
    ("matmul", (37, 45, 19), matmul_gpu, {"block": 4, "reg": 1, "k_tile": 4}),
    # virtual threads: the register tile split over vthreads, on the epilogue and over a batch
    ("dense", (37, 45, 19), dense_gpu, {"block": 4, "reg": 4, "k_tile": 4, "vthreads": 2}),
    ("batch_matmul", (2, 32, 40, 16), batch_matmul_gpu,
     {"block": 4, "reg": (2, 4), "k_tile": 4, "vthreads": (1, 2)}),
    ("conv2d_nchw", (1, 4, 12, 12, 8, 3, 3, 1, 1), direct_gpu, {"threads": 32}),
    ("conv2d_nchw", (2, 5, 11, 9, 7, 3, 3, 2, 1), direct_gpu, {"threads": 32}),
    ("conv2d_nchw", (1, 4, 10, 10, 8, 3, 3, 1, 0), conv2d_gpu, TILED),
    ("conv2d_nchw", (1, 5, 11, 9, 7, 3, 3, 2, 1), conv2d_gpu, TILED),
    ("depthwise_conv2d_nchw", (1, 8, 12, 12, 3, 3, 1, 1), direct_gpu, {"threads": 64}),
    ("depthwise_conv2d_nchw", (2, 5, 11, 9, 3, 3, 2, 1), direct_gpu, {"threads": 32}),
    ("max_pool2d", (1, 8, 12, 12, 2, 2, 0), direct_gpu, {"threads": 64}),
    ("max_pool2d", (2, 5, 11, 9, 3, 2, 1), direct_gpu, {"threads": 32}),
    ("avg_pool2d", (1, 8, 12, 12, 2, 2, 0), direct_gpu, {"threads": 64}),
    ("avg_pool2d", (2, 5, 11, 9, 3, 2, 1), direct_gpu, {"threads": 32}),
]
CASE_IDS = [f"{c[2].__name__}{c[1]}" for c in CASES]

#: workloads with a GPU template, at shapes that divide none of its tiles
TEMPLATE_CASES = [("dense", (20, 24, 12)), ("conv2d_nchw", (1, 4, 9, 7, 6, 3, 3, 1, 1))]

#: the random-program tests' workloads: small shapes, most of them not dividing any tile size
WORKLOADS = [
    *ODD_SHAPES,
    ("global_avg_pool2d", (1, 3, 7, 9)),
    ("softmax", (3, 130)),
    ("relu", (7, 33)),
    ("add", (5, 17)),
]


def draw_unchecked(space: GpuSketchSpace, rng: random.Random) -> SketchProgram:
    """A program as the annotation draws it, before the sampler's limit check."""
    index = rng.randrange(len(space.sketches))
    return SketchProgram(index, sample_gpu_annotation(space.sketches[index], space.ops, space.target, rng))


def check_outputs(task: asc.Task, f: Callable[..., object], seed: int = 1) -> None:
    """Run ``f`` on random inputs and compare every output with the workload's numpy reference."""
    inputs = task.workload.random_inputs(seed)
    want = task.workload.reference(*[x.copy() for x in inputs])
    want = [want] if isinstance(want, np.ndarray) else list(want)
    outs = [np.full(w.shape, np.nan, dtype=np.float32) for w in want]
    f(*inputs, *outs)
    for got, ref in zip(outs, want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
