"""Features of large batches described by helper processes (autosched.model.feature_workers)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.model import feature_workers
from autosched.model.features import FEATURE_CACHE, describe, extract_features
from autosched.runner.measure import MeasureInput
from autosched.search.tuning_space import make_space
from autosched.task import LOWERING_CACHE, Task


@pytest.fixture
def helpers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Inside a session of two helper processes, with a fresh feature cache; no helper after."""
    monkeypatch.setenv("AUTOSCHED_FEATURE_WORKERS", "2")
    FEATURE_CACHE.clear()
    with feature_workers.session():
        yield
    assert feature_workers._POOL is None
    FEATURE_CACHE.clear()


def programs(task: Task, n: int, seed: int = 0) -> list[MeasureInput]:
    space, rng = make_space(task, "sketch"), random.Random(seed)
    return [MeasureInput(task, space.sample(rng).steps) for _ in range(n)]


def test_helpers_describe_a_batch_bit_for_bit_as_this_process_would(helpers: None) -> None:
    task = Task("conv2d_nchw", (1, 8, 9, 9, 16, 3, 3, 1, 1))
    progs = programs(task, 2 * feature_workers.MIN_BATCH)
    LOWERING_CACHE.clear()
    got = extract_features(progs)
    pool = feature_workers._POOL
    assert pool is not None and len(pool.helpers) == 2 and all(h.alive() for h in pool.helpers)
    # the helpers lowered them: this process did not
    assert not any(LOWERING_CACHE.has((*task.key, tuple(p.steps), "default_function")) for p in progs)
    for p, feats in zip(progs, got, strict=True):
        want = describe(p)
        assert feats.dtype == want.dtype and feats.shape == want.shape
        assert feats.tobytes() == want.tobytes()
        assert not feats.flags.writeable


def test_small_batches_stay_in_this_process(helpers: None) -> None:
    progs = programs(Task("matmul", (16, 16, 16)), feature_workers.MIN_BATCH - 1)
    extract_features(progs)
    assert feature_workers._POOL is None  # no helper was started


def test_no_helpers_when_the_environment_says_zero(helpers: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOSCHED_FEATURE_WORKERS", "0")
    assert feature_workers.workers() == 0
    progs = programs(Task("matmul", (16, 16, 16)), 2 * feature_workers.MIN_BATCH)
    assert len(extract_features(progs)) == len(progs)
    assert feature_workers._POOL is not None and not feature_workers._POOL.helpers
    monkeypatch.setenv("AUTOSCHED_FEATURE_WORKERS", "many")
    with pytest.warns(asc.AutoschedWarning, match="AUTOSCHED_FEATURE_WORKERS='many' is not a number"):
        assert feature_workers.workers() == 0
    monkeypatch.delenv("AUTOSCHED_FEATURE_WORKERS")
    assert feature_workers.workers() == 0  # none unless asked for
    monkeypatch.setenv("AUTOSCHED_FEATURE_WORKERS", "64")
    assert feature_workers.workers() == feature_workers.MAX_WORKERS


def test_a_helper_that_dies_costs_a_warning_not_the_features(helpers: None) -> None:
    task = Task("matmul", (24, 20, 16))
    first, second = programs(task, 64, seed=1)[:32], programs(task, 64, seed=2)[32:]
    extract_features(first)
    pool = feature_workers._POOL
    assert pool is not None and pool.helpers
    pool.helpers[0].proc.kill()
    pool.helpers[0].proc.wait()
    with pytest.warns(asc.AutoschedWarning, match="feature helper processes stopped"):
        got = extract_features(second)
    for p, feats in zip(second, got, strict=True):
        assert np.array_equal(feats, describe(p))
    assert pool.broken and not pool.helpers
    extract_features(programs(task, 64, seed=3))  # no helpers again, no second warning


def test_a_flat_script_with_its_own_workload_runs_once_and_gets_its_features(tmp_path: Path) -> None:
    """Helpers never re-run the caller's script; a workload registered in ``__main__`` (which
    they cannot import) is described in the caller's process."""
    script = tmp_path / "flat.py"
    script.write_text(textwrap.dedent("""
        import random
        import autosched as asc
        from autosched.model import feature_workers
        from autosched.model.features import describe, extract_features
        from autosched.runner.measure import MeasureInput
        from autosched.search.tuning_space import make_space
        print("script ran")

        @asc.workload("scaled_matmul")
        def scaled_matmul(n):
            a = asc.placeholder((n, n), name="A")
            b = asc.placeholder((n, n), name="B")
            k = asc.reduce_axis((0, n), name="k")
            c = asc.compute((n, n), lambda i, j: asc.sum(2.0 * a[i, k] * b[k, j], axis=k), name="C")
            return [a, b, c]

        def batch(task, n):
            space, rng = make_space(task, "sketch"), random.Random(0)
            return [MeasureInput(task, space.sample(rng).steps) for _ in range(n)]

        def same(progs):
            return all((f == describe(p)).all() for p, f in zip(progs, extract_features(progs)))

        def helpers():
            return len(feature_workers._POOL.helpers) if feature_workers._POOL else 0

        with feature_workers.session():
            assert same(batch(asc.Task("scaled_matmul", (32,)), 40))
            print("helpers after the script's workload:", helpers())
            assert same(batch(asc.Task("matmul", (32, 32, 32)), 40))
            print("helpers after a built-in workload:", helpers())
        print("helpers after the session:", helpers())
    """))
    env = {**os.environ, "AUTOSCHED_FEATURE_WORKERS": "2"}
    out = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("script ran") == 1
    assert "helpers after the script's workload: 0" in out.stdout
    assert "helpers after a built-in workload: 2" in out.stdout
    assert "helpers after the session: 0" in out.stdout


def test_outside_a_tuning_run_every_program_is_described_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOSCHED_FEATURE_WORKERS", "2")
    progs = programs(Task("matmul", (16, 16, 8)), 2 * feature_workers.MIN_BATCH)
    assert len(extract_features(progs)) == len(progs)
    assert feature_workers._POOL is None


@pytest.mark.requires("gcc")
def test_a_guided_tuning_run_uses_helpers_and_leaves_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOSCHED_FEATURE_WORKERS", "2")
    seen: list[int] = []

    def count(*_: object) -> None:
        pool = feature_workers._POOL
        seen.append(sum(h.alive() for h in pool.helpers) if pool is not None else 0)

    task = Task("matmul", (24, 24, 24))
    option = asc.MeasureOption(repeat=1, min_repeat_ms=1)
    asc.tune(task, trials=24, log=tmp_path / "mm.jsonl", tuner="evolutionary", seed=0, option=option,
             callbacks=[count])
    assert 2 in seen  # the evolutionary search's populations went to two helpers
    assert feature_workers._POOL is None  # stopped when the run ended


def test_helpers_make_the_evolutionary_children_as_this_process_would(
    helpers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = Task("conv2d_nchw", (1, 8, 9, 9, 16, 3, 3, 1, 1))
    space, rng = make_space(task, "sketch"), random.Random(3)
    points = [space.mutate_point(space.sample_point(rng), rng) for _ in range(2 * feature_workers.MIN_BATCH)]
    want = [space.candidates([p])[0] for p in points]  # one at a time: made here
    FEATURE_CACHE.clear()
    made_here = []
    steps = type(space.space).steps
    monkeypatch.setattr(type(space.space), "steps", lambda self, p: made_here.append(p) or steps(self, p))
    got = space.candidates(points)
    assert not made_here  # every one made by a helper
    for g, w in zip(got, want, strict=True):
        assert g is not None and w is not None
        assert g.steps == w.steps and g.key == w.key and g.program == w.program
        assert FEATURE_CACHE.has((*task.key, g.steps))  # described by the helper on the way
        feats = extract_features([MeasureInput(task, g.steps)])[0]
        assert feats.tobytes() == describe(MeasureInput(task, w.steps)).tobytes()
