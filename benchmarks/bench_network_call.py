"""What a whole-network call costs from Python: ResNet-18's ``net(x)`` timed in fresh processes,
optionally alternating with autosched from another source tree (an older commit), so a change
to how ``Network`` runs its kernels is measured side by side on the same kernels.

Each process builds the network (``build_network``, from ``--log`` or untuned; kernels come from
the shared kernel cache), checks its output against the first process's, makes 5 warm-up calls
and times ``--calls`` calls; the table gives, per source tree, the median over rounds of each
process's median and best call.

    python benchmarks/bench_network_call.py [--size 224] [--threads 2] [--rounds 3] [--calls 40]
        [--log LOG] [--baseline TREE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import cpu_name, median, print_table, write_results

TESTS = Path(__file__).resolve().parent.parent / "tests"

#: one process: argv = tests dir, size, threads, calls, log ("" for none), output file; prints JSON
_RUN = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import autosched as asc
import graph_models

size, threads, calls = map(int, sys.argv[2:5])
log, out = sys.argv[5], sys.argv[6]
graph = asc.from_onnx(graph_models.resnet18(size))
net = asc.build_network(graph, log or None, target=f"c -num-threads={threads}")
x = np.random.default_rng(0).standard_normal(graph.shapes["x"]).astype(np.float32)
np.save(out, net(x))
for _ in range(5):
    net(x)
times = []
for _ in range(calls):
    start = time.perf_counter()
    net(x)
    times.append(time.perf_counter() - start)
times.sort()
print(json.dumps({"median_ms": 1e3 * times[len(times) // 2], "best_ms": 1e3 * times[0]}))
"""


def run(opts: argparse.Namespace, out: Path, tree: str | None) -> dict[str, float]:
    """One process timing ``net(x)``, importing autosched from ``tree`` if given."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([tree, env.get("PYTHONPATH", "")])
    argv = [str(TESTS), str(opts.size), str(opts.threads), str(opts.calls), str(opts.log or ""), str(out)]
    # run from the tree: ``python -c`` puts the working directory first on the import path
    done = subprocess.run([sys.executable, "-c", _RUN, *argv], env=env, cwd=tree, capture_output=True,
                          text=True, timeout=1800, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--log", type=Path, help="a tuning log of the network (default: untuned)")
    parser.add_argument("--baseline", metavar="TREE",
                        help="also time autosched from this source tree (a worktree of an older commit: "
                             "git worktree add TREE COMMIT), alternating with this one")
    opts = parser.parse_args()
    print(f"{cpu_name()}; ResNet-18 {opts.size}², {opts.threads} threads, "
          f"{'tuned: ' + str(opts.log) if opts.log else 'untuned'}")
    trees: list[tuple[str, str | None]] = [("this tree", None)]
    if opts.baseline:
        trees.insert(0, (f"baseline ({opts.baseline})", opts.baseline))
    got: dict[str, list[dict[str, float]]] = {label: [] for label, _ in trees}
    with tempfile.TemporaryDirectory() as tmp:
        outputs = []
        for r in range(opts.rounds):
            for label, tree in trees:
                out = Path(tmp) / f"{len(outputs)}.npy"
                got[label].append(run(opts, out, tree))
                outputs.append(out)
                print(f"  round {r + 1}, {label}: median {got[label][-1]['median_ms']:.2f} ms", flush=True)
        first = np.load(outputs[0])
        same = all(np.array_equal(first, np.load(o)) for o in outputs[1:])
    rows = [[label, *(f"{median([g[k] for g in runs]):.2f}" for k in ("median_ms", "best_ms"))]
            for label, runs in got.items()]
    print()
    print_table(["autosched", "median call (ms)", "best call (ms)"], rows)
    print(f"outputs identical in every process: {'yes' if same else 'NO'}")
    payload = {"cpu": cpu_name(), "size": opts.size, "threads": opts.threads, "log": str(opts.log or ""),
               "baseline": opts.baseline, "runs": got, "same_outputs": same, "when": time.ctime()}
    print(f"\nresults: {write_results('network_call', payload)}")


if __name__ == "__main__":
    main()
