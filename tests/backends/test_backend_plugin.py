"""A target kind added from outside the package: a distribution on ``PYTHONPATH`` whose
``autosched.backends`` entry point registers ``toyc``, a C dialect with its own prelude and compiler
flag. Run in real subprocesses (the plugin is never imported into pytest's process), it goes
through ``asc.emit``, ``asc.build``, ``asc.tune``, the log, ``autosched best``, ``load_best`` and
``autosched export`` + ``make run`` without a file under ``autosched/`` naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autosched.records import load_records
from autosched.records.io import RecordError

pytestmark = pytest.mark.requires("gcc", "make")

REPO = Path(__file__).resolve().parents[2]

#: the plugin: a C dialect whose prelude refuses to compile without its own flag
PLUGIN = textwrap.dedent(
    '''
    """toyc: C with a prelude of its own, built with -DTOYC_BUILD=1."""
    from autosched.backends import CBackend, register_backend
    from autosched.backends.c import CKind

    PRELUDE = (
        "/* toyc dialect */\\n"
        "#ifndef TOYC_BUILD\\n#error toyc programs are built with -DTOYC_BUILD=1\\n#endif\\n"
        "#define TOYC_DIALECT 1\\n"
    )


    class ToyKind(CKind):
        name = "toyc"

        def cflags(self, target, shared):
            return [*super().cflags(target, shared), "-DTOYC_BUILD=1"]


    @register_backend
    class ToyBackend(CBackend):
        kind = "toyc"
        target_kind = ToyKind

        def source(self, func, target, portable=False, timing=None):
            return PRELUDE + super().source(func, target, portable, timing)
    '''
)

#: what a user of the plugin runs: emit, build, tune, load_best; one JSON line
SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import autosched as asc

    target = "toyc -num-threads=1"
    task = asc.Task("matmul", (24, 20, 16), target=target)
    source = task.source(())
    a = np.random.default_rng(0).standard_normal((24, 16)).astype("float32")
    b = np.random.default_rng(1).standard_normal((16, 20)).astype("float32")
    kernel = task.build(())
    out = np.zeros((24, 20), "float32")
    kernel(a, b, out)
    built_ok = bool(np.allclose(out, a @ b, rtol=1e-5, atol=1e-5))
    option = asc.MeasureOption(repeat=1, min_repeat_ms=1.0)
    result = asc.tune(task, trials=6, log="toy.jsonl", seed=0, option=option, progress=False)
    best = asc.load_best("toy.jsonl", task)
    out2 = np.zeros((24, 20), "float32")
    best(a, b, out2)
    print(json.dumps({
        "kinds": sorted(b.kind for b in asc.backends.backends()),
        "prelude": source.startswith("/* toyc dialect */"),
        "built_ok": built_ok,
        "valid": result.valid_trials,
        "errors": {str(k): v for k, v in result.errors.items()},
        "best_ok": bool(np.allclose(out2, a @ b, rtol=1e-5, atol=1e-5)),
    }))
    """
)


def _install_plugin(root: Path) -> None:
    """The plugin as an installed distribution would leave it: a module and its dist-info."""
    (root / "toyc_backend.py").write_text(PLUGIN)
    info = root / "toyc_backend-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyc-backend\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[autosched.backends]\ntoyc = toyc_backend\n")


def _run(args: list[str], cwd: Path, plugins: Path, timeout: float = 300) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(plugins)])}
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, f"{args}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_a_kind_from_a_plugin_builds_tunes_logs_and_exports(tmp_path: Path) -> None:
    plugins, work = tmp_path / "site", tmp_path / "work"
    plugins.mkdir()
    work.mkdir()
    _install_plugin(plugins)
    (work / "use_toyc.py").write_text(SCRIPT)
    summary = json.loads(_run([sys.executable, "use_toyc.py"], work, plugins).strip().splitlines()[-1])
    assert summary["kinds"] == ["c", "cuda", "opencl", "toyc"]
    assert summary["prelude"] and summary["built_ok"] and summary["best_ok"], summary
    assert summary["valid"] == 6 and summary["errors"] == {}, summary

    lines = [json.loads(line) for line in (work / "toy.jsonl").read_text().splitlines()]
    assert len(lines) >= 6 and all(line["target"].startswith("toyc ") for line in lines)
    with pytest.raises(RecordError, match="unknown target kind"):  # without the plugin: one line
        load_records(work / "toy.jsonl")

    best = json.loads(_run([sys.executable, "-m", "autosched", "best", "toy.jsonl", "--json"], work, plugins))
    assert best["target"].startswith("toyc ") and best["workload"].startswith("matmul"), best

    _run([sys.executable, "-m", "autosched", "export", "toy.jsonl", "--out", "exported"], work, plugins)
    kernel_c = (work / "exported" / "kernel.c").read_text()
    assert kernel_c.startswith("/* toyc dialect */") or "/* toyc dialect */" in kernel_c
    assert "-DTOYC_BUILD=1" in (work / "exported" / "Makefile").read_text()
    ran = subprocess.run(["make", "-s", "run"], cwd=work / "exported", capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert ran.returncode == 0 and "ok" in ran.stdout.lower(), ran.stdout + ran.stderr


def test_a_plugin_that_fails_to_import_is_one_warning(tmp_path: Path) -> None:
    plugins = tmp_path / "site"
    plugins.mkdir()
    _install_plugin(plugins)
    (plugins / "toyc_backend.py").write_text("raise RuntimeError('broken on purpose')\n")
    probe = "import autosched as asc; print(sorted(b.kind for b in asc.backends.backends()))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(plugins)])}
    command = [sys.executable, "-W", "always", "-c", probe]
    proc = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['c', 'cuda', 'opencl']"
    warned = [line for line in proc.stderr.splitlines() if "toyc" in line]
    assert len(warned) == 1 and "broken on purpose" in warned[0], proc.stderr
