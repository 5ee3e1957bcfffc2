"""Nothing is left behind: a tuning process stopped by Ctrl-C, SIGTERM or SIGKILL, or by an exception
in the caller's code, leaves no worker or compiler process, no temporary file or directory and no
half-written log line. Real signals on real subprocesses."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from autosched.records import is_remeasurement, load_records

pytestmark = pytest.mark.requires("gcc")

REPO = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path) -> dict[str, str]:
    """A private kernel cache and temporary directory, so that leftovers are easy to see."""
    for sub in ("cache", "tmp"):
        (tmp_path / sub).mkdir(exist_ok=True)
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "AUTOSCHED_CACHE": str(tmp_path / "cache"),
        "TMPDIR": str(tmp_path / "tmp"),
    }


def _processes_mentioning(*needles: str) -> list[str]:
    """Command lines of live processes that contain any of ``needles``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended meanwhile
            continue
        if any(n in cmdline for n in needles):
            found.append(f"{entry.name}: {cmdline}")
    return found


def _workers_of(pid: int) -> list[str]:
    """Live autosched workers started by process ``pid`` (their command line names the parent)."""
    return [c for c in _processes_mentioning("autosched.runner") if f" {pid}" in c]


def _assert_nothing_left(pid: int, tmp_path: Path) -> None:
    """Within a few seconds: no worker of ``pid``, no compiler on the cache, no temporary files."""
    cache = str(tmp_path / "cache")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        left = _workers_of(pid) + _processes_mentioning(cache)
        if not left:
            break
        time.sleep(0.2)
    assert not left, left
    assert not list((tmp_path / "cache").glob("*.tmp")), list((tmp_path / "cache").iterdir())
    assert not list((tmp_path / "tmp").iterdir())


def _start_tuning(tmp_path: Path, log: Path) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        "-m",
        "autosched",
        "tune",
        "matmul",
        "96",
        "96",
        "96",
        "--trials",
        "400",
        "--log",
        str(log),
        "--quiet",
        "--seed",
        "0",
        "--repeat",
        "1",
        "--min-repeat-ms",
        "5",
    ]
    return subprocess.Popen(
        command, cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_for_lines(log: Path, proc: subprocess.Popen[str], lines: int) -> None:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and log.read_bytes().count(b"\n") >= lines:
            return
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"tuning wrote fewer than {lines} lines: {proc.communicate()}")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_a_signal_leaves_nothing_behind(tmp_path: Path, sig: signal.Signals) -> None:
    log = tmp_path / "mm.jsonl"
    proc = _start_tuning(tmp_path, log)
    _wait_for_lines(log, proc, 3)
    assert _workers_of(proc.pid), "the run should have its workers now"
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    _assert_nothing_left(proc.pid, tmp_path)
    records = load_records(log)  # every line whole: no warning, no error
    assert len(records) >= 3
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
        return
    assert proc.returncode == 130, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("autosched: interrupted: tuning stopped") and str(log) in last, err
    assert "run the same command again to resume" in last


def test_resuming_after_ctrl_c_measures_nothing_twice(tmp_path: Path) -> None:
    log = tmp_path / "mm.jsonl"
    proc = _start_tuning(tmp_path, log)
    _wait_for_lines(log, proc, 2)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    before = len(load_records(log))
    command = [
        sys.executable,
        "-m",
        "autosched",
        "tune",
        "matmul",
        "96",
        "96",
        "96",
        "--trials",
        str(before + 3),
        "--log",
        str(log),
        "--quiet",
        "--seed",
        "0",
        "--repeat",
        "1",
    ]
    subprocess.run(command, cwd=tmp_path, env=_env(tmp_path), check=True, capture_output=True, timeout=300)
    keys = [r.program_key for r in load_records(log) if not is_remeasurement(r)]  # trials only
    assert len(keys) == before + 3 == len(set(keys))


def test_an_exception_in_the_callers_code_leaves_no_worker(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import os
        import autosched as asc

        def explode(tuner, candidates, results):
            raise ZeroDivisionError("the app's own bug")

        task = asc.Task("matmul", (32, 32, 32), target="c -num-threads=1")
        try:
            asc.tune(task, trials=20, log="x.jsonl", callbacks=[explode])
        except ZeroDivisionError:
            pass
        children = []
        for task_dir in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task_dir}/children") as f:
                children += f.read().split()
        print("children:", len(children))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "children: 0"
    assert not list((tmp_path / "tmp").iterdir())
