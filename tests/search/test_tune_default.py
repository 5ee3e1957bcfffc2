"""``tune(..., measure_default=...)``: the untuned default schedule is the first trial (by default
where it is hand-written: matmul and conv2d NCHW on a CPU)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.cli import main
from autosched.ops.schedules import default_schedule
from autosched.records import best_record, is_baseline, is_remeasurement, load_records, steps_key
from autosched.runner.measure import MeasureOption
from autosched.search.final import _top
from autosched.space.templates.handwritten import hand_written_config

pytestmark = pytest.mark.requires("gcc")

FAST = MeasureOption(repeat=2, min_repeat_ms=1.0, run_timeout=10.0)


def test_the_default_schedule_is_the_first_trial_once_and_can_win(tmp_path: Path) -> None:
    task = asc.Task("matmul", (64, 48, 40), target="c -num-threads=1")
    log = tmp_path / "mm.jsonl"
    hand_written, name = default_schedule(task.workload, task.target)
    assert name.endswith("matmul_cpu")  # a built-in with a hand-written schedule
    first = asc.tune(task, trials=1, log=log, tuner="random", seed=0, option=FAST, remeasure=0,
                     measure_default=True)
    (record,) = load_records(log)
    assert (first.trials, first.new_trials, first.resumed_trials, first.valid_trials) == (1, 1, 0, 1)
    assert record.ok
    assert record.program == {"space": "default", "schedule": name}
    assert record.program_key == steps_key(hand_written.steps)
    # the only record is the best: the tuned kernel is the hand-written schedule, and correct
    a, b = task.workload.random_inputs(2)
    c = np.zeros((64, 48), np.float32)
    asc.load_best(log, task)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    # resumed: the default is not measured again, the search goes on from it
    again = asc.tune(task, trials=5, log=log, tuner="evolutionary", seed=1, option=FAST, remeasure=0,
                     measure_default=True)
    trials = [r for r in load_records(log) if not is_remeasurement(r)]
    assert again.trials == 5 and len(trials) == 5 and len({r.program_key for r in trials}) == 5
    assert sum((r.program or {}).get("space") == "default" for r in trials) == 1
    assert min(r.median for r in trials if r.ok) * 1e3 <= again.best_time_ms + 1e-9


def test_by_default_only_a_hand_written_schedule_is_measured_first(tmp_path: Path) -> None:
    task = asc.Task("relu", (32, 40), target="c -num-threads=1")  # its default is the naive nest
    log = tmp_path / "relu.jsonl"
    asc.tune(task, trials=2, log=log, tuner="random", seed=0, option=FAST, remeasure=0)
    assert all((r.program or {}).get("space") == "sketch" for r in load_records(log))



def test_a_template_search_starts_from_the_hand_written_point(tmp_path: Path) -> None:
    conv = asc.Task("conv2d_nchw", (1, 4, 6, 6, 4, 3, 3, 1, 1), target="c -num-threads=1")
    log = tmp_path / "conv.jsonl"
    asc.tune(conv, trials=3, log=log, tuner="sa", space="template", seed=0, option=FAST, remeasure=0)
    first, *rest = load_records(log)
    config = hand_written_config(conv.workload, conv.target)
    assert config is not None and first.ok and first.program == {"space": "template", **config.to_json()}
    assert [(r.program or {}).get("space") for r in rest] == ["template", "template"]
    # 3 input channels: the template has no such point; the hand-written schedule is measured as
    # itself, and the knob model, which cannot read it, learns from the two after it
    conv3 = asc.Task("conv2d_nchw", (1, 3, 6, 6, 4, 3, 3, 1, 1), target="c -num-threads=1")
    log = tmp_path / "conv3.jsonl"
    asc.tune(conv3, trials=3, log=log, tuner="sa", space="template", seed=0, option=FAST, remeasure=0)
    spaces = [(r.program or {}).get("space") for r in load_records(log)]
    assert spaces == ["default", "template", "template"]


@pytest.mark.parametrize("search_only", [False, True])
def test_the_command_line_measures_the_default_unless_search_only(tmp_path: Path, search_only: bool) -> None:
    log = tmp_path / "mm.jsonl"
    flags = ["--search-only"] if search_only else []
    argv = ["tune", "matmul", "24", "16", "8", "--trials", "2", "--log", str(log), "--tuner", "random",
            "--remeasure", "0", "--repeat", "1", "--min-repeat-ms", "1", "--quiet", *flags]
    assert main(argv) == 0
    spaces = [(r.program or {}).get("space") for r in load_records(log)]
    assert spaces == (["sketch", "sketch"] if search_only else ["default", "sketch"])


def test_the_hand_written_point_of_a_template_is_measured_again_at_the_end(tmp_path: Path) -> None:
    """In a template space the hand-written schedule is logged as the template's point, not as
    ``"space": "default"``; the final re-measurement still takes it with the fastest programs, so
    the declared best is compared with it under the same conditions."""
    conv = asc.Task("conv2d_nchw", (1, 4, 6, 6, 4, 3, 3, 1, 1), target="c -num-threads=1")
    space = asc.search.make_space(conv, "template")
    hand = space.default_candidate()
    assert hand is not None
    others = [space.sample(random.Random(seed)) for seed in range(3)]
    measured = [(hand, 3.0), *((c, 1.0 + i) for i, c in enumerate(others))]
    assert hand not in [c for c, _ in _top(measured, 2)]  # not among the fastest two
    assert [c for c, _ in _top(measured, 2, hand.key)][-1] == hand  # but measured with them
    log = tmp_path / "conv.jsonl"
    asc.tune(conv, trials=6, log=log, tuner="random", space="template", seed=1, option=FAST, remeasure=1)
    again = [r.program["index"] for r in load_records(log) if is_remeasurement(r)]
    assert hand.program["index"] in again and 1 <= len(again) <= 2


def test_the_default_is_re_measured_as_the_baseline(tmp_path: Path) -> None:
    """The default schedule's re-measurement is marked as the baseline; the declared best is the
    best of the log as ``load_best`` reads it (the margin applied alike)."""
    task = asc.Task("matmul", (64, 48, 40), target="c -num-threads=1")
    log = tmp_path / "mm.jsonl"
    result = asc.tune(task, trials=6, log=log, tuner="random", seed=0, option=FAST, remeasure=2,
                      measure_default=True)
    again = [r for r in load_records(log) if is_remeasurement(r)]
    (base,) = [r for r in again if is_baseline(r)]
    assert base.program["space"] == "default"
    assert steps_key(result.best_steps) == best_record(log, task).program_key
