"""The test helpers of ``repro``: seeds equal in every process, failures that name seed and steps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from repro import describe, reproducible, stable_seed

import autosched as asc
from autosched.schedule.steps import AnnotateStep, SplitStep

PARTS = ("matmul", (37, 29, 23))
PRINT_SEEDS = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parents[1])!r})
from repro import stable_seed
print(stable_seed(*{PARTS!r}), hash({PARTS!r}))
"""


def _in_process_with_hash_seed(hash_seed: str) -> tuple[int, int]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    out = subprocess.run([sys.executable, "-c", PRINT_SEEDS], env=env, capture_output=True, text=True,
                         timeout=120, check=True)
    seed, salted = out.stdout.split()
    return int(seed), int(salted)


def test_stable_seed_is_the_same_in_processes_with_different_hash_seeds() -> None:
    (seed1, hash1), (seed2, hash2) = _in_process_with_hash_seed("1"), _in_process_with_hash_seed("2")
    assert hash1 != hash2  # the two processes really salt hash() differently...
    assert seed1 == seed2 == stable_seed(*PARTS)  # ...and the derived seed does not change


def test_stable_seed_tells_its_parts_apart() -> None:
    seeds = {stable_seed("matmul", (37, 29, 23)), stable_seed("matmul", (37, 29, 24)),
             stable_seed("dense", (37, 29, 23)), stable_seed("matmul", (37, 29, 23, "float32", True))}
    assert len(seeds) == 4
    assert all(0 <= s < 2**32 for s in seeds)


def test_a_failure_inside_reproducible_names_the_seed_and_the_steps() -> None:
    steps = (SplitStep("C", "i", 4, None), AnnotateStep("C", "i.inner", "vectorize"))
    with pytest.raises(AssertionError) as info, reproducible(steps, seed=1234, sample=7):
        raise AssertionError("wrong answer")
    (note,) = info.value.__notes__
    assert note == describe(steps, 1234, sample=7)
    assert "seed=1234" in note and "sample=7" in note
    text = note.split("steps=", 1)[1]
    assert asc.steps_from_json(json.loads(text)) == steps  # the note replays
