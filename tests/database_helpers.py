"""Helpers of the tuning-database tests (test_database.py, test_database_cli.py)."""

from __future__ import annotations

import contextlib
import json
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np

import autosched as asc
from autosched.database import target_slug
from autosched.records import Record, append_records
from autosched.runner.measure import MeasureErrorNo
from autosched.schedule.steps import SplitStep

TARGET = "c -num-threads=1"
OTHER_MACHINE = "x86_64-000000000000"


def check(task: asc.Task, kernel: asc.runner.Kernel) -> None:
    """``kernel`` computes ``task``'s workload (compared with its numpy reference)."""
    inputs = task.workload.random_inputs(1)
    outputs = [np.zeros(t.shape, t.dtype) for t in task.workload.outputs]
    kernel(*inputs, *outputs)
    for got, want in zip(outputs, task.workload.reference(*inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """A context in which any warning fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield



def fake_record(writer: str, i: int) -> Record:
    """A made-up record of a made-up workload, ``writer`` and ``i`` in its program (and its stage
    names), cost ``1e-3 + i * 1e-6``; its steps make lines long enough to span pages."""
    return Record(
        workload=("wl", (1,)),
        workload_key="wl(1)#0",
        target=str(asc.Target.parse(TARGET)),
        compiler="gcc",
        steps=tuple(SplitStep(f"S{writer}", "i", k + 1, None) for k in range(20)),
        costs=(1e-3 + i * 1e-6,),
        error_no=MeasureErrorNo.NO_ERROR,
        error_msg="",
        all_cost=0.1,
        timestamp=time.time(),
        program={"writer": writer, "i": i},
    )


def task_records(task: asc.Task, count: int = 4) -> list[Record]:
    """Made-up valid measurements of ``count`` programs of ``task`` (its output's axis i split by
    1, 2, 3, ...; the naive program first, no steps), program i taking ``1e-5 * (i + 1)`` s."""
    return [
        Record(
            workload=(task.workload.name, tuple(task.workload.args)),
            workload_key=task.workload.key,
            target=str(task.target),
            compiler="gcc",
            steps=(SplitStep(task.workload.outputs[-1].name, "i", i + 1, None),) if i else (),
            costs=(1e-5 * (i + 1),),
            error_no=MeasureErrorNo.NO_ERROR,
            error_msg="",
            all_cost=0.1,
            timestamp=float(i),
        )
        for i in range(count)
    ]


def foreign_db(root: Path, task: asc.Task, records: list[Record]) -> Path:
    """A database at ``root`` holding ``task``'s records (same target string) from another CPU."""
    folder = root / OTHER_MACHINE
    folder.mkdir(parents=True)
    machine = {"fingerprint": OTHER_MACHINE, "kind": "host", "arch": "x86_64", "cpu": "Other CPU",
               "isa": ["avx512f"], "vector_bytes": 64}  # fmt: skip
    (folder / "machine.json").write_text(json.dumps(machine))
    append_records(folder / f"{target_slug(task.target)}.jsonl", records)
    return root
