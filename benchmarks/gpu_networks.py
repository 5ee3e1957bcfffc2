"""Whole networks on a GPU against PyTorch on the same device (issue 35's "a network on the GPU").

    python benchmarks/gpu_networks.py [--models resnet50 bert] [--batches 1 16] [--trials 0]
                                      [--target cuda] [--rounds 5] [--logs DIR]

Each model of the set (``benchmarks/zoo_models.py``: torchvision's ResNet-50, BERT-base with
sequence 128, ...) is exported to ONNX with random weights (seed 0), imported, built with
``asc.build_network(graph, log, target)`` (untuned: the GPU default schedules; with ``--trials N``
also after ``asc.tune_network`` of N trials in all), checked against onnxruntime on the CPU
(relative error <= 1e-4) and timed beside PyTorch's module on the same device (cuDNN/cuBLAS, TF32
off), both as a caller sees them: input copied in, the network run, output copied back. Medians of
``--rounds`` interleaved rounds, each the median of calls lasting at least ``--min-ms``. A table is
printed and ``benchmarks/results/gpu_networks.json`` written.

Runs on PoCL too (``--target opencl``, PyTorch then on the CPU) to check the script itself; its
figures mean nothing there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from zoo_models import MODELS, export

import autosched as asc
from autosched.target import Target

RESULTS = Path(__file__).resolve().parent / "results" / "gpu_networks.json"


def _median_ms(run: Callable[[], object], min_ms: float) -> float:
    """Median milliseconds per call of ``run`` over calls lasting at least ``min_ms`` in all."""
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start) * 1e3 < min_ms:
        t = time.perf_counter()
        run()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def _torch_side(name: str, x: np.ndarray, device: str) -> tuple[Callable[[], np.ndarray], np.ndarray]:
    """PyTorch's module on ``device`` as a call over the numpy input (copy in, run, copy out)."""
    torch.manual_seed(0)
    module = MODELS[name].make().eval().to(device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    def run() -> np.ndarray:
        with torch.no_grad():
            out = module(torch.from_numpy(x).to(device))
            return (out[0] if isinstance(out, tuple) else out).cpu().numpy()

    return run, run()


def _onnxruntime(path: Path, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def _relative(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got.astype(np.float64) - want)) / max(float(np.max(np.abs(want))), 1e-30))


def _calling(net: Callable[[np.ndarray], object], x: np.ndarray) -> Callable[[], object]:
    return lambda: net(x)


def measure(name: str, batch: int, args: argparse.Namespace, work: Path) -> dict[str, object]:
    """One model at one batch size: check, time untuned (and tuned), PyTorch beside."""
    path = export(MODELS[name], batch, work)
    x = MODELS[name].example(batch).numpy()
    graph = asc.from_onnx(path)
    row: dict[str, object] = {"model": name, "batch": batch, "target": args.target}
    start = time.perf_counter()
    nets = {"autosched": asc.build_network(graph, target=args.target)}
    row["build_s"] = time.perf_counter() - start
    if args.trials:
        log = (args.logs or work) / f"{name}_b{batch}_{Target.parse(args.target).kind}.jsonl"
        start = time.perf_counter()
        asc.tune_network(graph, trials=args.trials, log=log, target=args.target, progress=True)
        row["tune_s"] = time.perf_counter() - start
        nets["autosched tuned"] = asc.build_network(graph, log, target=args.target)
    want = _onnxruntime(path, x)
    for side, net in nets.items():
        got = net(x)
        row[f"{side} error"] = _relative(got if isinstance(got, np.ndarray) else got[0], want)
    device = "cuda" if Target.parse(args.target).kind == "cuda" else "cpu"
    torch_run, torch_out = _torch_side(name, x, device)
    row["pytorch error"] = _relative(torch_out, want)
    sides: dict[str, Callable[[], object]] = {side: _calling(net, x) for side, net in nets.items()}
    sides["pytorch"] = torch_run
    rounds: dict[str, list[float]] = {side: [] for side in sides}
    for r in range(args.rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for side in order:
            rounds[side].append(_median_ms(sides[side], args.min_ms))
    for side, times in rounds.items():
        row[f"{side} ms"] = statistics.median(times)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["resnet50", "bert"], choices=list(MODELS))
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 16])
    ap.add_argument("--target", default="cuda")
    ap.add_argument("--trials", type=int, default=0, help="tune_network trials per model (0: untuned only)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-ms", type=float, default=200.0)
    ap.add_argument("--logs", type=Path, help="keep the tuning logs in this folder")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            for batch in args.batches:
                row = measure(name, batch, args, Path(tmp))
                rows.append(row)
                print(json.dumps(row), flush=True)
    print(f"\n{'model':12} {'batch':>5} {'side':16} {'ms':>10} {'x pytorch':>9} {'error':>9}")
    for row in rows:
        base = float(row["pytorch ms"])  # type: ignore[arg-type]
        for side in ("autosched", "autosched tuned", "pytorch"):
            if f"{side} ms" in row:
                ms = float(row[f"{side} ms"])  # type: ignore[arg-type]
                print(f"{row['model']!s:12} {row['batch']!s:>5} {side:16} {ms:>10.3f} {ms / base:>8.2f}x "
                      f"{float(row[f'{side} error']):>9.2e}")  # type: ignore[arg-type]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "rows": rows}, indent=1))
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
