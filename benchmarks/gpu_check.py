"""The CUDA check of issue 9 (``scripts/gpu-check`` runs it): NVRTC-compile every hand-written GPU
schedule for sm_80 and sm_90 (no GPU needed), then, where a CUDA device is visible, run the
hand-written matmul 2048^3 and conv2d (C=64, H=W=56, K=64, 3x3, pad 1) and check them against numpy,
time them, tune each for 64 trials with its GPU template, re-time the tuned best beside the
hand-written one and PyTorch's fp32 kernel (cuBLAS / cuDNN, TF32 off; where PyTorch is there), and
print GFLOP/s and the fraction of the device's fp32 peak (SMs x 128 fp32 lanes x 2 x clock; right
for Ampere and Hopper). ``--variants`` also times the hand-written matmul 2048^3 for several tiles,
the 8x8 and 4x8 register tiles each with and without virtual threads. The figures go to
``results/gpu_check.json``.

    python benchmarks/gpu_check.py [--compile-only] [--trials 64] [--variants]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from common import print_table, write_results

import autosched as asc
from autosched.backends import CudaBackend
from autosched.backends.cuda import CudaUnavailable, cuda_driver, nvrtc_compile
from autosched.backends.gpu_conv import conv2d_gpu, direct_gpu
from autosched.backends.gpu_schedules import (
    Pair,
    batch_matmul_gpu,
    dense_gpu,
    elementwise_gpu,
    matmul_gpu,
    softmax_gpu,
)
from autosched.lower import lower
from autosched.target import Target

MATMUL = ("matmul", (2048, 2048, 2048))
CONV = ("conv2d_nchw", (1, 64, 56, 56, 64, 3, 3, 1, 1))

#: (workload, arguments, schedule, its parameters): every hand-written GPU schedule
SCHEDULES: list[tuple[str, tuple, Callable[..., asc.Schedule], dict]] = [
    (*MATMUL, matmul_gpu, {"block": 16, "reg": 4, "k_tile": 16}),
    (*MATMUL, matmul_gpu, {"block": 16, "reg": 8, "k_tile": 8, "vthreads": 2}),
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


def _schedule(
    name: str, args: tuple, schedule: Callable[..., asc.Schedule], kw: dict
) -> tuple[asc.Task, asc.Schedule]:
    task = asc.Task(name, args, target="cuda")
    return task, schedule(task.workload.tensors(), "cuda", **kw)


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
                label = f"{name}{args} {schedule.__name__}" + "".join(
                    f" vthreads={v}" for k, v in kw.items() if k == "vthreads"
                )
                rows.append([label, arch, len(program.launches), len(ptx), len(cubin), v4, seconds])
    print_table(["schedule", "arch", "kernels", "PTX bytes", "CUBIN bytes", "float4", "s"], rows)


def device_peak() -> tuple[str, float]:
    """CUDA device 0's name and fp32 peak in FLOP/s (SMs x 128 lanes x 2 x its maximum clock)."""
    drv = cuda_driver()
    dev = drv.Device(0)
    sms = dev.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
    clock_hz = dev.get_attribute(drv.device_attribute.CLOCK_RATE) * 1e3
    return f"{dev.name()} ({sms} SMs, {clock_hz / 1e9:.2f} GHz)", sms * 128 * 2 * clock_hz


def torch_seconds(name: str, inputs: list[np.ndarray]) -> float | None:
    """Best seconds per run of PyTorch's fp32 kernel on the same inputs (cuBLAS / cuDNN, TF32 off),
    from CUDA events; None where PyTorch or its CUDA is missing."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    a, b = (torch.from_numpy(x.astype(np.float32)).cuda() for x in inputs)
    conv = torch.nn.functional.conv2d
    run = (lambda: torch.matmul(a, b)) if name == "matmul" else (lambda: conv(a, b, padding=1))
    for _ in range(3):
        run()
    best = float("inf")
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            run()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 10 * 1e-3)
    return best


def _timed(task: asc.Task, f: object, inputs: list[np.ndarray], want: np.ndarray) -> tuple[float, float]:
    """(best seconds per run, max abs error against the reference) of built kernel ``f``."""
    out = np.full(want.shape, np.nan, dtype=np.float32)
    f(*inputs, out)  # type: ignore[operator]
    err = float(np.abs(out - want).max())
    return min(f.time(*inputs, out, number=3, repeat=5, min_repeat_ms=50)), err  # type: ignore[attr-defined]


def time_on_gpu(
    trials: int, spaces: tuple[str, ...] = ("template",), logs: Path | None = None
) -> dict[str, object]:
    """Check, time and tune (in each of ``spaces``) matmul and conv2d on CUDA device 0, re-time
    the tuned bests beside the hand-written schedule and PyTorch; print a table with the fraction
    of fp32 peak, and return the figures. The tuning logs go to ``logs`` (else a temporary
    folder)."""
    device, peak = device_peak()
    print(f"device: {device}, fp32 peak {peak / 1e12:.1f} TFLOP/s")
    rows: list[list[object]] = []
    figures: dict[str, object] = {"device": device, "fp32_peak_tflops": peak / 1e12, "trials": trials}
    for name, args, schedule, kw in SCHEDULES[:1] + SCHEDULES[3:4]:
        task, s = _schedule(name, args, schedule, kw)
        inputs = task.workload.random_inputs(0)
        (want,) = task.workload.reference(*[x.copy() for x in inputs])
        hand = _timed(task, asc.build(s, task.workload.tensors(), target="cuda"), inputs, want)
        entries = [("hand-written", hand, "-")]
        for space in spaces:
            with tempfile.TemporaryDirectory() as d:
                log = (logs or Path(d)) / f"{name}-{space}.jsonl"
                r = asc.tune(task, trials=trials, space=space, log=log)
                tuned = _timed(task, asc.load_best(log, task), inputs, want)
            per_trial = r.wall_time_s / max(1, r.new_trials)
            entries.append((f"tuned, {space}, {trials} trials", tuned, f"{per_trial:.2f}"))
            figures[f"{name} tuning {space}"] = {"seconds_per_trial": per_trial, "valid": r.valid_trials,
                                                 "errors": r.errors, "tuner": r.tuner, "model": r.model}
        ref = torch_seconds(name, inputs)
        if ref is not None:
            entries.append(("PyTorch (cuBLAS/cuDNN, fp32)", (ref, 0.0), "-"))
        for label, (seconds, err), cost in entries:
            gflops = task.workload.flops() / seconds / 1e9
            rows.append([f"{name} {label}", gflops, f"{gflops * 1e9 / peak:.1%}", f"{err:.1e}", cost])
            figures[f"{name} {label}"] = {"gflops": gflops, "max_abs_err": err}
    print_table(["kernel", "GFLOP/s", "of fp32 peak", "max abs err", "s/trial"], rows)
    return figures


#: (block, reg, k_tile, vthreads) of the hand-written matmul timed by ``--variants``: each register
#: tile of 8 (8x8, 4x8) with and without virtual threads (its outputs a block apart, not contiguous)
VARIANTS: list[tuple[int, Pair, int, Pair]] = [
    (16, 4, 8, 1), (16, 4, 16, 1), (16, 4, 32, 1), (16, 2, 16, 1), (8, 4, 16, 1), (32, 2, 16, 1),
    (16, 8, 8, 1), (16, 8, 8, 2), (16, 8, 16, 1), (16, 8, 16, 2), (8, 8, 16, 1), (8, 8, 16, 2),
    (16, (4, 8), 8, 1), (16, (4, 8), 8, (1, 2)), (16, (4, 8), 16, 1), (16, (4, 8), 16, (1, 2)),
]


def matmul_variants() -> dict[str, float]:
    """GFLOP/s of the hand-written matmul 2048^3 for each of :data:`VARIANTS`, checked; a table."""
    task = asc.Task(*MATMUL, target="cuda")
    inputs = task.workload.random_inputs(0)
    (want,) = task.workload.reference(*[x.copy() for x in inputs])
    rows: list[list[object]] = []
    figures: dict[str, float] = {}
    for block, reg, k_tile, vthreads in VARIANTS:
        s = matmul_gpu(task.workload.tensors(), "cuda", block, reg, k_tile, vthreads)
        seconds, err = _timed(task, asc.build(s, task.workload.tensors(), target="cuda"), inputs, want)
        gflops = task.workload.flops() / seconds / 1e9
        figures[f"block={block} reg={reg} k_tile={k_tile} vthreads={vthreads}"] = gflops
        rows.append([block, reg, k_tile, vthreads, gflops, f"{err:.1e}"])
    print_table(["block", "reg", "k_tile", "vthreads", "GFLOP/s", "max abs err"], rows)
    return figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compile-only", action="store_true", help="only the NVRTC compiles (no GPU needed)")
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--variants", action="store_true", help="also time matmul_gpu's parameters (VARIANTS)")
    ap.add_argument("--spaces", nargs="+", default=["template"], choices=["template", "sketch"],
                    help="the spaces to tune in (default: template)")
    ap.add_argument("--logs", type=Path, help="keep the tuning logs in this folder")
    args = ap.parse_args()
    compile_all()
    if args.compile_only:
        return
    try:
        figures: dict[str, object] = {"matmul_variants": matmul_variants()} if args.variants else {}
        figures.update(time_on_gpu(args.trials, tuple(args.spaces), args.logs))
    except CudaUnavailable as e:
        print(f"timing skipped: {e}")
        return
    print(f"results: {write_results('gpu_check', figures)}")


if __name__ == "__main__":
    main()
