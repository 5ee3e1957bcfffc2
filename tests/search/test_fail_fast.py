"""A run whose machinery is broken stops after a few trials with one line naming the cause and the
fix, instead of burning its budget; bad arguments fail before any work."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.runner.errors import InfrastructureError

pytestmark = pytest.mark.requires("gcc")

REPO = Path(__file__).resolve().parents[2]
FAST = asc.MeasureOption(repeat=1, min_repeat_ms=1.0)


def test_an_unwritable_kernel_cache_stops_the_run_at_once(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    env = {**os.environ, "PYTHONPATH": str(REPO), "AUTOSCHED_CACHE": str(blocker / "cache")}
    log = tmp_path / "mm.jsonl"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "autosched",
            "tune",
            "matmul",
            "32",
            "32",
            "32",
            "--trials",
            "200",
            "--log",
            str(log),
            "--quiet",
            "--tuner",  # no model: nothing optional to warn about before the error
            "random",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autosched: error: cannot write the kernel cache"), lines
    assert "set AUTOSCHED_CACHE to a writable directory" in lines[0]
    assert not log.exists() or log.read_text() == ""  # no trial was charged to a program


def test_a_worker_that_cannot_start_stops_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import autosched.runner.process as process

    monkeypatch.setattr(process, "_BOOT", "import sys; sys.exit(3)")
    task = asc.Task("matmul", (16, 16, 16), target="c -num-threads=1")
    log = tmp_path / "mm.jsonl"
    with pytest.raises(InfrastructureError, match=r"the build worker failed to start \(exit code 3\)"):
        asc.tune(task, trials=50, log=log, option=FAST)
    assert not log.exists() or log.read_text() == ""


def _broken_reference(x: np.ndarray) -> np.ndarray:
    raise FloatingPointError("the reference itself is broken")


@asc.workload("test_fail_fast.broken_reference_copy", reference=_broken_reference, override=True)
def broken_reference_copy(n: int) -> list[asc.Tensor]:
    X = asc.placeholder((n,), name="X")
    Y = asc.compute((n,), lambda i: X[i] + 1.0, name="Y")
    return [X, Y]


def test_the_same_unexplained_error_on_every_first_trial_stops_the_run(tmp_path: Path) -> None:
    task = asc.Task("test_fail_fast.broken_reference_copy", (64,), target="c -num-threads=1")
    log = tmp_path / "b.jsonl"
    with pytest.raises(
        InfrastructureError, match="the first 8 trials all failed with the same error.*broken"
    ):
        asc.tune(task, trials=100, log=log, option=FAST, batch_size=4)
    records = asc.load_records(log)  # logged as UNKNOWN_ERROR: a later run measures them again
    assert len(records) == 8 and {r.error_no for r in records} == {asc.MeasureErrorNo.UNKNOWN_ERROR}


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"trials": 2.5}, TypeError, "trials must be an integer"),
        ({"trials": True}, TypeError, "trials must be an integer"),
        ({"trials": 0}, ValueError, "trials must be at least 1"),
        ({"log": "/no/such/dir/x.jsonl"}, FileNotFoundError, "no directory /no/such/dir"),
    ],
)
def test_bad_arguments_fail_before_any_work(
    kwargs: dict[str, object], error: type[Exception], message: str, tmp_path: Path
) -> None:
    task = asc.Task("matmul", (16, 16, 16), target="c -num-threads=1")
    args = {"trials": 4, "log": tmp_path / "x.jsonl", **kwargs}
    with pytest.raises(error, match=message):
        asc.tune(task, **args)  # type: ignore[arg-type]
    assert not (tmp_path / "x.jsonl").exists()


def test_a_workload_with_impossible_sizes_is_refused_when_the_task_is_made() -> None:
    with pytest.raises(ValueError, match=r"workload matmul\(64,-1,64.*N must be >= 1, got -1"):
        asc.Task("matmul", (64, -1, 64))
