"""A helper process of :mod:`.feature_workers`: lowers and describes programs sent by a tuning run.

Started by :class:`~autosched.runner.process.WorkerProcess` (a fresh interpreter that never runs
the caller's main module) and fed over a socket, each message a tuple, the first item its kind:

- parent ``("features", modules, (workload name, args, target), steps_list)``: import ``modules``
  (where the workload is registered), make the task (once) and answer ``("done", arrays)``, the
  features of each program (:func:`~.features.describe`);
- parent ``("sketch", modules, task, points)`` with (sketch index, annotation JSON) points of the
  task's sketch space: answer ``("done", [(steps, array) or None])``, None for a point that is no
  program (the parent finds out why);
- either may be answered ``("error", message)`` (the parent then does the batch itself);
  ``("stop",)`` or a closed socket ends the helper.

The helper keeps no lowered programs between messages: the parent lowers again the few it builds.
"""

from __future__ import annotations

import functools
import importlib
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from ..runner.measure import MeasureInput
from ..schedule import ScheduleError
from ..schedule.steps import Step
from ..space.annotate import Annotation
from ..space.generated import SketchProgram, SketchSpace
from ..space.gpu_space import sketch_space
from ..task import LOWERING_CACHE, Task
from .features import describe

__all__ = ["serve"]


@functools.lru_cache(maxsize=8)
def _task(name: str, args: tuple[Any, ...], target: str) -> Task:
    """A task, made once (its tensors are built on first use and kept)."""
    return Task(name, args, target=target)


@functools.lru_cache(maxsize=8)
def _sketch_space(task: Task) -> SketchSpace:
    return sketch_space(task.workload, task.target)


def _features(task: Task, steps: tuple[Step, ...]) -> np.ndarray:
    return describe(MeasureInput(task, steps))


def _sketch_program(
    task: Task, sketch: int, annotation: dict[str, Any]
) -> tuple[tuple[Step, ...], np.ndarray] | None:
    """A sketch point's steps and features; None if it is no program."""
    try:
        steps = _sketch_space(task).steps(SketchProgram(sketch, Annotation.from_json(annotation)))
    except (ScheduleError, ValueError):
        return None
    return steps, _features(task, steps)


def serve(conn: Connection) -> None:
    """The helper's loop (see the module doc)."""
    conn.send(("ready",))
    while True:
        try:
            message: Any = conn.recv()
        except (EOFError, OSError):
            return
        if message[0] not in ("features", "sketch"):
            return
        kind, modules, spec, items = message
        try:
            for module in modules:
                importlib.import_module(module)
            task = _task(*spec)
            if kind == "features":
                answer: tuple[str, Any] = ("done", [_features(task, s) for s in items])
            else:
                answer = ("done", [_sketch_program(task, *point) for point in items])
        except Exception as e:  # noqa: BLE001 - reported to the parent, which does the batch
            answer = ("error", f"{type(e).__name__}: {e}")
        finally:
            LOWERING_CACHE.clear()
        try:
            conn.send(answer)
        except OSError:
            return
