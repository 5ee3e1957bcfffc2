"""A plain install tunes with the learned model: xgboost and scikit-learn are dependencies (the
CPU-only ``xgboost-cpu`` wheel where one is published), the quick start's ``autosched tune`` runs
the evolutionary search with the xgb model, and random search with a warning is left for a machine
where xgboost really does not import; the warning then says what to install."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from setuptools.config.setupcfg import read_configuration

REPO = Path(__file__).resolve().parents[2]

#: the quick start's command (scripts/main-job), at a size that tunes in seconds
TUNE = ["-m", "autosched", "tune", "matmul", "32", "32", "32", "--target", "c -num-threads=1",
        "--trials", "24", "--seed", "0", "--log", "mm.jsonl", "--remeasure", "0", "--repeat", "1",
        "--min-repeat-ms", "1"]


def _tune(cwd: Path, extra_path: str = "") -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(p for p in (extra_path, str(REPO)) if p)
    return subprocess.run([sys.executable, *TUNE], cwd=cwd, env={**os.environ, "PYTHONPATH": path},
                          capture_output=True, text=True, timeout=300)


def test_xgboost_and_scikit_learn_are_dependencies_on_this_platform() -> None:
    options = read_configuration(REPO / "setup.cfg")["options"]
    here = [Requirement(r) for r in options["install_requires"]]
    names = {r.name for r in here if r.marker is None or r.marker.evaluate()}
    assert "scikit-learn" in names
    assert len(names & {"xgboost", "xgboost-cpu"}) == 1, names  # one xgboost on every platform
    if sys.platform == "linux" and os.uname().machine in ("x86_64", "aarch64"):
        assert "xgboost-cpu" in names
    assert options["extras_require"]["tune"] == []  # `pip install autosched[tune]` still resolves


@pytest.mark.requires("gcc")
def test_the_quick_start_tunes_with_the_xgb_model(tmp_path: Path) -> None:
    pytest.importorskip("xgboost", reason="xgboost is a dependency: pip install -e . installs it")
    run = _tune(tmp_path)
    assert run.returncode == 0, run.stderr
    assert "tuner evolutionary, model xgb" in run.stdout
    assert "random search" not in run.stdout + run.stderr, run.stderr
    assert "autosched: warning" not in run.stderr, run.stderr
    # the model was fitted and scored batches: its quality is in the sidecar, under its name
    sidecar = [json.loads(line) for line in (tmp_path / "mm.model.jsonl").read_text().splitlines()]
    assert sidecar and {e["model"] for e in sidecar} == {"xgb"}
    assert {e["tuner"] for e in sidecar} == {"EvolutionaryTuner"}
    assert any(e["pairwise_accuracy"] is not None for e in sidecar), sidecar


@pytest.mark.requires("gcc")
def test_random_search_only_where_xgboost_does_not_import_and_it_says_what_to_install(tmp_path: Path) -> None:
    """An xgboost whose import fails (as one without its native library does) shadows the real one."""
    broken = tmp_path / "site" / "xgboost"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text('raise ImportError("libxgboost.so: cannot open shared object")\n')
    run = _tune(tmp_path, extra_path=str(tmp_path / "site"))
    assert run.returncode == 0, run.stderr
    warnings = [line for line in run.stderr.splitlines() if line.startswith("autosched: warning:")]
    assert len(warnings) == 1, run.stderr
    assert "needs xgboost, which does not import here (libxgboost.so: cannot open" in warnings[0]
    assert "pip install xgboost-cpu" in warnings[0] and "random search" in warnings[0]
    assert "random search: the evolutionary tuner's xgb model is unavailable" in run.stdout
    assert not (tmp_path / "mm.model.jsonl").exists()  # no model, no model quality
