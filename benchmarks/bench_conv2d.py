"""conv2d NCHW (N=1, C=64, H=W=56, K=64, 3x3, stride 1, pad 1): the hand-written schedule
(autosched.ops.schedules.conv2d_nchw_cpu) against PyTorch CPU (oneDNN), side by side.

Both get one untimed warm-up call before each timed round. autosched writes into a preallocated
output; PyTorch cannot: ``torch.nn.functional.conv2d`` takes no ``out=`` (aten's generated
``convolution.out`` computes into a new tensor and copies it, which would cost PyTorch more), so
PyTorch allocates its output on every call, as it does in real use. The run is appended to
results/conv2d_C_H_W_K_R_STRIDE_PAD.json.

    python benchmarks/bench_conv2d.py [--rounds 7] [--threads 1 2] [--layer C H W K R stride pad]
"""

from __future__ import annotations

import argparse

from common import clean_blas_env

clean_blas_env()

import numpy as np  # noqa: E402
from common import interleaved, kernel_timer, median, print_table, wall_timer, write_results  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.ops.schedules import conv2d_nchw_cpu  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument(
        "--layer",
        type=int,
        nargs=7,
        default=[64, 56, 56, 64, 3, 1, 1],
        metavar=("C", "H", "W", "K", "R", "STRIDE", "PAD"),
    )
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        raise SystemExit("this benchmark compares against PyTorch: pip install torch==2.13.0") from None
    c, h, w, k, r, stride, pad = args.layer
    wl = asc.get_workload("conv2d_nchw", (1, c, h, w, k, r, r, stride, pad))
    flops = wl.flops()
    data, kernel = wl.random_inputs(0)
    out = np.zeros(wl.outputs[0].shape, np.float32)
    tx, tw = torch.from_numpy(data), torch.from_numpy(kernel)
    print(f"conv2d_nchw {wl}; PyTorch {torch.__version__} (oneDNN: {torch.backends.mkldnn.is_available()})")
    rows, record = [], {}
    for threads in args.threads:
        target = f"c -num-threads={threads}"
        tensors = wl.tensors()
        f = asc.build(conv2d_nchw_cpu(tensors, target), tensors, target)
        f(data, kernel, out)
        np.testing.assert_allclose(out, wl.reference(data, kernel)[0], rtol=1e-3, atol=1e-3)
        torch.set_num_threads(threads)
        number = max(1, int(0.2 / (flops / 100e9)))

        def torch_conv() -> object:
            return torch.nn.functional.conv2d(tx, tw, stride=stride, padding=pad)

        torch_conv()
        times = interleaved(
            {
                "autosched": kernel_timer(f, [data, kernel, out], number),
                "pytorch": wall_timer(torch_conv, number),
            },
            args.rounds,
        )
        ours, ref = median(times["autosched"]), median(times["pytorch"])
        rows.append([threads, flops / ours / 1e9, flops / ref / 1e9, f"{ref / ours:.2f}"])
        record[f"{threads}_threads"] = {
            "autosched_s": times["autosched"],
            "pytorch_s": times["pytorch"],
            "ratio_vs_pytorch": ref / ours,
        }
    print_table(["threads", "autosched GFLOP/s", "PyTorch GFLOP/s", "autosched/PyTorch"], rows)
    path = write_results(
        f"conv2d_{c}_{h}_{w}_{k}_{r}_{stride}_{pad}",
        {"torch": torch.__version__, "flops": flops, "rounds": args.rounds, **record},
    )
    print(f"results: {path}")


if __name__ == "__main__":
    main()
