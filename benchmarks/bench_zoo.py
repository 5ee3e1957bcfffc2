"""The seeds' networks end to end: import, correctness against onnxruntime, untuned and tuned speed.

python benchmarks/bench_zoo.py [--models resnet50 ...] [--batches 1 16] [--threads 2] [--rounds 5]
                               [--tune] [--tune-batches 1] [--trials-per-task 64] [--max-trials 2000]
                               [--zoo DIR] [--logs DIR]

For each model of benchmarks/zoo_models.py and each batch size:
1. The ONNX file (exported by zoo_models.py if it is not in ``--zoo`` yet) is imported unchanged
   with ``asc.from_onnx``; an import error is one line in the table.
2. Every side runs in a process of its own, started fresh for the model (so no runtime's thread
   pool shares a process with another's): autosched untuned (``build_network`` with no log),
   autosched tuned (from the model's log, with ``--tune``), onnxruntime (``--threads`` intra-op
   threads, spinning off so an idle side does not steal the cores) and PyTorch eager (the same
   module with the same seed, ``torch.set_num_threads``), where installed. Each computes the
   same random input; autosched's and PyTorch's outputs are compared with onnxruntime's
   (max |error| / max |reference|, goal <= 1e-4).
3. Timing: rounds alternate between the sides (one side timed while the others sleep, a pause
   between sides); each round times calls for at least ``--min-ms``; the table gives the medians.
4. With ``--tune`` (batches in ``--tune-batches``): ``tune_network`` with 64 trials per task, at
   most 2,000 (``--trials-per-task``, ``--max-trials``), its log in ``--logs`` (a log already there
   resumes). The run measures the network at checkpoints and calibrates its estimate by them; the
   estimate it held before its last checkpoint (calibrated by the one before) is set beside the
   tuned network's latency measured here in a fresh process ("estimated / real").

Results are appended to benchmarks/results/zoo.json.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import RESULTS, clean_blas_env, median, print_table, write_results

clean_blas_env()

import numpy as np  # noqa: E402  (after clean_blas_env)

HERE = Path(__file__).resolve().parent
SIDES = ("autosched", "autosched tuned", "onnxruntime", "pytorch")


# ---------------------------------------------------------------- one side, in a process of its own


def _load_side(side: str, model: Path, name: str, log: Path | None, threads: int) -> Any:
    """A callable running one forward pass of ``model`` on ``side``."""
    if side.startswith("autosched"):
        import autosched as asc

        net = asc.build_network(asc.from_onnx(str(model)), log if side == "autosched tuned" else None,
                                target=f"c -num-threads={threads}")

        def first(x: np.ndarray) -> np.ndarray:
            out = net(x)
            return out[0] if isinstance(out, list) else out

        return first
    if side == "onnxruntime":
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        feed = session.get_inputs()[0].name
        return lambda x: session.run(None, {feed: x})[0]
    import torch
    from zoo_models import MODELS

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    module = MODELS[name].make().eval()

    def run(x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return module(torch.from_numpy(x)).numpy()

    return run


def serve(
    side: str, model: Path, name: str, log: Path | None, threads: int, x_path: Path, min_ms: float
) -> None:
    """The child's loop: load, then answer ``output PATH`` / ``time`` / ``quit`` lines on stdin."""
    t0 = time.perf_counter()
    try:
        run = _load_side(side, model, name, log, threads)
        x = np.load(x_path)
        run(x)
    except Exception as e:  # one line for the table: the side could not run this model
        print(json.dumps({"error": f"{type(e).__name__}: {e}".splitlines()[0][:300]}), flush=True)
        return
    print(json.dumps({"ready": True, "load_s": time.perf_counter() - t0}), flush=True)
    for line in sys.stdin:
        command, _, arg = line.strip().partition(" ")
        if command == "output":
            np.save(arg, np.asarray(run(x)))
            print(json.dumps({"saved": arg}), flush=True)
        elif command == "time":
            run(x)
            calls, start = 0, time.perf_counter()
            while (time.perf_counter() - start) * 1e3 < min_ms or calls < 3:
                run(x)
                calls += 1
            print(json.dumps({"ms": (time.perf_counter() - start) * 1e3 / calls}), flush=True)
        else:
            return


class Side:
    """A side's process, spoken to line by line."""

    def __init__(self, side: str, args: list[str]) -> None:
        self.side = side
        self.proc = subprocess.Popen([sys.executable, str(HERE / "bench_zoo.py"), "--serve", side, *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=HERE)
        self.error: str | None = None
        first = self._answer()
        if "error" in first:
            self.error = first["error"]

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                return dict(json.loads(line))
        return {"error": f"the {self.side} process ended (exit {self.proc.wait()})"}

    def ask(self, command: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def close(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


# ---------------------------------------------------------------- the run


def _input(name: str, model: Path, batch: int, out: Path) -> Path:
    import onnx
    from zoo_models import MODELS

    info = MODELS[name]
    proto = onnx.load(str(model), load_external_data=False)
    dims = [d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim]
    rng = np.random.default_rng(batch)
    if info.high:  # token ids
        x = rng.integers(0, info.high, dims).astype(np.int64)
    else:
        x = rng.standard_normal(dims).astype(np.float32)
    np.save(out, x)
    return out


def _tune(model: Path, log: Path, threads: int, per_task: int, most: int) -> dict[str, Any]:
    import autosched as asc

    graph = asc.from_onnx(str(model))
    target = f"c -num-threads={threads}"
    tasks = asc.graph.extract_tasks(graph, target)
    trials = min(most, per_task * len(tasks))
    t0 = time.perf_counter()
    result = asc.tune_network(graph, trials=trials, log=log, target=target, progress=True)
    points = [c.to_json() for c in result.checkpoints]
    # the estimate the run made before its last measurement of the network (calibrated by the one
    # before): what it predicted, not what it then measured
    last = points[-1] if points else {}
    return {"tasks": len(tasks), "trials": trials, "estimated_ms": last.get("estimated_ms"),
            "kernels_ms": last.get("kernels_ms"), "checkpoints": points,
            "wall_s": time.perf_counter() - t0, "log": str(log)}


def run_model(name: str, batch: int, args: argparse.Namespace) -> dict[str, Any]:
    """Import, check and time one model at one batch size (and tune it when asked)."""
    from zoo_models import MODELS, export

    import autosched as asc

    model = args.zoo / f"{name}_b{batch}.onnx"
    if not model.exists():
        export(MODELS[name], batch, args.zoo)
    row: dict[str, Any] = {"model": name, "batch": batch}
    t0 = time.perf_counter()
    try:
        graph = asc.from_onnx(str(model))
    except Exception as e:
        row["import_error"] = f"{type(e).__name__}: {e}".splitlines()[0]
        return row
    row["import_s"] = time.perf_counter() - t0
    row["tasks"] = len(asc.graph.extract_tasks(graph, f"c -num-threads={args.threads}"))
    log = args.logs / f"{name}_b{batch}.jsonl"
    if args.tune and batch in args.tune_batches:
        row["tuning"] = _tune(model, log, args.threads, args.trials_per_task, args.max_trials)
    with tempfile.TemporaryDirectory(prefix="asc-zoo-") as tmp:
        x = _input(name, model, batch, Path(tmp) / "x.npy")
        common = [str(model), name, str(log), str(args.threads), str(x), str(args.min_ms)]
        wanted = [s for s in SIDES if s != "autosched tuned" or log.exists()]
        sides = []
        for s in wanted:
            side = Side(s, common)
            if side.error:
                row[f"{s} error"] = side.error
                side.close()
            else:
                sides.append(side)
        outputs = {s.side: Path(tmp) / f"{s.side.replace(' ', '_')}.npy" for s in sides}
        for s in sides:
            s.ask(f"output {outputs[s.side]}")
        if "onnxruntime" in outputs:
            ref = np.load(outputs["onnxruntime"]).astype(np.float64)
            scale = float(np.abs(ref).max()) or 1.0
            for s, path in outputs.items():
                if s != "onnxruntime":
                    out = np.load(path).astype(np.float64)
                    ok = out.shape == ref.shape
                    row[f"{s} rel_error"] = float(np.abs(out - ref).max()) / scale if ok else math.inf
        times: dict[str, list[float]] = {s.side: [] for s in sides}
        for _ in range(args.rounds):
            for s in sides:
                time.sleep(0.5)
                times[s.side].append(float(s.ask("time")["ms"]))
        for s in sides:
            s.close()
    row["ms"] = {s: median(ts) for s, ts in times.items()}
    row["ms_rounds"] = times
    return row


def _table(rows: list[dict[str, Any]]) -> None:
    out = []
    for r in rows:
        ms = r.get("ms", {})
        ort = ms.get("onnxruntime", math.nan)

        def cell(side: str, ms: dict[str, float] = ms, ort: float = ort) -> str:
            return f"{ms[side]:.2f} ({ms[side] / ort:.2f}x)" if side in ms else "-"

        errs = [v for k, v in r.items() if k.endswith("rel_error") and k.startswith("autosched")]
        err = max(errs, default=math.nan)
        est = r.get("tuning", {}).get("estimated_ms")
        est_cell = f"{est:.2f} / {ms['autosched tuned']:.2f}" if est and "autosched tuned" in ms else "-"
        status = r.get("import_error", "ok")
        out.append([r["model"], r["batch"], status[:60], r.get("tasks", "-"), f"{err:.1e}", cell("autosched"),
                    cell("autosched tuned"), f"{ort:.2f}", cell("pytorch"), est_cell])
    print_table(["model", "batch", "import", "tasks", "rel err", "untuned ms (x ort)", "tuned ms (x ort)",
                 "onnxruntime ms", "pytorch ms (x ort)", "estimated / real ms"], out)


def main() -> None:
    from zoo_models import MODELS, ZOO

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--threads", type=int, default=2, help="threads of every side")
    ap.add_argument("--rounds", type=int, default=5, help="alternating timing rounds")
    ap.add_argument("--min-ms", type=float, default=500.0, help="time each side this long per round")
    ap.add_argument("--tune", action="store_true", help="tune the networks (see --tune-batches)")
    ap.add_argument("--tune-batches", type=int, nargs="+", default=[1])
    ap.add_argument("--trials-per-task", type=int, default=64)
    ap.add_argument("--max-trials", type=int, default=2000)
    ap.add_argument("--zoo", type=Path, default=ZOO, help="where the .onnx files are (exported if missing)")
    ap.add_argument("--logs", type=Path, default=RESULTS / "network" / "zoo", help="tuning logs")
    args = ap.parse_args()
    args.logs.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in args.models:
        for batch in args.batches:
            print(f"== {name}, batch {batch}", flush=True)
            rows.append(run_model(name, batch, args))
            print(json.dumps(rows[-1]), flush=True)
    print(f"\n{args.threads} threads, medians of {args.rounds} alternating rounds, one process per side")
    _table(rows)
    payload = {"threads": args.threads, "rounds": args.rounds, "rows": rows}
    print(f"\nresults appended to {write_results('zoo', payload)}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--serve":
        side, model, name, log, threads, x, min_ms = sys.argv[2:9]
        serve(side, Path(model), name, Path(log), int(threads), Path(x), float(min_ms))
    else:
        main()
