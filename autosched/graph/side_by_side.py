"""A network next to onnxruntime: the same model, inputs and cores; its outputs checked, both timed.

    session = ort_session("model.onnx", threads=2)          # spinning off, one inter-op thread
    ref = session.run(None, ort_feeds(session, graph, inputs))
    error = max_relative_error(ours, ref)                   # max |ours - ref| / max |ref|, worst output
    times = interleaved({"autosched": f, "onnxruntime": g}, rounds=5)

The two runtimes share the machine's cores while they are timed, so neither may keep them busy
when it is not running: onnxruntime's workers would otherwise spin after each run
(``session.intra_op.allow_spinning``), and the OpenMP workers of the kernels spin briefly after
each parallel loop; a pause of :data:`SETTLE` seconds before each side lets the other's go idle.
Each round times every side once, the order reversed every other round (so neither always runs
after the other), and a side's time is its median over rounds.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .ir import Graph, GraphError

#: idle seconds before timing a side: the other side's workers stop spinning and go to sleep
SETTLE = 0.3

#: seconds each side runs per round (at least one call)
ROUND_SECONDS = 0.2

#: numpy type of each onnxruntime input type autosched can feed
ORT_TYPES = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(int64)": np.int64,
             "tensor(int32)": np.int32}


def ort_session(model: str | os.PathLike[str], threads: int) -> Any:
    """An onnxruntime session of ``model`` on ``threads`` intra-op threads (the caller's counted),
    one inter-op thread, its workers not spinning between runs."""
    try:
        import onnxruntime as ort
    except ImportError as err:
        raise ImportError("comparing against onnxruntime needs it: pip install onnxruntime "
                          "(or --against none)") from err
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return ort.InferenceSession(os.fspath(model), options, providers=["CPUExecutionProvider"])


def ort_feeds(session: Any, graph: Graph, inputs: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """The graph's ``inputs`` as the session's feeds: by name, in the types the model declares."""
    declared = {i.name: i.type for i in session.get_inputs()}
    feeds = {}
    for name, value in zip(graph.inputs, inputs, strict=True):
        if name not in declared:
            raise GraphError(f"onnxruntime's session of {graph.name!r} has no input {name!r} "
                             f"(its inputs: {sorted(declared)})")
        kind = ORT_TYPES.get(declared[name])
        if kind is None:
            raise GraphError(f"input {name!r} of {graph.name!r} is a {declared[name]}: autosched feeds "
                             f"only {', '.join(ORT_TYPES)}")
        feeds[name] = np.ascontiguousarray(value, dtype=kind)
    return feeds


@dataclass(frozen=True, slots=True)
class Error:
    """How far outputs are from their references: the output where max |error| / max |reference|
    is worst (``relative``; NaN where an output holds NaN the reference does not, infinity where
    the reference is all zeros and the output is not), with both maxima."""

    output: int
    max_error: float
    max_reference: float
    relative: float


def max_relative_error(outputs: Sequence[np.ndarray], references: Sequence[np.ndarray]) -> Error:
    """The worst output's error relative to its reference's magnitude (see :class:`Error`)."""
    if len(outputs) != len(references):
        raise GraphError(f"{len(outputs)} outputs against {len(references)} references")
    errors = []
    for i, (out, ref) in enumerate(zip(outputs, references, strict=True)):
        got, want = np.asarray(out, np.float64), np.asarray(ref, np.float64)
        if got.size != want.size:
            raise GraphError(f"output {i} has shape {got.shape}, its reference {want.shape}")
        diff = np.abs(got.reshape(want.shape) - want)
        err = float(np.nan if np.isnan(diff).any() else diff.max(initial=0.0))
        mag = float(np.nanmax(np.abs(want), initial=0.0))
        rel = err / mag if mag > 0 else (0.0 if err == 0 else (np.nan if np.isnan(err) else np.inf))
        errors.append(Error(i, err, mag, rel))
    if not errors:
        raise GraphError("no outputs to compare")
    return max(errors, key=lambda e: (math.isnan(e.relative), 0.0 if math.isnan(e.relative) else e.relative))


def _seconds_per_call(fn: Callable[[], object], seconds: float) -> float:
    """Seconds per call of ``fn`` over at least ``seconds`` (at least one call)."""
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return elapsed / calls


def interleaved(sides: Mapping[str, Callable[[], object]], rounds: int, seconds: float = ROUND_SECONDS,
                settle: float = SETTLE) -> dict[str, float]:
    """Median seconds per call of each side over ``rounds`` rounds; in each, every side runs for
    ``seconds`` after ``settle`` idle seconds, the order reversed every other round. Each side is
    called once untimed first (first-run allocations)."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    for fn in sides.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in sides}
    names = list(sides)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            time.sleep(settle)
            times[name].append(_seconds_per_call(sides[name], seconds))
    return {name: statistics.median(t) for name, t in times.items()}
