"""End-to-end tuning on the real compiler and CPU: log, resume, SIGKILL, load_best, the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.cli import main
from autosched.records import is_baseline, is_remeasurement, load_records, ranked, steps_key
from autosched.runner.measure import MeasureOption
from autosched.space.templates.handwritten import hand_written_config

pytestmark = pytest.mark.requires("gcc")

FAST = MeasureOption(repeat=2, min_repeat_ms=1.0, run_timeout=10.0)


def check_kernel(task: asc.Task, kernel: asc.runner.Kernel) -> None:
    inputs = task.workload.random_inputs(1)
    outputs = [np.zeros(t.shape, t.dtype) for t in task.workload.outputs]
    kernel(*inputs, *outputs)
    for got, want in zip(outputs, task.workload.reference(*inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_tune_logs_every_trial_resumes_and_loads_the_best(tmp_path: Path) -> None:
    task = asc.Task("matmul", (40, 48, 36), target="c -num-threads=1")
    log = tmp_path / "mm.jsonl"
    first = asc.tune(task, trials=12, log=log, seed=0, option=FAST)
    assert (first.trials, first.new_trials, first.resumed_trials) == (12, 12, 0)
    assert first.valid_trials + sum(first.errors.values()) == 12 and first.valid_trials >= 6
    everything = load_records(log)
    records = [r for r in everything if not is_remeasurement(r)]
    assert len(records) == 12 and all(r.workload_key == task.workload.key for r in everything)
    assert all(len(r.costs) == 2 for r in records if r.ok)
    # the best is the fastest of the top 3 and the default schedule measured again with 10 repeats,
    # where another program must beat the default by BASELINE_MARGIN (ranked applies it)
    again = [r for r in everything if is_remeasurement(r)]
    assert len(again) in (3, 4) and all(len(r.costs) == 10 for r in again)
    assert sum(map(is_baseline, again)) == 1
    best = ranked(again)[0].median
    assert best <= min(r.median for r in again if is_baseline(r))
    assert first.best_time_ms == pytest.approx(best * 1e3)
    assert first.best_gflops == pytest.approx(task.flops() / best / 1e9)

    second = asc.tune(task, trials=18, log=log, seed=0, option=FAST)
    assert (second.trials, second.new_trials, second.resumed_trials) == (18, 6, 12)
    records = [r for r in load_records(log) if not is_remeasurement(r)]
    assert len(records) == 18 and len({r.program_key for r in records}) == 18

    check_kernel(task, asc.load_best(log, task))


def test_grid_tuning_of_a_conv2d_template_space(tmp_path: Path) -> None:
    task = asc.Task("conv2d_nchw", (1, 8, 10, 10, 8, 3, 3, 1, 1), target="c -num-threads=2")
    log = tmp_path / "conv.jsonl"
    result = asc.tune(task, trials=8, log=log, tuner="grid", space="template", option=FAST)
    assert result.trials == 8 and result.valid_trials >= 1
    first, *rest = [r.program for r in load_records(log) if not is_remeasurement(r)]
    config = hand_written_config(task.workload, task.target)  # the hand-written schedule first
    assert config is not None and first == {"space": "template", **config.to_json()}
    indices = [p["index"] for p in rest]  # then the grid, in order
    assert len(indices) == 7 and indices == sorted(indices) and indices[0] == 0
    check_kernel(task, asc.load_best(log, task))


def test_a_user_workload_tunes_like_a_built_in_one(tmp_path: Path) -> None:
    @asc.workload("test_tune_stencil", override=True)
    def stencil(n: int) -> list[asc.Tensor]:
        x = asc.placeholder((n,), name="X")
        y = asc.compute((n - 2,), lambda i: x[i] + 2.0 * x[i + 1] + x[i + 2], name="Y")
        return [x, y]

    task = asc.Task("test_tune_stencil", (1000,), target="c -num-threads=1")
    result = asc.tune(task, trials=6, log=tmp_path / "st.jsonl", seed=1, option=FAST)
    assert result.valid_trials == 6, result.errors  # the worker checked each against the reference


def _valid_lines(log: Path) -> int:
    if not log.exists():
        return 0
    return sum(1 for line in log.read_text().splitlines() if line.endswith("}"))


def test_sigkill_in_the_middle_then_resume_loses_nothing(tmp_path: Path) -> None:
    log = tmp_path / "killed.jsonl"
    args = [
        "matmul",
        "24",
        "40",
        "32",
        "--target",
        "c -num-threads=1",
        "--log",
        str(log),
        "--seed",
        "3",
        "--min-repeat-ms",
        "1",
        "--repeat",
        "2",
        "--quiet",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "autosched", "tune", *args, "--trials", "40"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while _valid_lines(log) < 5 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    before = {r.program_key: r for r in load_records(log)}
    assert 5 <= len(before) < 40
    out = subprocess.run(
        [sys.executable, "-m", "autosched", "tune", *args, "--trials", "40", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    summary = json.loads(out.stdout)
    assert summary["trials"] == 40 and summary["resumed_trials"] == len(before)
    after = [r for r in load_records(log) if not is_remeasurement(r)]
    keys = [r.program_key for r in after]
    assert len(keys) == 40 and len(set(keys)) == 40
    assert keys[: len(before)] == list(before)  # the killed run's records, first and unchanged
    assert all(after_r == before[after_r.program_key] for after_r in after[: len(before)])


def test_cli_tune_json_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "cli.jsonl"
    code = main(
        [
            "tune",
            "relu",
            "64",
            "100",
            "--trials",
            "4",
            "--log",
            str(log),
            "--json",
            "--quiet",
            "--min-repeat-ms",
            "1",
            "--target",
            "c -num-threads=1",
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert set(summary) >= {
        "workload",
        "target",
        "trials",
        "valid_trials",
        "errors",
        "best_time_ms",
        "best_gflops",
        "log",
    }
    assert summary["trials"] == 4 and summary["log"] == str(log)
    assert len({steps_key(r.steps) for r in load_records(log)}) == 4


@pytest.mark.parametrize(
    "argv, message",
    [
        (["tune", "no_such_op", "1"], "unknown workload 'no_such_op'"),
        (["tune", "matmul", "8"], "matmul"),
        (["tune", "matmul", "8", "8", "8", "--target", "fpga"], "unknown target kind 'fpga'"),
        (["tune", "matmul", "8", "8", "8", "--target", "c -cc=no-such-cc"], "no-such-cc"),
        (["tune", "matmul", "8", "8", "8", "--space", "template", "--trials", "-1"], "trials"),
        (["tune", "matmul", "8", "8", "8", "--trials", "0"], "trials must be at least 1"),
        (["tune", "matmul", "8", "-1", "8"], "N must be >= 1, got -1"),
        (["tune", "matmul", "8", "8", "8", "--target", "cuda"], "no CUDA device is visible"),
    ],
)
def test_cli_tune_bad_input_is_one_line(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([*argv, "--log", str(tmp_path / "x.jsonl"), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("autosched: error: ") and message in err[0]


SABOTAGE = {
    "crash": "*(volatile int *)0 = 1;",
    "hang": 'for (;;) { __asm__ volatile(""); }',
    "abort": "abort();",
    "wrong": "out[3] = 12345.0f;",
}


class SabotagedTask(asc.Task):
    """A relu task whose first programs are broken on purpose: the kernel crashes, hangs, aborts or
    writes a wrong value (inserted before the kernel's final ``return 0;``)."""

    def source(self, steps, name="default_function", portable=False):  # type: ignore[no-untyped-def]
        text = super().source(steps, name, portable)
        done: list[str] = self.__dict__.setdefault("done", [])
        key = steps_key(steps)
        if key not in done:
            done.append(key)
        position = done.index(key)
        if position < len(SABOTAGE):
            broken = list(SABOTAGE.values())[position]
            text = text.replace("  return 0;\n}", f"  {broken}\n  return 0;\n}}", 1)
        return text


def test_broken_kernels_cost_one_trial_each_and_tuning_goes_on(tmp_path: Path) -> None:
    task = SabotagedTask("relu", (16, 40), target="c -num-threads=1")
    log = tmp_path / "broken.jsonl"
    option = MeasureOption(repeat=2, min_repeat_ms=1.0, run_timeout=3.0)
    result = asc.tune(task, trials=8, log=log, seed=0, option=option, batch_size=8)
    assert result.errors == {"RUNTIME_ERROR": 2, "RUN_TIMEOUT": 1, "WRONG_ANSWER": 1}, result.errors
    assert result.valid_trials == 4 and result.best_time_ms is not None
    records = load_records(log)
    kinds = [r.error_no.name for r in records]
    assert kinds[:4] == ["RUNTIME_ERROR", "RUN_TIMEOUT", "RUNTIME_ERROR", "WRONG_ANSWER"]
    assert all(r.error_msg for r in records[:4]) and all(r.ok for r in records[4:])
    assert "SIGSEGV" in records[0].error_msg and "SIGABRT" in records[2].error_msg


@pytest.mark.parametrize("spaces", [("template", "sketch"), ("sketch", "template")])
def test_one_log_tuned_in_both_spaces_resumes_with_the_model(tmp_path: Path, spaces: tuple[str, str]) -> None:
    # template programs carry knob features that sketch programs lack: each space's model must
    # still read one feature width from a log holding both kinds (was: "different feature widths")
    task = asc.Task("matmul", (48, 40, 32), target="c -num-threads=1")
    log = tmp_path / "both.jsonl"
    asc.tune(task, trials=12, log=log, space=spaces[0], seed=0, option=FAST, remeasure=0)
    second = asc.tune(task, trials=36, log=log, space=spaces[1], seed=1, option=FAST, remeasure=0)
    assert second.trials == 36 and second.new_trials == 24
    check_kernel(task, asc.load_best(log, task))
