"""The measurement worker: a fresh interpreter that loads, checks and times kernels for LocalRunner.

It is started by :class:`~autosched.runner.process.WorkerProcess` and knows no workloads: the
parent sends arrays, library paths and argument specs over a socket. The
protocol (each message a tuple, the first item its kind):

- parent ``("data", key, inputs, expected)``: the random inputs of a task and the reference outputs
  (``expected`` is None when checking is off); kept for the last few keys, no answer.
- parent ``("run", key, lib_path, func_name, arg_specs, option)``: measure one candidate (``lib_path``
  a C library, or a GPU program's ``.json``, compiled by the device's driver as it loads). Answer
  ``("ok", costs)``, ``("error", error_no, message)``, or ``("missing",)`` when the worker does
  not hold the data of ``key`` (the parent sends it and asks again).
- parent ``("calibration", lib_path)``: load the calibration kernel's library
  (:mod:`autosched.runner.calibration`) and keep it. Answer ``("ok",)`` or ``("error", error_no,
  message)``.
- parent ``("calibrate",)``: time the calibration kernel now. Answer ``("ok", seconds)``, or an
  error when none is loaded.
- parent ``("rounds", [(key, lib_path, func_name, arg_specs), ...], option, rounds)``: load and check
  each program once, then ``rounds`` rounds, each timing the calibration kernel (if loaded) and then
  every program once (``option.repeat`` repeats), A B C A B C ...; the calibration kernel once more
  after the last round. Answer ``("ok", outcomes, calibrations)``: per program ``("ok", costs)``
  (its repeats of every round, in round order) or ``("error", error_no, message)``; the
  calibration figures (``rounds + 1`` of them, or none). ``("missing", key)`` when the worker does
  not hold the data of ``key``.
- parent ``("stop",)`` or a closed pipe: the worker exits.

The worker answers ``("ready",)`` once it has started.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from ..dtypes import numpy_dtype
from ..expr import static_shape
from .aligned import aligned_array, aligned_empty
from .calibration import Calibrator
from .compile import CompileError
from .gpu_load import is_gpu_program, load_program
from .gpu_program import DeviceError, GpuCallable
from .kernel import ArgSpec, Kernel
from .load import LoadError, load_kernel
from .measure import MeasureErrorNo, MeasureOption

#: task data sets a worker keeps (the parent re-sends one that was dropped)
KEEP_TASKS = 4

#: relative tolerance per float dtype; the absolute one is this times max(1, max |expected|)
RTOL = {"bfloat16": 2e-2, "float16": 1e-2, "float32": 1e-3, "float64": 1e-9}


def fresh_output(spec: ArgSpec) -> np.ndarray:
    """An output array (64-byte aligned) filled so that elements a kernel never writes are caught:
    NaN for floats, the smallest value for integers, the byte 0x4D for booleans."""
    dt = numpy_dtype(spec.dtype)
    out = aligned_empty(static_shape(spec.shape), dt)
    if dt.kind == "f" or spec.dtype == "bfloat16":
        out.fill(np.nan)
    elif dt.kind == "b":
        out.view(np.uint8).fill(0x4D)
    else:
        out.fill(np.iinfo(dt).min)
    return out


def compare(name: str, got: np.ndarray, want: np.ndarray) -> str | None:
    """None if output ``name`` matches the reference, else a one-line description of the error."""
    want = np.asarray(want)
    if got.shape != want.shape:
        return f"output {name}: shape {got.shape}, reference shape {want.shape}"
    rtol = RTOL.get(str(got.dtype), 1e-3)
    if str(got.dtype) == "bfloat16":  # ml_dtypes' type: compared as the float32 values it holds
        got, want = got.astype(np.float32), want.astype(np.float32)
    if got.dtype.kind == "f":
        scale = max(1.0, float(np.abs(want[np.isfinite(want)]).max(initial=0.0)))
        bad = ~np.isclose(got, want, rtol=rtol, atol=rtol * scale, equal_nan=True)
    elif got.dtype.kind == "b":  # compare bytes: a never-written 0x4D is neither True nor False
        bad = got.view(np.uint8) != want.astype(bool).view(np.uint8)
    else:
        bad = got != want
    if not bad.any():
        return None
    count = f"{int(bad.sum())} of {bad.size} elements differ"
    nan = bad & np.isnan(got) if got.dtype.kind == "f" else np.zeros_like(bad)
    if nan.any():
        first = tuple(int(i) for i in np.argwhere(nan)[0])
        return f"output {name}: {count}, {int(nan.sum())} are NaN (never written?), first at {first}"
    err = np.where(bad, np.abs(got.astype(np.float64) - want.astype(np.float64)), -1.0)
    where = np.unravel_index(int(np.argmax(err)), err.shape)
    at = tuple(int(i) for i in where)
    values = f"got {got[where]}, expected {want[where]}"
    return f"output {name}: {count}; max abs error {err[where]:.3g} at {at} ({values})"


Loaded = tuple[Any, list[np.ndarray]]  # a kernel (C or GPU) and its arrays, checked


class Failed(Exception):
    """A kernel that cannot be measured; ``answer`` is the error answer to send."""

    def __init__(self, error_no: MeasureErrorNo, message: str) -> None:
        super().__init__(message)
        self.answer = ("error", error_no, message)


def prepare(
    data: tuple[list[np.ndarray], list[np.ndarray] | None],
    lib_path: str,
    func_name: str,
    specs: Sequence[ArgSpec],
    option: MeasureOption,
) -> Loaded:
    """Load one kernel, run it once and check its outputs: (kernel, arrays); :class:`Failed` if it
    does not load, fails or computes a wrong answer."""
    inputs, expected = data
    kernel: Kernel | GpuCallable
    try:
        if is_gpu_program(lib_path):
            kernel = load_program(lib_path, specs)
        else:
            kernel = load_kernel(lib_path, func_name, specs)
    except LoadError as e:
        raise Failed(MeasureErrorNo.RUNTIME_ERROR, f"cannot load the kernel: {e}") from None
    except CompileError as e:  # a GPU program is compiled by the device's driver as it loads
        raise Failed(MeasureErrorNo.COMPILE_ERROR, str(e)) from None
    work = iter([aligned_array(a) for a in inputs])  # as a network's arrays are
    arrays = [fresh_output(s) if s.is_output else next(work) for s in specs]
    try:
        kernel(*arrays)
    except (MemoryError, DeviceError) as e:
        raise Failed(MeasureErrorNo.RUNTIME_ERROR, str(e)) from None
    if option.check and expected is not None:
        problem = _check(specs, arrays, inputs, expected)
        if problem is not None:
            raise Failed(MeasureErrorNo.WRONG_ANSWER, problem)
    return kernel, arrays


def timed(loaded: Loaded, option: MeasureOption) -> tuple[Any, ...]:
    """Time a prepared kernel with ``option``: ``("ok", costs)`` or the error answer."""
    kernel, arrays = loaded
    try:
        costs = kernel.bench(
            *arrays,
            number=option.number,
            repeat=option.repeat,
            min_repeat_ms=option.min_repeat_ms,
            flush_cache=option.flush_cache,
            cooldown_ms=option.cooldown_ms,
        )
    except (MemoryError, DeviceError) as e:
        return ("error", MeasureErrorNo.RUNTIME_ERROR, str(e))
    return ("ok", tuple(costs))


def measure(
    data: tuple[list[np.ndarray], list[np.ndarray] | None],
    lib_path: str,
    func_name: str,
    specs: Sequence[ArgSpec],
    option: MeasureOption,
) -> tuple[Any, ...]:
    """Load, run once and check, then time one kernel; the answer to a ``run`` message."""
    try:
        loaded = prepare(data, lib_path, func_name, specs, option)
    except Failed as e:
        return e.answer
    return timed(loaded, option)


def rounds(
    programs: Sequence[tuple[tuple[list[np.ndarray], list[np.ndarray] | None], str, str, Sequence[ArgSpec]]],
    option: MeasureOption,
    count: int,
    calibrator: Calibrator | None,
) -> tuple[Any, ...]:
    """The answer to a ``rounds`` message: ``programs`` as (data, lib_path, func_name, specs)."""
    outcomes: list[tuple[Any, ...]] = []
    loaded: dict[int, Loaded] = {}
    for i, (data, lib_path, func_name, specs) in enumerate(programs):
        try:
            loaded[i] = prepare(data, lib_path, func_name, specs, option)
            outcomes.append(("ok", ()))
        except Failed as e:
            outcomes.append(e.answer)
    figures = []
    for _ in range(count):
        if calibrator is not None:
            figures.append(calibrator())
        for i in list(loaded):  # A B C A B C ...: each program once per round
            answer = timed(loaded[i], option)
            if answer[0] == "ok":
                outcomes[i] = ("ok", outcomes[i][1] + answer[1])
            else:
                outcomes[i] = answer
                del loaded[i]
    if calibrator is not None:
        figures.append(calibrator())
    return ("ok", outcomes, figures)


def _check(
    specs: Sequence[ArgSpec], arrays: list[np.ndarray], inputs: list[np.ndarray], expected: list[np.ndarray]
) -> str | None:
    """The first problem with the outputs of the first run (or an input it wrote to), or None."""
    outs = [(s, a) for s, a in zip(specs, arrays, strict=True) if s.is_output]
    ins = [(s, a) for s, a in zip(specs, arrays, strict=True) if not s.is_output]
    if len(outs) != len(expected):
        return f"the kernel has {len(outs)} outputs, the reference {len(expected)}"
    for (spec, now), before in zip(ins, inputs, strict=True):
        if not np.array_equal(now, before, equal_nan=now.dtype.kind == "f"):
            return f"the kernel wrote to its input {spec.name}"
    for (spec, got), want in zip(outs, expected, strict=True):
        problem = compare(spec.name, got, want)
        if problem is not None:
            return problem
    return None


def serve(conn: Connection) -> None:
    """The worker's main loop."""
    held: OrderedDict[str, tuple[list[np.ndarray], list[np.ndarray] | None]] = OrderedDict()
    calibrator: Calibrator | None = None
    conn.send(("ready",))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        kind = message[0]
        if kind == "stop":
            return
        if kind == "data":
            _, key, inputs, expected = message
            held[key] = (inputs, expected)
            held.move_to_end(key)
            while len(held) > KEEP_TASKS:
                held.popitem(last=False)
            continue
        if kind in ("calibration", "calibrate", "rounds"):
            calibrator, answer = _calibration(message, calibrator, held)
            conn.send(answer)
            continue
        _, key, lib_path, func_name, specs, option = message
        if key not in held:
            conn.send(("missing",))
            continue
        held.move_to_end(key)
        try:
            answer = measure(held[key], lib_path, func_name, specs, option)
        except Exception as e:  # a bug or a surprise: this candidate fails, the worker goes on
            answer = ("error", MeasureErrorNo.UNKNOWN_ERROR, f"{type(e).__name__}: {e}")
        conn.send(answer)


def _calibration(
    message: tuple[Any, ...], calibrator: Calibrator | None, held: OrderedDict[str, Any]
) -> tuple[Calibrator | None, tuple[Any, ...]]:
    """Serve a ``calibration``, ``calibrate`` or ``rounds`` message: the calibrator kept after it and
    the answer."""
    kind = message[0]
    try:
        if kind == "calibration":
            return Calibrator(message[1]), ("ok",)
        if kind == "calibrate":
            if calibrator is None:
                return None, ("error", MeasureErrorNo.UNKNOWN_ERROR, "no calibration kernel loaded")
            return calibrator, ("ok", calibrator())
        _, items, option, count = message
        missing = next((key for key, *_ in items if key not in held), None)
        if missing is not None:
            return calibrator, ("missing", missing)
        programs = [(held[key], lib_path, func_name, specs) for key, lib_path, func_name, specs in items]
        return calibrator, rounds(programs, option, count, calibrator)
    except Exception as e:  # a bug or a surprise: this request fails, the worker goes on
        return calibrator, ("error", MeasureErrorNo.UNKNOWN_ERROR, f"{type(e).__name__}: {e}")
