"""The tuning log: JSON lines, one measurement per line, append-only, resumable.

One line (keys in this order)::

    {"v": 1, "autosched": "0.1.0", "workload": ["matmul", [64, 64, 64, "float32", false]],
     "workload_key": "matmul(64,64,64,'float32',False)#3f2a...", "target": "c -cc=gcc ...",
     "compiler": "gcc (Debian 12.2.0-14) 12.2.0", "steps": [...], "costs": [1.2e-05, ...],
     "error": "NO_ERROR", "error_msg": "", "all_cost": 0.84, "timestamp": 1796000000.0,
     "program": {"space": "sketch", ...}}

``costs`` are seconds per run, every repeat; ``all_cost`` the wall seconds the measurement took
(build and run); ``program`` says which point of which space the steps came from (optional).
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .runner.measure import MeasureErrorNo, MeasureInput, MeasureResult
from .steps import Step, steps_from_json, steps_to_json

FORMAT_VERSION = 1


class RecordError(ValueError):
    """A log line that is not a valid record."""


def steps_key(steps: Sequence[Step]) -> str:
    """A short stable hash identifying a program (its steps)."""
    text = json.dumps(steps_to_json(tuple(steps)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha1(text.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Record:
    """One measurement of one program of one task (one line of the log)."""

    workload: tuple[str, tuple[Any, ...]]  # (name, normalized args)
    workload_key: str
    target: str
    compiler: str
    steps: tuple[Step, ...]
    costs: tuple[float, ...]
    error_no: MeasureErrorNo
    error_msg: str
    all_cost: float
    timestamp: float
    version: str = ""
    program: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        """Whether the measurement is valid (no error, at least one cost)."""
        return self.error_no == MeasureErrorNo.NO_ERROR and bool(self.costs)

    @property
    def median(self) -> float:
        """Median seconds per run; ``inf`` for a failed measurement."""
        return statistics.median(self.costs) if self.ok else float("inf")

    @property
    def program_key(self) -> str:
        """:func:`steps_key` of the steps."""
        return steps_key(self.steps)

    @classmethod
    def from_measure(
        cls, inp: MeasureInput, res: MeasureResult, compiler: str = "", program: dict[str, Any] | None = None
    ) -> Record:
        """The record of measuring ``inp`` with result ``res``."""
        from . import __version__

        wl = inp.task.workload
        return cls(
            workload=(wl.name, tuple(wl.args)),
            workload_key=wl.key,
            target=str(inp.task.target),
            compiler=compiler,
            steps=tuple(inp.steps),
            costs=tuple(float(c) for c in res.costs),
            error_no=MeasureErrorNo(res.error_no),
            error_msg=res.error_msg,
            all_cost=float(res.all_cost),
            timestamp=float(res.timestamp),
            version=__version__,
            program=program,
        )

    def to_json(self) -> dict[str, Any]:
        """The record as one JSON object (the keys of the module docstring, in order)."""
        out: dict[str, Any] = {
            "v": FORMAT_VERSION,
            "autosched": self.version,
            "workload": [self.workload[0], list(self.workload[1])],
            "workload_key": self.workload_key,
            "target": self.target,
            "compiler": self.compiler,
            "steps": steps_to_json(self.steps),
            "costs": list(self.costs),
            "error": self.error_no.name,
            "error_msg": self.error_msg,
            "all_cost": self.all_cost,
            "timestamp": self.timestamp,
        }
        if self.program is not None:
            out["program"] = self.program
        return out

    def to_line(self) -> str:
        """One log line, newline included."""
        return json.dumps(self.to_json(), separators=(",", ":")) + "\n"

    @classmethod
    def from_json(cls, data: Any) -> Record:
        """The record of one decoded log line; :class:`RecordError` if it is not one."""
        if not isinstance(data, dict):
            raise RecordError(f"a record is a JSON object, got {type(data).__name__}")
        version = data.get("v")
        if version != FORMAT_VERSION:
            raise RecordError(
                f"unsupported record format version {version!r} (this reader: {FORMAT_VERSION})"
            )
        try:
            name, args = data["workload"]
            error = data["error"]
            if error not in MeasureErrorNo.__members__:
                raise RecordError(f"unknown error kind {error!r}")
            return cls(
                workload=(str(name), tuple(args)),
                workload_key=str(data["workload_key"]),
                target=str(data["target"]),
                compiler=str(data.get("compiler", "")),
                steps=steps_from_json(data["steps"]),
                costs=tuple(float(c) for c in data["costs"]),
                error_no=MeasureErrorNo[error],
                error_msg=str(data.get("error_msg", "")),
                all_cost=float(data.get("all_cost", 0.0)),
                timestamp=float(data.get("timestamp", 0.0)),
                version=str(data.get("autosched", "")),
                program=data.get("program"),
            )
        except RecordError:
            raise
        except (KeyError, TypeError, ValueError) as err:
            raise RecordError(f"malformed record: {type(err).__name__}: {err}") from None

    @classmethod
    def from_line(cls, line: str) -> Record:
        """The record of one log line."""
        try:
            data = json.loads(line)
        except json.JSONDecodeError as err:
            raise RecordError(f"not JSON: {err}") from None
        return cls.from_json(data)
