"""End-to-end tuning with every tuner on the real compiler and CPU: the final re-measurement, the
model-quality sidecar and report, transfer logs, resuming a killed model-guided run, the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from model_doubles import SpyModel, StepKNNModel

import autosched as asc
from autosched.cli import main
from autosched.diagnostics import AutoschedWarning
from autosched.records import BASELINE_KEY, REMEASURE_KEY, Record, is_remeasurement, load_records, ranked
from autosched.runner import LocalRunner
from autosched.search import EvolutionaryTuner, GATuner, SATuner, make_space
from autosched.search.baseline import space_default
from autosched.search.tuning_space import Candidate
from autosched.space.templates.handwritten import hand_written_config

pytestmark = pytest.mark.requires("gcc")

FAST = asc.MeasureOption(repeat=2, min_repeat_ms=1.0)
TASK = asc.Task("matmul", (16, 24, 8), target="c -num-threads=1")
TESTS = Path(__file__).parents[1]
#: subprocesses import this checkout's autosched, whatever their working directory
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")])}


def _tuner(name: str, space: str) -> asc.Tuner | str:
    """A tuner of each kind; the model-guided ones with the test-double model."""
    sp = make_space(TASK, space)
    if name == "sa":
        return SATuner(TASK, sp, seed=0, model=StepKNNModel(), plan_size=8, n_iter=20)
    if name == "evolutionary":
        return EvolutionaryTuner(TASK, sp, seed=0, model=StepKNNModel(), plan_size=8, population=32)
    if name == "ga":
        return GATuner(TASK, sp, seed=0, population=4)
    return name


def _key(candidate: Candidate | None) -> str | None:
    return candidate.key if candidate is not None else None


def is_default_record(r: Record) -> bool:
    return (r.program or {}).get("space") == "default"


@pytest.mark.parametrize(
    ("name", "space"),
    [("random", "sketch"), ("grid", "template"), ("ga", "sketch"), ("sa", "template"), ("sa", "sketch"),
     ("evolutionary", "sketch")],
)
def test_each_tuner_tunes_for_real_and_the_best_is_re_measured(tmp_path: Path, name: str, space: str) -> None:
    log = tmp_path / "t.jsonl"
    result = asc.tune(TASK, trials=16, log=log, tuner=_tuner(name, space), space=space, seed=0, option=FAST,
                      batch_size=4)
    records = load_records(log)
    trials = [r for r in records if not is_remeasurement(r)]
    again = [r for r in records if is_remeasurement(r)]
    assert result.trials == 16 and len({r.program_key for r in trials}) == 16 == len(trials)
    # the three fastest programs and the hand-written default (measured first, where there is
    # one) were measured again, with 10 repeats, as ordinary records
    fastest = sorted((r for r in trials if r.ok), key=lambda r: r.median)[:3]
    # the default: logged as such, or (a template space) the point that is the hand-written schedule
    point = _key(space_default(make_space(TASK, space)))
    default = {r.program_key for r in trials if r.ok and (is_default_record(r) or r.program_key == point)}
    expected = {r.program_key for r in fastest} | default
    assert result.valid_trials >= 12 and result.remeasured_trials == len(again) == len(expected)
    assert {r.program_key for r in again} == expected
    assert {r.program_key for r in again if r.program.get(BASELINE_KEY)} == default
    assert all(len(r.costs) == 10 and r.program[REMEASURE_KEY] == 10 for r in again)
    # the fastest re-measurement, where another program must beat the default by BASELINE_MARGIN
    best = ranked(again)[0]
    assert result.best_time_ms == pytest.approx(best.median * 1e3) and result.best_steps == best.steps
    sidecar = tmp_path / "t.model.jsonl"
    assert sidecar.exists() == (name in ("sa", "evolutionary"))


def test_a_rerun_measures_nothing_again(tmp_path: Path) -> None:
    log = tmp_path / "t.jsonl"
    first = asc.tune(TASK, trials=8, log=log, tuner="random", seed=0, option=FAST, batch_size=4)
    lines = log.read_bytes()
    again = asc.tune(TASK, trials=8, log=log, tuner="random", seed=0, option=FAST, batch_size=4)
    assert log.read_bytes() == lines and (again.new_trials, again.remeasured_trials) == (0, 0)
    assert again.trials == 8 and again.best_time_ms == first.best_time_ms


def test_model_quality_goes_to_the_sidecar_and_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "mm.jsonl"
    asc.tune(TASK, trials=16, log=log, tuner=_tuner("evolutionary", "sketch"), option=FAST, batch_size=4)
    entries = [json.loads(line) for line in (tmp_path / "mm.model.jsonl").read_text().splitlines()]
    # trial 1 is matmul's hand-written schedule, then batches of 4; the first fit waits for 8 records
    assert [e["batch"] for e in entries] == [1, 2, 3] and [e["trials"] for e in entries] == [9, 13, 16]
    assert entries[0]["pairwise_accuracy"] is None and entries[-1]["pairwise_accuracy"] is not None
    assert all(e["model"] == "knn-double" and e["fit_seconds"] >= 0 for e in entries)
    pytest.importorskip("matplotlib", reason="needs matplotlib (pip install matplotlib)")
    assert main(["report", str(log), "--out", str(tmp_path / "r.png")]) == 0
    out = capsys.readouterr().out
    assert "cost model quality per batch" in out and "pairwise acc" in out and "knn-double" in out


def test_transfer_logs_start_the_model(tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    small = asc.Task("matmul", (8, 8, 8), target="c -num-threads=1")
    asc.tune(small, trials=8, log=other, tuner="random", seed=0, option=FAST, remeasure=0)
    spy = SpyModel()
    tuner = SATuner(TASK, make_space(TASK, "sketch"), seed=0, model=spy, plan_size=4, n_iter=10)
    asc.tune(TASK, trials=8, log=tmp_path / "t.jsonl", tuner=tuner, option=FAST, batch_size=4,
             transfer=[other], remeasure=0)
    first_programs, _ = spy.fits[0]
    assert len(first_programs) == 8 and all(p.task == small for p in first_programs)
    assert tuner.plans >= 1  # the first batch came from the model's plan
    assert tuner.model_quality[0].pairwise_accuracy is not None  # and was scored by it
    # its plan used up, the model was refitted on the transfer records and the task's alongside
    last = [p.task for p in spy.fits[-1][0]]
    assert last[:8] == [small] * 8 and last[8:] == [TASK] * (len(last) - 8) and len(last) >= 8 + 4


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autosched", "tune", "matmul", "8", "8", "8", "--log",
                           str(tmp_path / "x.jsonl"), "--quiet", *args], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, env=ENV)


def test_bad_names_and_transfer_logs_are_one_line_errors(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = _cli(tmp_path, "--tuner", "anneal")
    assert out.returncode == 2 and out.stderr.strip() == (
        "autosched: error: unknown tuner 'anneal'; tuners: evolutionary, ga, grid, random, sa, xgb")
    out = _cli(tmp_path, "--tuner", "random", "--transfer", str(tmp_path / "nope.jsonl"))
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        f"autosched: error: no transfer log '{tmp_path / 'nope.jsonl'}'"]
    future = tmp_path / "future.jsonl"
    future.write_text('{"v": 2, "workload": ["matmul", [8, 8, 8]]}\n')
    out = _cli(tmp_path, "--tuner", "random", "--transfer", str(future))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "unsupported record format version 2" in out.stderr
    assert not (tmp_path / "x.jsonl").exists()  # nothing was measured
    assert main(["tune", "matmul", "8", "8", "8", "--model", "gbdt", "--log", str(tmp_path / "y.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "autosched: error: unknown model 'gbdt'; models: mlp, random, xgb"


RUN = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {tests!r})
    from model_doubles import SpyModel
    import autosched as asc
    from autosched.search import EvolutionaryTuner, make_space
    task = asc.Task("matmul", (24, 40, 32), target="c -num-threads=1")
    spy = SpyModel()
    tuner = EvolutionaryTuner(task, make_space(task, "sketch"), seed=3, model=spy, plan_size=8, population=32)
    option = asc.MeasureOption(repeat=2, min_repeat_ms=1.0)
    result = asc.tune(task, trials=30, log={log!r}, tuner=tuner, option=option, batch_size=2)
    print(json.dumps({{"resumed": result.resumed_trials, "new": result.new_trials,
                      "first_fit": len(spy.fits[0][1]), "trials": result.trials}}))
""")


def test_a_killed_model_guided_run_resumes_refits_and_measures_nothing_twice(tmp_path: Path) -> None:
    log = tmp_path / "killed.jsonl"
    script = tmp_path / "run.py"
    script.write_text(RUN.format(tests=str(TESTS), log=str(log)))
    proc = subprocess.Popen([sys.executable, str(script)], start_new_session=True, cwd=tmp_path, env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and log.read_bytes().count(b"\n") >= 12:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    before = {r.program_key: r for r in load_records(log)}
    assert 12 <= len(before) < 30
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, env=ENV)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["resumed"] == len(before) and summary["trials"] == 30
    assert summary["first_fit"] == len(before)  # refitted on the whole log before proposing anything
    after = [r for r in load_records(log) if not is_remeasurement(r)]
    keys = [r.program_key for r in after]
    assert len(keys) == 30 and len(set(keys)) == 30
    assert all(r == before[r.program_key] for r in after if r.program_key in before)


def test_transfer_skips_records_of_unregistered_workloads(tmp_path: Path) -> None:
    """Records of an unregistered workload in a transfer log are skipped with one warning."""
    other = tmp_path / "other.jsonl"
    small = asc.Task("matmul", (8, 8, 8), target="c -num-threads=1")
    asc.tune(small, trials=4, log=other, tuner="random", seed=0, option=FAST, remeasure=0)
    data = json.loads(other.read_text().splitlines()[0])
    data["workload"], data["workload_key"] = ["test_gone_op", [1]], "test_gone_op(1)#0"
    with other.open("a") as f:
        f.write(json.dumps(data) + "\n")
    spy = SpyModel()
    tuner = SATuner(TASK, make_space(TASK, "sketch"), seed=0, model=spy, plan_size=4, n_iter=5)
    with pytest.warns(UserWarning, match="skipped 1 records: unknown workload test_gone_op"):
        asc.tune(TASK, trials=4, log=tmp_path / "t.jsonl", tuner=tuner, option=FAST, transfer=[other],
                 batch_size=4, remeasure=0)
    assert [p.task for p in spy.fits[0][0]] == [small] * 4 + [TASK] * 4  # too few to fit on before


@pytest.mark.parametrize(("tuner", "space"), [(None, "sketch"), ("sa", "template")])
def test_the_default_tuners_with_the_real_xgb_model(tmp_path: Path, tuner: str | None, space: str) -> None:
    """No double: the model-guided default (evolutionary + xgb) and sa/xgb on knobs, end to end."""
    pytest.importorskip("xgboost", reason="needs xgboost (pip install xgboost-cpu)")
    log = tmp_path / "x.jsonl"
    result = asc.tune(TASK, trials=24, log=log, tuner=tuner, space=space, seed=1, option=FAST, batch_size=8,
                      remeasure=0)
    records = load_records(log)
    assert result.trials == 24 == len({r.program_key for r in records}) and result.valid_trials >= 20
    entries = [json.loads(line) for line in (tmp_path / "x.model.jsonl").read_text().splitlines()]
    # the hand-written schedule first: outside the sketch space; a point of the template where its
    # tile is one (with AVX-512 it is 64 columns wide, more than this matmul's 24: measured as itself)
    in_template = space == "template" and hand_written_config(TASK.workload, TASK.target) is not None
    assert records[0].program["space"] == ("template" if in_template else "default")
    assert [e["model"] for e in entries] == ["xgb"] * 3 and [e["trials"] for e in entries] == [9, 17, 24]
    scored = [e["pairwise_accuracy"] for e in entries[1:]]
    assert all(a is not None and 0.0 <= a <= 1.0 for a in scored)


def test_a_saved_model_guides_the_next_run_and_a_corrupt_one_falls_back(tmp_path: Path) -> None:
    pytest.importorskip("xgboost", reason="needs xgboost (pip install xgboost-cpu)")
    saved = tmp_path / "mm.model"
    asc.tune(TASK, trials=16, log=tmp_path / "a.jsonl", seed=0, option=FAST, batch_size=8, remeasure=0,
             save_model=saved)
    other = asc.Task("matmul", (24, 16, 16), target="c -num-threads=1")
    asc.tune(other, trials=16, log=tmp_path / "b.jsonl", model=str(saved), seed=0, option=FAST,
             batch_size=8, remeasure=0)
    entries = [json.loads(line) for line in (tmp_path / "b.model.jsonl").read_text().splitlines()]
    assert entries[0]["pairwise_accuracy"] is not None  # the first batch was already guided

    corrupt = tmp_path / "corrupt.model"
    corrupt.write_bytes(saved.read_bytes()[:40])
    with pytest.warns(AutoschedWarning, match="cannot use the saved cost model: .*corrupt.model.*new xgb"):
        result = asc.tune(other, trials=16, log=tmp_path / "c.jsonl", model=str(corrupt), seed=0,
                          option=FAST, batch_size=8, remeasure=0)
    assert result.trials == 16 and result.model == "xgb"
    out = _cli(tmp_path, "--model", str(tmp_path / "missing.model"))
    assert out.returncode == 2 and out.stderr.strip() == (
        f"autosched: error: no saved cost model '{tmp_path / 'missing.model'}'")


class _CountingRunner(LocalRunner):
    """The real local runner, noting which programs each call timed and with how many repeats or
    rounds."""

    def __init__(self, option: asc.MeasureOption) -> None:
        super().__init__(option)
        self.calls: list[tuple[int, int]] = []  # (programs, repeats) of each call of run
        self.rounds: list[tuple[int, int, int]] = []  # (programs, rounds, repeats) of each run_rounds

    def run(self, inputs, builds):  # type: ignore[no-untyped-def]
        self.calls.append((len(inputs), self.option.repeat))
        return super().run(inputs, builds)

    def run_rounds(self, inputs, builds, rounds, repeat=1):  # type: ignore[no-untyped-def]
        self.rounds.append((len(inputs), rounds, repeat))
        return super().run_rounds(inputs, builds, rounds, repeat)


def test_the_final_re_measurement_interleaves_the_programs_repeats(tmp_path: Path) -> None:
    """The re-measurement times all its programs in 7 rounds in the worker, each round every
    program once (a slow stretch of the machine then slows every program alike), and logs each
    program once with its 7 costs and the rounds' calibration figure."""
    log = tmp_path / "t.jsonl"
    runner = _CountingRunner(FAST)
    try:
        result = asc.tune(TASK, trials=8, log=log, tuner="random", seed=0, runner=runner, batch_size=4,
                          remeasure=3, remeasure_repeat=7)
    finally:
        runner.close()
    again = [r for r in load_records(log) if is_remeasurement(r)]
    programs = len(again)
    assert programs == result.remeasured_trials >= 3  # 3 fastest (+ the hand-written default)
    assert runner.rounds == [(programs, 7, 1)]  # one request to the worker, no pass per round
    assert sum(n for n, _ in runner.calls) == 8 and all(r == FAST.repeat for _, r in runner.calls)
    assert runner.option is FAST  # untouched
    assert len({r.calibration for r in again}) == 1 and again[0].calibration > 0
    assert all(len(r.costs) == 7 and r.program[REMEASURE_KEY] == 7 for r in again)
