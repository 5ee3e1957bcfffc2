"""Remote measurement over SSH: per-trial overhead of the board path over the local one (plain SSH,
a shared connection, batched uploads), and throughput with 1 vs 2 stand-in boards, unbatched vs
batched.

The boards are real sshd servers on 127.0.0.1 (tests/sshd_board.py) whose logins run aarch64
binaries through qemu-aarch64, as in the tests. The same candidate executable (matmul, cross-built
with aarch64-linux-gnu-gcc, static) is timed three ways, interleaved:

- local: ``qemu-aarch64 ./cand ...`` run here in a subprocess (its outputs read back here);
- remote, shared: ``BoardSession.measure`` over a ControlMaster connection (one round trip);
- remote, plain: the same with connection sharing off (a full SSH handshake per trial);
- remote, batched: ``BoardSession.measure_batch`` of ``--upload`` copies over the shared
  connection (one transfer and one round trip for them all), its time divided by their number.

Overhead = median(remote) - median(local). Throughput: ``BoardPool.run`` over ``--batch`` distinct
pre-built candidates with one board, then two, each with uploads of one candidate (``batch=1``)
and of up to ``--upload`` (trials/min; 2 cores here, so two qemu boards compete for them as two
real boards would not). Appends to results/ssh.json.

    python benchmarks/bench_ssh.py [--trials 30] [--size 64] [--batch 16] [--upload 8]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import print_table, write_results

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from sshd_board import SshLab  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.boards import Board, BoardPool, RemoteBuilder  # noqa: E402
from autosched.boards.session import BoardSession, TaskData  # noqa: E402
from autosched.runner.measure import MeasureInput, MeasureOption  # noqa: E402
from autosched.search import make_space  # noqa: E402

TARGET = "c -cc=aarch64-linux-gnu-gcc -num-threads=1"
QEMU = ("qemu-aarch64",)


def local_trial(exe: str, data_dir: Path, work: Path, option: MeasureOption) -> float:
    """Seconds for one local trial of ``exe`` under qemu (run, outputs read back)."""
    t0 = time.perf_counter()
    args = [str(option.number), str(option.repeat), repr(option.min_repeat_ms), "0", "0.0"]
    done = subprocess.run([*QEMU, exe, str(data_dir), *args], cwd=work, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    for out in work.glob("out*.bin"):
        out.read_bytes()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--upload", type=int, default=8, help="candidates per transfer in the batched mode")
    args = ap.parse_args()
    option = MeasureOption(repeat=3, min_repeat_ms=5.0, run_timeout=60.0)
    task = asc.Task("matmul", (args.size,) * 3, target=TARGET)
    root = Path(tempfile.mkdtemp(prefix="bench-ssh-"))
    lab = SshLab(root / "lab")
    try:
        lab.add("board1")
        lab.add("board2")
        config = str(lab.ssh_config)
        builder = RemoteBuilder()
        (build,) = builder.build([MeasureInput(task, ())])
        assert build.lib_path is not None, build.error_msg
        data = TaskData(0)
        tag, inputs, _ = data.get(task)
        data_dir = root / f"data-{tag}"
        data_dir.mkdir()
        for k, arr in enumerate(inputs):
            (data_dir / f"in{k}.bin").write_bytes(arr.tobytes())
        board = Board("board1", workdir=lab.workdir("bench"), launcher=QEMU)
        shared, plain = BoardSession(board, config), BoardSession(board, config, share=False)
        inp = MeasureInput(task, ())
        for s in (shared, plain):
            s.start()
            s.measure(inp, build, data, option)  # uploads the inputs, warms up
        times: dict[str, list[float]] = {"local": [], "shared": [], "plain": [], "batched": []}
        for _ in range(args.trials):  # interleaved
            times["local"].append(local_trial(build.lib_path.removesuffix(".gz"), data_dir, root, option))
            for name, s in (("shared", shared), ("plain", plain)):
                t0 = time.perf_counter()
                error_no, msg, _ = s.measure(inp, build, data, option)
                times[name].append(time.perf_counter() - t0)
                assert error_no == 0, msg
            t0 = time.perf_counter()
            outcomes = shared.measure_batch([(inp, build)] * args.upload, data, option)
            times["batched"].append((time.perf_counter() - t0) / args.upload)
            assert all(o[0] == 0 for o in outcomes), outcomes
        shared.close()
        plain.close()
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        rows = [[k, med[k], med[k] - med["local"]] for k in ("local", "shared", "plain", "batched")]
        load = os.getloadavg()[0]
        print(f"per trial, {task.workload} under qemu-aarch64, median of {args.trials} (ms), load {load:.1f}")
        print_table(["path", "ms/trial", "overhead ms"], rows)

        space, rng = make_space(task, "sketch"), random.Random(1)
        cands = [MeasureInput(task, space.sample(rng).steps) for _ in range(args.batch)]
        builds = builder.build(cands)
        rate: dict[str, float] = {}
        for upload in (1, args.upload):
            for names in (("board1",), ("board1", "board2")):
                boards = [Board(n, workdir=lab.workdir("tp" + n), launcher=QEMU) for n in names]
                with BoardPool(boards, option, ssh_config=config, batch=upload) as pool:
                    pool.run(cands[:2], builds[:2])  # connect, upload inputs
                    t0 = time.perf_counter()
                    results = pool.run(cands, builds)
                    per_min = len(results) / (time.perf_counter() - t0) * 60
                    rate[f"{len(names)} boards, upload {upload}"] = per_min
        print_table(["pool", "trials/min"], [[k, r] for k, r in rate.items()])
        load_after = os.getloadavg()[0]
        print(f"load {load_after:.1f} at the end")
        write_results("ssh", {
            "workload": str(task.workload), "trials": args.trials, "ms_per_trial": med,
            "overhead_ms": {k: med[k] - med["local"] for k in ("shared", "plain", "batched")},
            "throughput_trials_per_min": rate, "batch": args.batch, "upload": args.upload,
            "load_before": load, "load_after": load_after,
        })  # fmt: skip
    finally:
        lab.close()


if __name__ == "__main__":
    main()
