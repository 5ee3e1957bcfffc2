"""Tuning records made up for the tests of reports and logs: a matmul and a conv workload, a
record of a numbered program, a log written from records."""

from __future__ import annotations

from pathlib import Path

from autosched.ops import Workload
from autosched.ops.registry import registered
from autosched.records import Record
from autosched.runner.measure import MeasureErrorNo
from autosched.schedule.steps import SplitStep

MATMUL = ("matmul", (16, 16, 16, "float32", False))
CONV = ("conv2d_nchw", (1, 3, 8, 8, 4, 3, 3, 1, 1, 1, "float32"))
TARGET = "c -cc=gcc -num-threads=1"


def rec(
    workload: tuple[str, tuple[object, ...]],
    costs: tuple[float, ...] = (),
    error: MeasureErrorNo = MeasureErrorNo.NO_ERROR,
    t: float = 0.0,
    target: str = TARGET,
    program: int = 0,
) -> Record:
    """A record of program number ``program`` (0: the default program, no steps; n: output C's
    axis i split by 2**n); a failed trial has an ``error`` and no costs. Its key is the workload's
    own (a log's records are checked to have it); made up if the workload is not registered."""
    name, args = workload
    key = Workload(name, args).key if registered(name) else f"{name}({','.join(map(repr, args))})#abc"
    return Record(
        workload=workload,
        workload_key=key,
        target=target,
        compiler="gcc",
        steps=(SplitStep("C", "i", 2**program, None),) if program else (),
        costs=costs,
        error_no=error,
        error_msg="",
        all_cost=0.5,
        timestamp=1.8e9 + t,
        version="0.1.0",
    )


def write_log(path: Path, records: list[Record]) -> Path:
    path.write_text("".join(r.to_line() for r in records))
    return path
