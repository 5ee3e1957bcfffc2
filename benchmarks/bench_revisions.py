"""A model's untuned network latency as built by two revisions of autosched, side by side.

    python benchmarks/bench_revisions.py MODEL.onnx [--old HEAD~1] [--new WORKTREE] [--rounds 12]
                                         [--threads 2] [--seconds 3]

Each revision is checked out in a temporary git worktree (``--new WORKTREE``, the default, is
this checkout as it is). Every round runs one fresh process per revision, the order alternating
from round to round: it imports that revision, builds the network (untuned), and times calls for
``--seconds`` after three warm-up calls. The table gives each round's median call per side and
their ratio; the summary the medians over the rounds and the median of the per-round ratios (a
drifting machine moves both sides of a round alike). Results go to benchmarks/results/revisions.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import print_table, write_results

ROOT = Path(__file__).resolve().parent.parent
#: what each fresh process runs: argv = model, threads, seconds; prints {"median": s, "min": s}
CHILD = """
import json, statistics, sys, time
import numpy as np
import onnx
import autosched as asc
model, threads, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
graph = asc.from_onnx(model)
dims = onnx.load(model, load_external_data=False).graph.input[0].type.tensor_type.shape.dim
x = np.random.default_rng(0).standard_normal([d.dim_value for d in dims]).astype(np.float32)
net = asc.build_network(graph, target=f"c -num-threads={threads}")
for _ in range(3):
    net(x)
times, start = [], time.perf_counter()
while time.perf_counter() - start < seconds or len(times) < 10:
    t0 = time.perf_counter()
    net(x)
    times.append(time.perf_counter() - t0)
print(json.dumps({"median": statistics.median(times), "min": min(times)}))
"""


def checkout(rev: str, into: Path) -> Path:
    """A detached worktree of ``rev`` under ``into``."""
    path = into / rev.replace("/", "_").replace("~", "-")
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(path), rev], check=True)
    return path


def run_side(tree: Path, args: argparse.Namespace) -> float:
    """Seconds per call (median) of the network built by the autosched in ``tree``, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", CHILD, str(args.model), str(args.threads), str(args.seconds)],
                         env=env, check=True, capture_output=True, text=True, cwd=tree).stdout
    return float(json.loads(out.strip().splitlines()[-1])["median"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--old", default="HEAD~1", help="a git revision")
    ap.add_argument("--new", default="WORKTREE", help="a git revision, or WORKTREE (this checkout)")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=3.0, help="timed calls per side and round")
    args = ap.parse_args()
    args.model = args.model.resolve()
    with tempfile.TemporaryDirectory(prefix="asc-revisions-") as tmp:
        trees = {"old": checkout(args.old, Path(tmp))}
        trees["new"] = ROOT if args.new == "WORKTREE" else checkout(args.new, Path(tmp))
        try:
            ms: dict[str, list[float]] = {"old": [], "new": []}
            rows = []
            for r in range(args.rounds):
                for side in ("old", "new") if r % 2 == 0 else ("new", "old"):
                    ms[side].append(run_side(trees[side], args) * 1e3)
                o, n = ms["old"][-1], ms["new"][-1]
                rows.append([r + 1, f"{o:.2f}", f"{n:.2f}", f"{o / n:.2f}"])
                print_table(["round", "old ms", "new ms", "old / new"], rows[-1:])
        finally:
            for tree in trees.values():
                if tree != ROOT:
                    remove = ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)]
                    subprocess.run(remove, check=False)
    pairs = list(zip(ms["old"], ms["new"], strict=True))
    ratio = statistics.median(o / n for o, n in pairs)
    print()
    print_table(["round", "old ms", "new ms", "old / new"], rows)
    print(f"\n{args.model.name}: old ({args.old}) {statistics.median(ms['old']):.2f} ms, new ({args.new}) "
          f"{statistics.median(ms['new']):.2f} ms (medians of {args.rounds} rounds); old / new per round: "
          f"median {ratio:.2f}x, new faster in {sum(o > n for o, n in pairs)} of {len(pairs)}")
    path = write_results("revisions", {"model": args.model.name, "old": args.old, "new": args.new,
                                       "threads": args.threads, "ms": ms, "median_ratio": ratio})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
