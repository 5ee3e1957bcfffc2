"""autosched called the ways applications call it, each run as a real subprocess: a flat script
without a main guard, the same script on stdin, ``python -c``, a notebook-like namespace and a real
Jupyter kernel, a worker thread of a running application, two tuning threads in one process, and a
non-editable install used from another directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import autosched as asc
from autosched.records import Record, append_records, is_remeasurement, load_records, steps_key
from autosched.runner.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autosched.search.baseline import default_candidate
from autosched.search.measurer import Measurer
from autosched.search.progress import TuneStats
from autosched.search.shared_log import SharedLog

pytestmark = pytest.mark.requires("gcc")

REPO = Path(__file__).resolve().parents[1]

#: a user workload and a short tuning run, printing one JSON line: the flat script of a tutorial
SCRIPT = textwrap.dedent(
    """
    import json
    import autosched as asc

    @asc.workload("user_axpy")
    def user_axpy(n):
        X = asc.placeholder((n,), name="X")
        Y = asc.placeholder((n,), name="Y")
        Z = asc.compute((n,), lambda i: X[i] * 2.0 + Y[i], name="Z")
        return [X, Y, Z]

    task = asc.Task("user_axpy", (1000,), target="c -num-threads=1")
    option = asc.MeasureOption(repeat=1, min_repeat_ms=1.0)
    result = asc.tune(task, trials=6, log="user.jsonl", seed=0, option=option)
    print(json.dumps({"valid": result.valid_trials, "errors": result.errors}))
    """
)


def _python(args: list[str], cwd: Path, stdin: str | None = None, timeout: float = 300) -> str:
    """Run ``python ARGS`` in ``cwd`` (autosched importable from this checkout); its stdout."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _summary(stdout: str) -> dict[str, object]:
    return json.loads(stdout.strip().splitlines()[-1])


def _assert_tuned(stdout: str, log: Path) -> None:
    """Every trial of the run measured a program: no error at all (the workload is trivial)."""
    summary = _summary(stdout)
    assert summary["errors"] == {} and summary["valid"] == 6, summary
    assert len([r for r in load_records(log) if not is_remeasurement(r)]) == 6


@pytest.mark.parametrize("how", ["file", "stdin", "dash-c"])
def test_a_flat_script_without_main_guard_tunes(tmp_path: Path, how: str) -> None:
    (tmp_path / "tutorial.py").write_text(SCRIPT)
    if how == "file":
        out = _python(["tutorial.py"], tmp_path)
    elif how == "stdin":
        out = _python(["-"], tmp_path, stdin=SCRIPT)
    else:
        out = _python(["-c", SCRIPT], tmp_path)
    _assert_tuned(out, tmp_path / "user.jsonl")


def test_a_workload_defined_in_a_notebook_like_namespace_tunes(tmp_path: Path) -> None:
    """Code exec'd in a fresh module that cannot be imported by name, as Jupyter runs a cell."""
    runner = textwrap.dedent(
        f"""
        import types
        cell = types.ModuleType("cell_that_no_import_finds")
        exec(compile({SCRIPT!r}, "<cell 1>", "exec"), cell.__dict__)
        """
    )
    _assert_tuned(_python(["-c", runner], tmp_path), tmp_path / "user.jsonl")


@pytest.mark.requires("jupyter")
def test_a_real_jupyter_kernel_tunes(tmp_path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    setup = f"import sys; sys.path.insert(0, {str(REPO)!r})"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(setup), nbformat.v4.new_code_cell(SCRIPT)])
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = nb.cells[1].outputs
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert not [o for o in outputs if o.get("output_type") == "error"], outputs
    _assert_tuned(text, tmp_path / "user.jsonl")


THREADS = textwrap.dedent(
    """
    import json, threading
    import autosched as asc

    option = asc.MeasureOption(repeat=1, min_repeat_ms=1.0)
    results = {}

    def job(name, log, seed):
        task = asc.Task("matmul", (16, 16, 16), target="c -num-threads=1")
        results[name] = asc.tune(task, trials=6, log=log, seed=seed, option=option)

    threads = [threading.Thread(target=job, args=(f"t{i}", log, seed)) for i, (log, seed) in enumerate(RUNS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({k: {"valid": r.valid_trials, "new": r.new_trials, "errors": r.errors}
                      for k, r in results.items()}))
    """
)


def test_tuning_from_a_worker_thread_of_an_application(tmp_path: Path) -> None:
    out = _python(["-c", "RUNS = [('a.jsonl', 0)]\n" + THREADS], tmp_path)
    assert _summary(out) == {"t0": {"valid": 6, "new": 6, "errors": {}}}


def test_two_tuning_runs_in_two_threads_of_one_process(tmp_path: Path) -> None:
    out = _python(["-c", "RUNS = [('a.jsonl', 0), ('b.jsonl', 1)]\n" + THREADS], tmp_path)
    assert _summary(out) == {f"t{i}": {"valid": 6, "new": 6, "errors": {}} for i in range(2)}
    for name in ("a.jsonl", "b.jsonl"):
        assert all(r.ok for r in load_records(tmp_path / name))


def test_two_threads_sharing_one_log_never_measure_a_program_twice(tmp_path: Path) -> None:
    """Same log, same seed: both runs propose the same programs in the same order."""
    out = _python(["-c", "RUNS = [('shared.jsonl', 0), ('shared.jsonl', 0)]\n" + THREADS], tmp_path)
    summary = _summary(out)
    new = summary["t0"]["new"] + summary["t1"]["new"]  # type: ignore[index]
    trials = [r for r in load_records(tmp_path / "shared.jsonl") if not is_remeasurement(r)]
    keys = [steps_key(r.steps) for r in trials]
    assert len(keys) == len(set(keys)) == new, keys


def test_a_non_editable_install_works_from_another_directory(tmp_path: Path) -> None:
    """A wheel built from the checkout (``pip wheel``, isolated build), installed into a fresh
    virtual environment (numpy and cffi from the system's site-packages), then the CLI and the API
    from a directory that holds no autosched source."""
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO)],
        check=True,
        timeout=600,
        capture_output=True,
    )
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    (wheel,) = wheels.glob("autosched-*.whl")
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        timeout=300,
        capture_output=True,
    )
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    where = subprocess.run(
        [str(python), "-c", "import autosched; print(autosched.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    assert where.startswith(str(venv)), where
    (work / "tutorial.py").write_text(SCRIPT)
    run = subprocess.run(
        [str(python), "tutorial.py"], cwd=work, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    _assert_tuned(run.stdout, work / "user.jsonl")
    cli = subprocess.run(
        [
            str(venv / "bin" / "autosched"),
            "tune",
            "relu",
            "64",
            "64",
            "--trials",
            "3",
            "--log",
            "r.jsonl",
            "--json",
            "--quiet",
            "--target",
            "c -num-threads=1",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["valid_trials"] == 3


def test_unknown_error_records_of_a_broken_run_are_measured_again(tmp_path: Path) -> None:
    """A log whose trials failed for the machinery's sake (UNKNOWN_ERROR) is no reason to skip them."""
    import autosched as asc
    from autosched.records import Record, append_records
    from autosched.runner.measure import MeasureInput, MeasureResult

    task = asc.Task("matmul", (16, 16, 16), target="c -num-threads=1")
    log = tmp_path / "broken.jsonl"
    option = asc.MeasureOption(repeat=1, min_repeat_ms=1.0)
    first = asc.tune(task, trials=4, log=log, seed=3, option=option)
    assert first.valid_trials == 4
    broken = [
        Record.from_measure(MeasureInput(task, r.steps), MeasureResult((), MeasureErrorNo.UNKNOWN_ERROR, "x"))
        for r in load_records(log)
    ]
    log.unlink()
    append_records(log, broken)
    again = asc.tune(task, trials=4, log=log, seed=3, option=option)
    assert again.new_trials == 4 and again.resumed_trials == 0 and again.valid_trials == 4
    fresh = [r for r in load_records(log) if r.ok]
    assert {steps_key(r.steps) for r in fresh} == {steps_key(r.steps) for r in broken}


def test_two_processes_sharing_one_log_never_measure_a_program_twice(tmp_path: Path) -> None:
    """Two ``autosched tune`` processes started together on one log, with the same seed."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [
        sys.executable,
        "-m",
        "autosched",
        "tune",
        "matmul",
        "16",
        "16",
        "16",
        "--trials",
        "10",
        "--log",
        "shared.jsonl",
        "--seed",
        "0",
        "--json",
        "--quiet",
        "--target",
        "c -num-threads=1",
        "--repeat",
        "1",
        "--min-repeat-ms",
        "1",
    ]
    procs = [
        subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    summaries = [json.loads(p.communicate(timeout=300)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    # trials only: each run re-measures its top 3 at the end (no trials, logged as such)
    keys = [steps_key(r.steps) for r in load_records(tmp_path / "shared.jsonl") if not is_remeasurement(r)]
    assert len(keys) == len(set(keys)) == sum(s["new_trials"] for s in summaries), (keys, summaries)
    assert len(keys) == 10  # the runs share --trials (tests/search/test_shared_trials.py)


def test_a_program_logged_by_another_run_between_reading_the_log_and_claiming_it_is_skipped(
    tmp_path: Path,
) -> None:
    """The race behind a rare duplicate in the test above: run B reads the log, run A logs the
    program and gives its claim back, then B's claim succeeds. B must read the log again."""
    task = asc.Task("matmul", (16, 16, 16), target="c -num-threads=1")
    log = tmp_path / "shared.jsonl"
    log.touch()
    cand = default_candidate(task)
    measurer = Measurer(task, None, None, log, TuneStats(task.flops()))  # type: ignore[arg-type]
    assert measurer.shared is not None
    claim = measurer.shared.claim

    def claim_after_the_other_run_logged_it(key: str) -> bool:
        record = Record.from_measure(MeasureInput(task, cand.steps), MeasureResult((1e-3,)))
        append_records(log, [record])  # run A: measured, logged, claim given back
        return claim(key)

    measurer.shared.claim = claim_after_the_other_run_logged_it  # type: ignore[method-assign]
    other = SharedLog(log, task.workload_key, str(task.target))
    try:
        assert measurer._claimed([cand]) == [None]  # skipped: not measured a second time
        assert other.claim(steps_key(cand.steps))  # and the claim was given back
        assert [r.program_key for r in measurer.foreign()] == [steps_key(cand.steps)]  # counted as theirs
    finally:
        other.close()
        measurer.close()
