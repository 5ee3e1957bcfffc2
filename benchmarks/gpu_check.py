"""The CUDA check of issue 9 (``scripts/gpu-check`` runs it): NVRTC-compile every hand-written GPU
schedule for sm_80 and sm_90 (no GPU needed), then, where a CUDA device is visible, run the
hand-written matmul 2048^3 and conv2d (C=64, H=W=56, K=64, 3x3, pad 1) and check them against numpy,
time them, tune each for 64 trials with its GPU template, and print GFLOP/s and the fraction of
the device's fp32 peak (SMs x 128 fp32 lanes x 2 x clock; right for Ampere and Hopper).

    python benchmarks/gpu_check.py [--compile-only] [--trials 64]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from common import print_table

import autosched as asc
from autosched.backends import CudaBackend
from autosched.lower import lower
from autosched.ops.gpu_conv import conv2d_gpu, direct_gpu
from autosched.ops.gpu_schedules import (
    batch_matmul_gpu,
    dense_gpu,
    elementwise_gpu,
    matmul_gpu,
    softmax_gpu,
)
from autosched.runner.cuda import CudaUnavailable, cuda_context, nvrtc_compile
from autosched.target import Target

MATMUL = ("matmul", (2048, 2048, 2048))
CONV = ("conv2d_nchw", (1, 64, 56, 56, 64, 3, 3, 1, 1))

#: (workload, arguments, schedule, its parameters): every hand-written GPU schedule
SCHEDULES = [
    (*MATMUL, matmul_gpu, {"block": 16, "reg": 4, "k_tile": 8}),
    ("batch_matmul", (8, 512, 512, 512), batch_matmul_gpu, {"block": 16, "reg": 4, "k_tile": 8}),
    ("dense", (1024, 1024, 1024), dense_gpu, {"block": 16, "reg": 4, "k_tile": 8}),
    (*CONV, conv2d_gpu, {"threads": (4, 4, 16), "reg": 4, "rc_tile": 8}),
    (*CONV, direct_gpu, {"threads": 128}),
    ("depthwise_conv2d_nchw", (1, 64, 56, 56, 3, 3, 1, 1), direct_gpu, {"threads": 128}),
    ("max_pool2d", (1, 64, 112, 112, 3, 2, 1), direct_gpu, {"threads": 128}),
    ("avg_pool2d", (1, 64, 112, 112, 3, 2, 1), direct_gpu, {"threads": 128}),
    ("softmax", (1024, 1024), softmax_gpu, {"threads": 128}),
    ("relu", (1024, 1024), elementwise_gpu, {"threads": 256}),
]


def _schedule(name: str, args: tuple, schedule: object, kw: dict) -> tuple[asc.Task, asc.Schedule]:
    task = asc.Task(name, args, target="cuda")
    return task, schedule(task.workload.tensors(), "cuda", **kw)  # type: ignore[operator]


def compile_all(archs: tuple[str, ...] = ("sm_80", "sm_90")) -> None:
    """NVRTC-compile every hand-written schedule for each of ``archs`` (PTX and CUBIN); a table."""
    rows: list[list[object]] = []
    with tempfile.TemporaryDirectory() as cache:
        for name, args, schedule, kw in SCHEDULES:
            task, s = _schedule(name, args, schedule, kw)
            program = CudaBackend().program(lower(s, task.workload.tensors(), gpu=True), Target.parse("cuda"))
            for arch in archs:
                start = time.perf_counter()
                ptx = nvrtc_compile(program.source, arch, cache_dir=Path(cache))
                cubin = nvrtc_compile(program.source, arch, cache_dir=Path(cache), cubin=True)
                seconds = time.perf_counter() - start
                v4 = "yes" if b".v4.f32" in ptx else "no"
                label = f"{name}{args} {schedule.__name__}"  # type: ignore[attr-defined]
                rows.append([label, arch, len(program.launches), len(ptx), len(cubin), v4, seconds])
    print_table(["schedule", "arch", "kernels", "PTX bytes", "CUBIN bytes", "float4", "s"], rows)


def time_on_gpu(trials: int) -> None:
    """Check, time and tune matmul and conv2d on CUDA device 0; a table with the fraction of peak."""
    drv = cuda_context()
    dev = drv.Device(0)
    sms = dev.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
    clock_hz = dev.get_attribute(drv.device_attribute.CLOCK_RATE) * 1e3
    peak = sms * 128 * 2 * clock_hz
    print(f"device: {dev.name()}, {sms} SMs, fp32 peak {peak / 1e12:.1f} TFLOP/s")
    rows: list[list[object]] = []
    for name, args, schedule, kw in SCHEDULES[:1] + SCHEDULES[3:4]:
        task, s = _schedule(name, args, schedule, kw)
        f = asc.build(s, task.workload.tensors(), target="cuda")
        inputs = task.workload.random_inputs(0)
        want = task.workload.reference(*[x.copy() for x in inputs])
        out = np.zeros(want.shape, dtype=np.float32)
        f(*inputs, out)
        err = float(np.abs(out - want).max())
        seconds = min(f.time(*inputs, out, number=3, repeat=5, min_repeat_ms=50))
        gflops = task.workload.flops / seconds / 1e9
        rows.append([f"{name} hand-written", gflops, f"{gflops * 1e9 / peak:.1%}", f"{err:.2e}", "-"])
        with tempfile.TemporaryDirectory() as d:
            r = asc.tune(task, trials=trials, space="template", log=f"{d}/t.jsonl")
        best = r.best_gflops or 0.0
        per_trial = f"{r.wall_time_s / max(1, r.trials):.2f}"
        rows.append([f"{name} tuned ({trials} trials)", best, f"{best * 1e9 / peak:.1%}", "-", per_trial])
    print_table(["kernel", "GFLOP/s", "of fp32 peak", "max abs err", "s/trial"], rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compile-only", action="store_true", help="only the NVRTC compiles (no GPU needed)")
    ap.add_argument("--trials", type=int, default=64)
    args = ap.parse_args()
    compile_all()
    if args.compile_only:
        return
    try:
        time_on_gpu(args.trials)
    except CudaUnavailable as e:
        print(f"timing skipped: {e}")


if __name__ == "__main__":
    main()
