"""Tuning on a Dask cluster vs the local pools, on this one machine.

1. Measurement overhead: the same built candidates of a tiny kernel (matmul 16^3, one timed run
   each, checked), measured by the local runner and by a Dask runner on a plain ``LocalCluster``
   of one worker process; interleaved rounds, median ms per trial.
2. Build overhead: the same new programs of matmul 64^3 built one at a time by the local builder
   and by the Dask builder (same cluster), each into an empty cache, which goes first alternating
   per round; median ms per trial.
3. Throughput: ``asc.tune`` (random search, ``--trials`` trials of matmul 64^3, fresh kernel caches)
   with the local pools, and on plain clusters of 1 and 2 worker processes; trials per second.
4. An extrapolation to 8 build workers and 4 devices from the measured per-trial costs: trials/s
   is bounded by builds (8 / build s per trial), devices (4 / measure s per trial) and the tuning
   process itself (1 / its own s per trial, Dask overhead included).
5. A network (``--network N``): ``asc.tune_network`` of a 4-task MLP for N trials on a cluster of
   one build worker and 1 or 2 measuring workers (``autosched worker --device local``, fresh kernel
   caches everywhere): one measuring worker; two, one task at a time (``parallel=1``); two, two
   tasks at once (the default). Wall seconds and trials per second, alternating the order per round.

The run is appended to results/dask.json.

    python benchmarks/bench_dask.py [--trials 24] [--rounds 3] [--n 12] [--network 32] [--network-only]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from common import clean_blas_env

clean_blas_env()

import distributed  # noqa: E402
from common import interleaved, median, print_table, write_results  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.cluster import DaskCluster  # noqa: E402
from autosched.cluster.parts import DaskBuilder, DaskRunner  # noqa: E402
from autosched.graph import Graph, GraphBuilder  # noqa: E402
from autosched.runner import LocalBuilder, LocalRunner, MeasureInput, MeasureOption  # noqa: E402
from autosched.search.tuning_space import make_space  # noqa: E402

ONE_RUN = MeasureOption(number=1, repeat=1, min_repeat_ms=0.0)
TARGET = "c -num-threads=1"


@contextmanager
def plain_cluster(workers: int, folder: Path) -> Iterator[distributed.Client]:
    """A LocalCluster of ``workers`` single-threaded worker processes with their own kernel cache."""
    cache = tempfile.mkdtemp(dir=folder, prefix="workers-")
    with distributed.LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address=None, env={"AUTOSCHED_CACHE": cache},
    ) as cluster, distributed.Client(cluster, set_as_default=False) as client:
        yield client


def fresh_cache(folder: Path) -> None:
    """Point this process's kernel cache at a new, empty directory."""
    os.environ["AUTOSCHED_CACHE"] = tempfile.mkdtemp(dir=folder, prefix="client-")


def programs(task: asc.Task, n: int, rng: random.Random, seen: set[str]) -> list[MeasureInput]:
    """``n`` programs of ``task`` not drawn before."""
    space = make_space(task, "sketch")
    out: list[MeasureInput] = []
    while len(out) < n:
        cand = space.sample(rng)
        if cand.key not in seen:
            seen.add(cand.key)
            out.append(MeasureInput(task, cand.steps, cand.program))
    return out


def per_trial(fn: Callable[[], object], n: int) -> Callable[[], float]:
    """A timer: seconds per trial of one call of ``fn`` that handles ``n`` trials."""

    def run() -> float:
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) / n

    return run


def overheads(client: distributed.Client, folder: Path, n: int, rounds: int) -> dict[str, float]:
    """Median ms per trial of measuring and of building, local vs Dask."""
    cluster = DaskCluster(client)
    tiny = asc.Task("matmul", (16, 16, 16), target=TARGET)
    fresh_cache(folder)
    inputs = programs(tiny, n, random.Random(0), set())
    with LocalBuilder(n_parallel=1) as builder:
        builds = builder.build(inputs)
    local_runner, dask_runner = LocalRunner(ONE_RUN), DaskRunner(cluster, ONE_RUN)
    local_runner.run(inputs, builds)  # start the workers and send the task data first
    dask_runner.run(inputs, builds)
    runs = interleaved({
        "local": per_trial(lambda: local_runner.run(inputs, builds), n),
        "dask": per_trial(lambda: dask_runner.run(inputs, builds), n),
    }, rounds, settle=0.2)
    local_runner.close()

    task = asc.Task("matmul", (64, 64, 64), target=TARGET)
    rng, seen = random.Random(1), set[str]()
    local_builder, dask_builder = LocalBuilder(n_parallel=1), DaskBuilder(cluster)
    for warm in (local_builder, dask_builder):  # start the build worker, import on the cluster
        warm.build(programs(task, 1, rng, seen))
    builds_s: dict[str, list[float]] = {"local": [], "dask": []}
    for i in range(rounds):  # the same new programs both ways, each into an empty cache
        batch = programs(task, n, rng, seen)
        order = [("local", local_builder), ("dask", dask_builder)]
        for name, builder in order if i % 2 == 0 else order[::-1]:
            fresh_cache(folder)
            t0 = time.perf_counter()
            for inp in batch:  # one at a time: the cost of one trial, not of a parallel batch
                builder.build([inp])
            builds_s[name].append((time.perf_counter() - t0) / n)
    local_builder.close()
    return {
        "measure_local_ms": 1e3 * median(runs["local"]), "measure_dask_ms": 1e3 * median(runs["dask"]),
        "build_local_ms": 1e3 * median(builds_s["local"]), "build_dask_ms": 1e3 * median(builds_s["dask"]),
    }


def throughput(trials: int, folder: Path, client: distributed.Client | None) -> dict[str, float]:
    """One random-search run of ``trials`` trials (fresh caches): trials/s and where the time went."""
    fresh_cache(folder)
    task = asc.Task("matmul", (64, 64, 64), target=TARGET)
    log = Path(tempfile.mkdtemp(dir=folder)) / "t.jsonl"
    result = asc.tune(task, trials=trials, log=log, tuner="random", seed=5, remeasure=0, cluster=client)
    assert result.valid_trials == trials, result.errors
    return {"trials_per_s": trials / result.wall_time_s, "wall_s": result.wall_time_s,
            "build_s": result.build_time_s, "run_s": result.run_time_s}


@contextmanager
def device_cluster(devices: int, folder: Path) -> Iterator[distributed.Client]:
    """A scheduler, one build worker (a thread per core) and ``devices`` measuring workers, each
    ``autosched worker`` process with a fresh kernel cache."""
    with distributed.LocalCluster(
        n_workers=0, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster, distributed.Client(cluster, set_as_default=False) as client:
        procs = []
        try:
            for flags in [[], *[["--device", "local"]] * devices]:
                env = {**os.environ, "AUTOSCHED_CACHE": tempfile.mkdtemp(dir=folder, prefix="worker-")}
                command = [sys.executable, "-m", "autosched", "worker", "--scheduler",
                           cluster.scheduler_address, "--host", "127.0.0.1", *flags]
                quiet = subprocess.DEVNULL
                procs.append(subprocess.Popen(command, env=env, stdout=quiet, stderr=quiet))
            client.wait_for_workers(1 + devices, timeout=120)
            yield client
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(30)


def mlp() -> Graph:
    """Three dense layers (bias + ReLU on the first two) and a softmax: four tasks."""
    rng = np.random.default_rng(0)
    g = GraphBuilder("bench_mlp")
    x = g.input("x", (16, 256))
    for i, (n, k) in enumerate(((256, 256), (128, 256))):
        w, b = rng.standard_normal((n, k)) / 16, rng.standard_normal(n)
        x = g.relu(g.dense(x, g.constant(w, f"w{i}"), g.constant(b, f"b{i}")))
    g.output(g.softmax(g.dense(x, g.constant(rng.standard_normal((64, 128)) / 11, "w2"))))
    return g.build()


#: case -> (measuring workers, tasks at once: None for the default, one per measuring worker)
NETWORK_CASES = {
    "1 device": (1, None), "2 devices, 1 task at a time": (2, 1), "2 devices, 2 tasks at once": (2, None),
}


def network(trials: int, folder: Path, devices: int, parallel: int | None) -> dict[str, float]:
    """One ``tune_network`` run of ``trials`` trials of :func:`mlp` (fresh caches): wall s, trials/s."""
    graph = mlp()
    with device_cluster(devices, folder) as client:
        fresh_cache(folder)
        log = Path(tempfile.mkdtemp(dir=folder)) / "net.jsonl"
        t0 = time.perf_counter()
        result = asc.tune_network(graph, trials=trials, log=log, round_trials=4, target=TARGET,
                                  tuner="random", cluster=client, parallel=parallel)
        wall = time.perf_counter() - t0
    assert sum(t["trials"] for t in result.tasks) == trials, result.tasks
    return {"wall_s": wall, "trials_per_s": trials / wall, "latency_ms": result.latency_ms}


def networks(trials: int, rounds: int, folder: Path) -> dict[str, list[dict[str, float]]]:
    """Every network case ``rounds`` times, the order of the cases alternating per round."""
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in NETWORK_CASES}
    for i in range(rounds):
        order = list(NETWORK_CASES.items())
        for name, (devices, parallel) in order if i % 2 == 0 else order[::-1]:
            runs[name].append(network(trials, folder, devices, parallel))
    print_table(["network, 4 tasks", "wall s (median)", "trials/s", "runs (wall s)"], [
        [name, median([r["wall_s"] for r in rs]), f"{trials / median([r['wall_s'] for r in rs]):.2f}",
         " ".join(f"{r['wall_s']:.1f}" for r in rs)] for name, rs in runs.items()
    ])
    return runs


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--trials", type=int, default=24, help="trials per throughput run")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the overhead timings")
    parser.add_argument("--n", type=int, default=12, help="trials per overhead round")
    parser.add_argument("--network", type=int, default=32, help="trials of the network case (0: none)")
    parser.add_argument("--network-only", action="store_true", help="only the network case")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-dask-") as tmp:
        folder = Path(tmp)
        if args.network:
            nets = networks(args.network, args.rounds, folder)
            loads = [load, os.getloadavg()[0]]
            print(f"(load average before: {loads[0]:.1f}, after: {loads[1]:.1f})")
        if args.network_only:
            write_results("dask", {"network_trials": args.network, "rounds": args.rounds, "network": nets,
                                   "network_load": loads})
            return
        local = throughput(args.trials, folder, None)
        with plain_cluster(1, folder) as client:
            costs = overheads(client, folder, args.n, args.rounds)
            one = throughput(args.trials, folder, client)
        with plain_cluster(2, folder) as client:
            two = throughput(args.trials, folder, client)
    build_s = costs["build_local_ms"] / 1e3  # one compile, one core
    measure_s = local["run_s"] / args.trials  # one measurement, one device
    own_s = (local["wall_s"] - local["build_s"] - local["run_s"]) / args.trials
    dask_s = (costs["measure_dask_ms"] - costs["measure_local_ms"]) / 1e3
    dask_s += max(0.0, costs["build_dask_ms"] - costs["build_local_ms"]) / 1e3
    bounds = {"builds (8 workers)": 8 / build_s, "devices (4)": 4 / measure_s,
              "tuning process": 1 / max(own_s + dask_s, 1e-9)}
    print_table(["per trial", "local ms", "dask ms", "overhead ms"], [
        ["measure (16^3, 1 run)", costs["measure_local_ms"], costs["measure_dask_ms"],
         costs["measure_dask_ms"] - costs["measure_local_ms"]],
        ["build (64^3)", costs["build_local_ms"], costs["build_dask_ms"],
         costs["build_dask_ms"] - costs["build_local_ms"]],
    ])
    print()
    print_table(["tune 64^3", "trials/s", "wall s", "build s", "run s"], [
        [name, f"{r['trials_per_s']:.2f}", r["wall_s"], r["build_s"], r["run_s"]]
        for name, r in (("local pools", local), ("dask, 1 worker", one), ("dask, 2 workers", two))
    ])
    print()
    print(f"8 build workers + 4 devices: {min(bounds.values()):.1f} trials/s, bound by "
          f"{min(bounds, key=lambda k: bounds[k])} ("
          + ", ".join(f"{k} {v:.1f}/s" for k, v in bounds.items()) + ")")
    write_results("dask", {"trials": args.trials, "rounds": args.rounds, "n": args.n, **costs,
                           "local": local, "dask_1": one, "dask_2": two, "bounds_per_s": bounds,
                           "network_trials": args.network, "network": nets if args.network else {},
                           "network_load": loads if args.network else []})


if __name__ == "__main__":
    main()
