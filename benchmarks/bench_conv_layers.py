"""The convolution layers of the seeds' networks: each network's kernel next to the alternative.

For MobileNet-V2's 1x1, depthwise and first layers, ResNet-50's 1x1 layers, grouped layers
(ResNeXt, ShuffleNet), DCGAN's transposed and 3D-ResNet-18's 3-D convolutions this builds the
kernel a network runs (``autosched.graph.layout`` decides its weight layout: flat, ``conv_flat``,
or packed, ``conv_packed``) and, where the code has one, the other layout's kernel (a one-group
2-D convolution packed or flat; a 3-D or transposed one unpacked), checks both against the numpy
reference and times them interleaved (``--rounds`` rounds, medians), in GFLOP/s. Appended to
results/conv_layers.json.

    python benchmarks/bench_conv_layers.py [--threads 1] [--rounds 5] [--only mobilenet]
"""

from __future__ import annotations

import argparse

from common import clean_blas_env

clean_blas_env()

import numpy as np  # noqa: E402
from common import cpu_name, interleaved, kernel_timer, median, print_table, write_results  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.graph.conv_flat import runs_flat  # noqa: E402
from autosched.graph.layers import dims  # noqa: E402
from autosched.ops import Workload, get_workload  # noqa: E402
from autosched.ops.schedules import default_schedule  # noqa: E402

Args = tuple[object, ...]

CLIP, CONV = "bias,clip:0.0:6.0", "fused_conv2d"
#: (label, workload name, arguments as the model has them: unpacked kernels, groups)
LAYERS: list[tuple[str, str, Args]] = [
    ("mobilenet_v2 1x1 16->96 @112", CONV, (1, 16, 112, 112, 96, 1, 1, 1, 0, 1, CLIP)),
    ("mobilenet_v2 1x1 24->144 @56", CONV, (1, 24, 56, 56, 144, 1, 1, 1, 0, 1, CLIP)),
    ("mobilenet_v2 1x1 144->24 @56 +add", CONV, (1, 144, 56, 56, 24, 1, 1, 1, 0, 1, "bias,add")),
    ("mobilenet_v2 1x1 64->384 @14", CONV, (1, 64, 14, 14, 384, 1, 1, 1, 0, 1, CLIP)),
    ("mobilenet_v2 1x1 320->1280 @7", CONV, (1, 320, 7, 7, 1280, 1, 1, 1, 0, 1, CLIP)),
    ("mobilenet_v2 3x3/2 3->32 @224", CONV, (1, 3, 224, 224, 32, 3, 3, 2, 1, 1, CLIP)),
    ("mobilenet_v2 dw 3x3 32 @112", CONV, (1, 32, 112, 112, 32, 3, 3, 1, 1, 32, CLIP)),
    ("mobilenet_v2 dw 3x3/2 96 @112", CONV, (1, 96, 112, 112, 96, 3, 3, 2, 1, 96, CLIP)),
    ("mobilenet_v2 dw 3x3 144 @56", CONV, (1, 144, 56, 56, 144, 3, 3, 1, 1, 144, CLIP)),
    ("mobilenet_v2 dw 3x3/2 192 @28", CONV, (1, 192, 28, 28, 192, 3, 3, 2, 1, 192, CLIP)),
    ("mobilenet_v2 dw 3x3 576 @14", CONV, (1, 576, 14, 14, 576, 3, 3, 1, 1, 576, CLIP)),
    ("mobilenet_v2 dw 3x3 960 @7", CONV, (1, 960, 7, 7, 960, 3, 3, 1, 1, 960, CLIP)),
    ("resnet50 1x1 256->64 @56", CONV, (1, 256, 56, 56, 64, 1, 1, 1, 0, 1, "bias,relu")),
    ("resnet50 1x1 64->256 @56 +add", CONV, (1, 64, 56, 56, 256, 1, 1, 1, 0, 1, "bias,add,relu")),
    ("resnet50 1x1 1024->256 @14", CONV, (1, 1024, 14, 14, 256, 1, 1, 1, 0, 1, "bias,relu")),
    ("resnet50 1x1 512->2048 @7 +add", CONV, (1, 512, 7, 7, 2048, 1, 1, 1, 0, 1, "bias,add,relu")),
    ("resnet50 3x3 64 @56", CONV, (1, 64, 56, 56, 64, 3, 3, 1, 1, 1, "bias,relu")),
    ("resnext 3x3 g32 128 @56", CONV, (1, 128, 56, 56, 128, 3, 3, 1, 1, 32, "bias,relu")),
    ("resnext 3x3/2 g32 256 @28", CONV, (1, 256, 28, 28, 256, 3, 3, 2, 1, 32, "bias,relu")),
    ("shufflenet 1x1 g3 240 @28", CONV, (1, 240, 28, 28, 240, 1, 1, 1, 0, 3, "bias,relu")),
    *[(f"dcgan_g transposed {a[0]} -> {dims(a[1])[1]}", "fused_conv_transpose", a) for a in (
        ("1x100x1x1", "100x512x4x4", "1,1", "0,0,0,0", "0,0", "1,1", 1, "bias,relu"),
        ("1x512x4x4", "512x256x4x4", "2,2", "1,1,1,1", "0,0", "1,1", 1, "bias,relu"),
        ("1x256x8x8", "256x128x4x4", "2,2", "1,1,1,1", "0,0", "1,1", 1, "bias,relu"),
        ("1x128x16x16", "128x64x4x4", "2,2", "1,1,1,1", "0,0", "1,1", 1, "bias,relu"))],
    *[(f"r3d_18 {a[1]}/{a[2]} {a[0]}", "fused_conv", a) for a in (
        ("1x3x16x112x112", "64x3x3x7x7", "1,2,2", "1,3,3,1,3,3", "1,1,1", 1, "bias,relu"),
        ("1x64x16x56x56", "64x64x3x3x3", "1,1,1", "1,1,1,1,1,1", "1,1,1", 1, "bias,relu"),
        ("1x128x8x28x28", "256x128x3x3x3", "2,2,2", "1,1,1,1,1,1", "1,1,1", 1, "bias,relu"),
        ("1x512x2x7x7", "512x512x3x3x3", "1,1,1", "1,1,1,1,1,1", "1,1,1", 1, "bias,relu"))],
]
BLOCK = 16  # one AVX-512 vector of float32 (8 where 16 does not divide the channels)


def _block(k: int) -> int:
    return BLOCK if k % BLOCK == 0 else 8


def variants(name: str, args: Args) -> dict[str, tuple[str, Args]]:
    """{"network": the workload a network runs, "other": the other layout's, where there is one}."""
    if name == "fused_conv2d":
        c, k, r, s, stride, pad, groups = (int(str(args[i])) for i in (1, 4, 5, 6, 7, 8, 9))
        if groups != 1 or k % 8:
            return {"network": (name, args)}
        packed = ("fused_conv2d_packed", (*args[:9], _block(k), *args[10:]))
        flat = runs_flat(c, r, s, stride, pad, k)
        return {"network": (name, args) if flat else packed, "other": packed if flat else (name, args)}
    w = dims(str(args[1]))
    transposed = name == "fused_conv_transpose"
    k, c = (w[1], w[0]) if transposed else (w[0], w[1])
    b = _block(k)
    packed = (name, (args[0], "x".join(map(str, (k // b, c, *w[2:], b))), *args[2:]))
    return {"network": packed, "other": (name, args)}


def build(name: str, args: Args, target: str) -> tuple[Workload, object, list[np.ndarray]]:
    """The workload's default kernel, checked against its reference; (workload, kernel, arrays)."""
    wl = get_workload(name, args)
    schedule, _ = default_schedule(wl, target)
    kernel = asc.build(schedule, wl.tensors(), target=target)
    inputs = wl.random_inputs(0)
    outs = [np.zeros(tuple(int(d) for d in t.shape), np.float32) for t in wl.outputs]
    kernel(*inputs, *outs)
    want = wl.reference(*inputs)[0]
    err = float(np.abs(outs[0] - want).max() / max(float(np.abs(want).max()), 1e-30))
    if err > 1e-4:
        raise SystemExit(f"{wl}: relative error {err:.2e} against the reference")
    return wl, kernel, [*inputs, *outs]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="", help="only the layers whose label contains this")
    opts = ap.parse_args()
    target = f"c -num-threads={opts.threads}"
    rows, records = [], []
    for label, name, args in LAYERS:
        if opts.only not in label:
            continue
        built = {side: build(n, a, target) for side, (n, a) in variants(name, args).items()}
        timers = {side: kernel_timer(k, arrays, min_repeat_ms=20) for side, (_, k, arrays) in built.items()}
        times = {side: median(ts) for side, ts in interleaved(timers, opts.rounds, settle=0.1).items()}
        flops = built["network"][0].flops()
        other = times.get("other")
        rows.append([label, built["network"][0].name, f"{times['network'] * 1e3:.3f}",
                     flops / times["network"] / 1e9, "-" if other is None else f"{flops / other / 1e9:.1f}"])
        records.append({"layer": label, "workload": str(built["network"][0]), "ms": times["network"] * 1e3,
                        "other_ms": None if other is None else other * 1e3, "flops": flops})
        print(f"{label}: {flops / times['network'] / 1e9:.1f} GFLOP/s", flush=True)
    print(f"\n{cpu_name()}, {opts.threads} thread(s), medians of {opts.rounds} interleaved rounds")
    print_table(["layer", "network's kernel", "ms", "GFLOP/s", "other layout GFLOP/s"], rows)
    write_results("conv_layers", {"threads": opts.threads, "rounds": opts.rounds, "layers": records})


if __name__ == "__main__":
    main()
