"""Progress by default: ``asc.tune`` and ``asc.tune_network`` draw their progress where a person
watches (stderr a terminal, or a notebook) and stay quiet into pipes and files; ``progress=False``
silences them anywhere, ``progress=True`` forces them. Each run is a real subprocess whose stderr is
a real pseudo-terminal (``os.openpty``) or a pipe, or a cell of a real Jupyter kernel."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.requires("gcc")

REPO = Path(__file__).resolve().parents[2]

#: a short tuning run; PROGRESS is the ``progress=`` argument's text ("" for the default)
TUNE = textwrap.dedent(
    """
    import autosched as asc
    task = asc.Task("matmul", (16, 16, 16), target="c -num-threads=1")
    option = asc.MeasureOption(repeat=1, min_repeat_ms=1.0)
    result = asc.tune(task, trials=4, log="mm.jsonl", seed=0, option=option, remeasure=0{progress})
    print("valid", result.valid_trials)
    """
)

#: a two-task network (dense + relu, softmax), tuned for 4 trials in rounds of 2
NETWORK = textwrap.dedent(
    """
    import numpy as np
    import autosched as asc
    g = asc.GraphBuilder("tiny")
    x = g.input("x", (2, 8))
    w = g.constant(np.ones((4, 8), np.float32), "w")
    g.output(g.softmax(g.relu(g.dense(x, w))))
    option = asc.MeasureOption(repeat=1, min_repeat_ms=1.0)
    result = asc.tune_network(g.build(), trials=4, log="tiny.jsonl", round_trials=2, tuner="random",
                              remeasure=0, option=option{progress})
    print("tasks", len(result.tasks))
    """
)

BAR = re.compile(r"\] +\d/4  best +[\d.]+ GFLOP/s  errors 0 .*elapsed \d:\d\d:\d\d  ETA ")
ROUND = re.compile(r"\[\d/4\] task \d .*estimated latency .* ms  elapsed \d:\d\d:\d\d  ETA \d:\d\d:\d\d")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _on_pty(code: str, cwd: Path, timeout: float = 240) -> tuple[str, str]:
    """Run ``python -c code`` with its stderr on a new pseudo-terminal (stdout a pipe); what it
    wrote to each."""
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=cwd, env=_env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every writer of the terminal has closed it
                    break
                if not data:
                    break
                seen += data
            elif proc.poll() is not None:
                break
        out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out.decode()}\n{seen.decode(errors='replace')}"
    return out.decode(), seen.decode(errors="replace")


def _on_pipes(code: str, cwd: Path, timeout: float = 240) -> tuple[str, str]:
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout, proc.stderr


def test_tune_shows_progress_on_a_terminal_by_default(tmp_path: Path) -> None:
    out, err = _on_pty(TUNE.format(progress=""), tmp_path)
    assert "valid 4" in out
    assert BAR.search(err), err
    assert "stopped: 4 trials done" in err


def test_tune_is_quiet_into_a_pipe_by_default(tmp_path: Path) -> None:
    out, err = _on_pipes(TUNE.format(progress=""), tmp_path)
    assert "valid 4" in out
    assert err == "", err


def test_progress_false_is_quiet_on_a_terminal(tmp_path: Path) -> None:
    out, err = _on_pty(TUNE.format(progress=", progress=False"), tmp_path)
    assert "valid 4" in out
    assert err == "", err


def test_progress_true_draws_into_a_pipe(tmp_path: Path) -> None:
    out, err = _on_pipes(TUNE.format(progress=", progress=True"), tmp_path)
    assert "valid 4" in out
    assert BAR.search(err) and "\r" not in err, err  # one line per batch where nobody redraws


def test_tune_network_shows_rounds_with_elapsed_time_and_eta_on_a_terminal(tmp_path: Path) -> None:
    out, err = _on_pty(NETWORK.format(progress=""), tmp_path)
    assert "tasks 2" in out
    assert ROUND.search(err), err
    assert "GFLOP/s" not in err, err  # the rounds' own tune() calls draw no bars of their own


def test_tune_network_is_quiet_into_a_pipe_and_with_progress_false(tmp_path: Path) -> None:
    out, err = _on_pipes(NETWORK.format(progress=""), tmp_path)
    assert "tasks 2" in out and err == "", err
    (tmp_path / "again").mkdir()
    out, err = _on_pty(NETWORK.format(progress=", progress=False"), tmp_path / "again")
    assert "tasks 2" in out and err == "", err


@pytest.mark.requires("jupyter")
def test_tune_shows_progress_in_a_notebook_cell(tmp_path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    setup = f"import sys; sys.path.insert(0, {str(REPO)!r})"
    cells = [nbformat.v4.new_code_cell(setup), nbformat.v4.new_code_cell(TUNE.format(progress=""))]
    nb = nbformat.v4.new_notebook(cells=cells)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = nb.cells[1].outputs
    assert not [o for o in outputs if o.get("output_type") == "error"], outputs
    stderr = "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")
    stdout = "".join(o.get("text", "") for o in outputs if o.get("name") == "stdout")
    assert "valid 4" in stdout
    assert BAR.search(stderr), outputs
