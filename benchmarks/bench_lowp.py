"""Low precision: autosched's int8 (u8 x s8 -> s32) and bf16 (-> f32) matmuls through VNNI, AMX,
AVX2 (``vpmaddwd``) and AVX512-BF16 tensor intrinsics, against autosched's float32 matmul,
PyTorch's bf16 torch.matmul and onnxruntime's MatMulInteger, all n x n x n on the same threads.

    python benchmarks/bench_lowp.py [--n 1024] [--threads 2] [--rounds 7] [--min-ms 300]
                                    [--log FLOAT32_LOG] [--sides ...]

Every side runs in a process of its own (as bench_zoo.py does), checks its result once (int8:
equal to numpy's int32 product, except onnxruntime's, timed all the same with its deviation
printed; bf16: within 1e-2 relative of the float32 product of the same bf16 inputs), then
rounds alternate between the sides (one side timed while the others wait), each round timing
calls for at least ``--min-ms``; the table gives the median round (time per call over the round)
and the median of the rounds' median calls (which a shared, loaded machine disturbs less), in
GOP/s (2 n^3 operations per call) and relative to autosched's float32
matmul: the tuned one from ``--log`` (a tuning log of ``matmul n n n``), else its hand-written
default schedule. The low-precision weight is packed once before timing (``asc.intrin.pack_b``),
as constant weights are at build time: in panels of 32 columns for the AVX-512 paths (VNNI,
AVX512-BF16), of 16 for AMX and AVX2.
Results are appended to benchmarks/results/lowp.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from common import clean_blas_env, median, print_table, write_results

clean_blas_env()

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
SIDES = (
    "f32 autosched", "int8 vnni", "int8 amx", "int8 avx2", "bf16 amx", "bf16 avx512bf16", "bf16 torch",
    "int8 onnxruntime",
)  # fmt: skip


def _inputs(n: int) -> dict[str, np.ndarray]:
    import ml_dtypes

    rng = np.random.default_rng(0)
    f = rng.standard_normal((2, n, n)).astype(np.float32)
    return {
        "a8": rng.integers(0, 256, (n, n)).astype(np.uint8),
        "b8": rng.integers(-128, 128, (n, n)).astype(np.int8),
        "a16": f[0].astype(ml_dtypes.bfloat16),
        "b16": f[1].astype(ml_dtypes.bfloat16),
        "a32": f[0],
        "b32": f[1],
    }


def _autosched(
    side: str, n: int, threads: int, log: str | None, x: dict[str, np.ndarray]
) -> Callable[[], Any]:
    import autosched as asc
    from autosched.intrin.dot import pack_b, packed_tensors
    from autosched.intrin.lowp import matmul_lowp
    from autosched.runner.aligned import aligned_empty

    target = f"c -num-threads={threads}"

    def aligned(a: np.ndarray) -> np.ndarray:
        out = aligned_empty(a.shape, str(a.dtype))
        out[...] = a
        return out

    if side == "f32 autosched":
        task = asc.Task("matmul", (n, n, n), target=target)
        if log:
            f = asc.load_best(log, task)
        else:
            from autosched.ops.schedules import default_schedule

            s, _ = default_schedule(task.workload, target)
            f = asc.build(s, task.workload.tensors(), target)
        a, b, c = aligned(x["a32"]), aligned(x["b32"]), aligned_empty((n, n), "float32")
        want, args = x["a32"] @ x["b32"], (a, b, c)
    else:
        kind = "vnni" if side.startswith("int8") else "bf16"
        path = side.split()[1] if side.endswith(("amx", "avx2")) else "dot"
        cols = 32 if path == "dot" else 16  # AVX-512: two vectors of columns per call
        T = packed_tensors(n, n, n, kind, cols=cols)
        f = asc.build(matmul_lowp(T, target, path=path), T, target)
        a, b = (x["a8"], x["b8"]) if kind == "vnni" else (x["a16"], x["b16"])
        c = aligned_empty((n, n), "int32" if kind == "vnni" else "float32")
        args = (aligned(a), aligned(pack_b(b, 4 if kind == "vnni" else 2, cols)), c)
        wide = np.int32 if kind == "vnni" else np.float32
        want = a.astype(wide) @ b.astype(wide)
    f(*args)
    _check(side, c, want)
    return lambda: f(*args)


def _check(side: str, got: np.ndarray, want: np.ndarray) -> None:
    if want.dtype.kind == "i":
        if not np.array_equal(got, want):
            raise AssertionError(f"{side}: wrong int32 result")
    elif np.abs(got - want).max() > 1e-2 * np.abs(want).max():
        raise AssertionError(f"{side}: error {np.abs(got - want).max():.3g} over 1e-2 of max |reference|")


#: a child's remarks on its side's results, sent with its "ready" line
NOTES: list[str] = []


def _library(side: str, n: int, threads: int, x: dict[str, np.ndarray]) -> Callable[[], Any]:
    if side == "bf16 torch":
        import torch

        torch.set_num_threads(threads)
        a = torch.from_numpy(x["a32"]).to(torch.bfloat16)
        b = torch.from_numpy(x["b32"]).to(torch.bfloat16)
        got = torch.matmul(a, b).float().numpy()
        _check(side, got, x["a16"].astype(np.float32) @ x["b16"].astype(np.float32))
        return lambda: torch.matmul(a, b)
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["A", "B"], ["C"])], "mmi",
        [helper.make_tensor_value_info("A", TensorProto.UINT8, [n, n])],
        [helper.make_tensor_value_info("C", TensorProto.INT32, [n, n])],
        [numpy_helper.from_array(x["b8"], "B")],  # a constant weight, as in a quantized model
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    feed = {"A": x["a8"]}
    got, want = sess.run(None, feed)[0], x["a8"].astype(np.int32) @ x["b8"].astype(np.int32)
    wrong = got != want
    if wrong.any():  # timed all the same: what a user of it gets, with the deviation stated
        NOTES.append(
            f"{side}: {wrong.mean():.1%} of the int32 results differ from the exact product (largest "
            f"difference {np.abs(got.astype(np.int64) - want).max()}; u8 x s8 pair sums saturating in "
            "16 bits, as onnxruntime's kernels do on x86 without VNNI)"
        )
    return lambda: sess.run(None, feed)


def serve(side: str, n: int, threads: int, log: str | None, min_ms: float) -> None:
    """The child: load and check the side, then answer ``time`` / ``quit`` lines on stdin."""
    try:
        x = _inputs(n)
        if side in ("bf16 torch", "int8 onnxruntime"):
            run = _library(side, n, threads, x)
        else:
            run = _autosched(side, n, threads, log, x)
        run()
    except Exception as e:  # one line for the table: the side cannot run here
        print(json.dumps({"error": f"{type(e).__name__}: {e}".splitlines()[0][:300]}), flush=True)
        return
    print(json.dumps({"ready": True, "notes": NOTES}), flush=True)
    for line in sys.stdin:
        if line.strip() != "time":
            return
        run()
        calls, start, each = 0, time.perf_counter(), []
        while (time.perf_counter() - start) * 1e3 < min_ms or calls < 3:
            t0 = time.perf_counter()
            run()
            each.append(time.perf_counter() - t0)
            calls += 1
        ms = (time.perf_counter() - start) * 1e3 / calls
        print(json.dumps({"ms": ms, "call_ms": 1e3 * median(each)}), flush=True)


class Side:
    """A side's process, spoken to line by line."""

    def __init__(self, side: str, args: list[str]) -> None:
        command = [sys.executable, str(HERE / "bench_lowp.py"), "--serve", side, *args]
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=HERE
        )
        first = self.answer()
        self.error: str | None = first.get("error")
        self.notes: list[str] = list(first.get("notes", []))

    def answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                return dict(json.loads(line))
        return {"error": f"the process ended (exit {self.proc.wait()})"}

    def time(self) -> tuple[float, float]:
        """Milliseconds per call over the round, and the median call's."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("time\n")
        self.proc.stdin.flush()
        answer = self.answer()
        return float(answer["ms"]), float(answer["call_ms"])

    def close(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--min-ms", type=float, default=300.0)
    ap.add_argument("--log", default=None, help="tuning log of matmul n n n (float32): its best program")
    ap.add_argument("--sides", nargs="+", default=list(SIDES), choices=SIDES)
    ap.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    child = ["--n", str(args.n), "--threads", str(args.threads), "--min-ms", str(args.min_ms)]
    if args.log:
        child += ["--log", str(Path(args.log).resolve())]
    if args.serve:
        serve(args.serve, args.n, args.threads, args.log, args.min_ms)
        return
    sides = {name: Side(name, child) for name in args.sides}
    times: dict[str, list[float]] = {name: [] for name, s in sides.items() if s.error is None}
    calls: dict[str, list[float]] = {name: [] for name in times}
    try:
        for _ in range(args.rounds):
            for name in times:
                time.sleep(0.2)
                ms, call_ms = sides[name].time()
                times[name].append(ms)
                calls[name].append(call_ms)
    finally:
        for s in sides.values():
            s.close()
    ops = 2.0 * args.n**3
    med = {name: median(ts) for name, ts in times.items()}
    call = {name: median(ts) for name, ts in calls.items()}
    base, base_call = med.get("f32 autosched"), call.get("f32 autosched")
    rows = []
    for name, s in sides.items():
        if s.error is not None:
            rows.append([name, "-", "-", "-", "-", s.error])
            continue
        ratio = f"{base / med[name]:.2f}x" if base else "-"
        ratio_call = f"{base_call / call[name]:.2f}x" if base_call else "-"
        rows.append([name, f"{med[name]:.2f}", f"{ops / med[name] / 1e6:.0f}", ratio,
                     f"{ops / call[name] / 1e6:.0f}", ratio_call])  # fmt: skip
    headers = ["side", "ms/call (rounds)", "GOP/s", "vs f32", "GOP/s (median call)", "vs f32 (median call)"]
    print_table(headers, rows)
    f32 = "tuned (--log)" if args.log else "hand-written default schedule"
    print(f"n={args.n}, {args.threads} threads, {args.rounds} rounds; float32 autosched: {f32}")
    notes = [n for s in sides.values() for n in s.notes]
    for note in notes:
        print(note)
    errors = {name: s.error for name, s in sides.items() if s.error}
    versions = {}
    for package in ("torch", "onnxruntime", "ml_dtypes"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    write_results("lowp", {"n": args.n, "threads": args.threads, "rounds": args.rounds, "f32": f32,
                           "ms": times, "median_ms": med, "call_ms": calls, "median_call_ms": call,
                           "errors": errors, "notes": notes, "versions": versions})  # fmt: skip


if __name__ == "__main__":
    main()
