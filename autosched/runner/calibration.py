"""The calibration kernel: a fixed program timed next to the candidates, so a measurement says how
fast the machine was when it was made.

Shared machines drift: the same kernel re-timed minutes apart varies by 10-30% (other tenants, a
hypervisor's steal time, frequency changes). A measurement alone cannot tell a slow program from a
slow minute. So the measurement worker also times one fixed kernel, a float32 matmul (128 x 128 x
128, computed :data:`REPS` times, the loops in i-k-j order so that the compiler vectorizes the
inner one), compiled for the
candidates' target (same compiler, flags and OpenMP threads, so it runs on the same threads) and
built once per session (the kernel cache keeps the library). Its time per call is the machine's
speed factor: the run's median calibration is the normal speed; a measurement whose calibration is
much slower was made in a slow minute (:mod:`autosched.runner.drift`).

The figure is one window of :data:`WINDOW_MS` (a fixed number of calls, chosen at the first
calibration), after one untimed call: long enough to span many scheduler slices, so time the
process spent waiting for a core shows, and short against a candidate's measurement.
"""

from __future__ import annotations

import math

import numpy as np

from ..emit_c import HEADER, timing_entries
from ..target import Target
from .compile import compile_shared
from .kernel import ArgSpec, Kernel
from .load import load_kernel

__all__ = ["CALIBRATION_NAME", "CALIBRATION_SPECS", "Calibrator", "calibration_library", "calibration_source"]

#: the calibration kernel's C name
CALIBRATION_NAME = "asc_calibration"
#: its matrices' side
SIDE = 128
#: times each thread computes its rows of the product in one call: about 1 ms of work a call, in
#: one parallel region (a region per 0.1 ms would make the kernel wait at a barrier for every
#: descheduled thread ten times as often as candidates of a millisecond or more do)
REPS = 8
#: its arguments: C = A x B, float32, SIDE x SIDE each
CALIBRATION_SPECS = (
    ArgSpec("A", (SIDE, SIDE), "float32"),
    ArgSpec("B", (SIDE, SIDE), "float32"),
    ArgSpec("C", (SIDE, SIDE), "float32", is_output=True),
)
#: the length of one calibration window, milliseconds
WINDOW_MS = 8.0
#: the most calls in one window
MAX_NUMBER = 1 << 20

_BODY = """\
int {name}(float* restrict A, float* restrict B, float* restrict C) {{
{pragma}  for (int i = 0; i < {n}; ++i) {{
    float* restrict c = C + i * {n};
    for (int rep = 0; rep < {reps}; ++rep) {{
      for (int j = 0; j < {n}; ++j) c[j] = 0.0f;
      for (int k = 0; k < {n}; ++k) {{
        const float a = A[i * {n} + k];
        const float* restrict b = B + k * {n};
        for (int j = 0; j < {n}; ++j) c[j] += a * b[j];
      }}
    }}
  }}
  return 0;
}}"""


def calibration_source(target: Target) -> str:
    """The calibration kernel's C source for ``target`` (its threads), with the timing harness."""
    threads = target.num_threads or 1
    pragma = f"  #pragma omp parallel for num_threads({threads})\n" if threads > 1 else ""
    params = [("float", "A"), ("float", "B"), ("float", "C")]
    body = _BODY.format(name=CALIBRATION_NAME, n=SIDE, reps=REPS, pragma=pragma)
    return "\n\n".join(["/* autosched: calibration kernel */", HEADER, body,
                        timing_entries(CALIBRATION_NAME, params, threads)]) + "\n"


def calibration_library(target: Target) -> str:
    """The path of the calibration kernel's library for ``target`` (compiled once, then taken
    from the kernel cache). Raises the :class:`~autosched.runner.compile.BuildError` of a failed
    build."""
    return str(compile_shared(calibration_source(target), target))


class Calibrator:
    """The calibration kernel loaded in the measuring process: :meth:`__call__` times one window
    and returns seconds per call."""

    def __init__(self, lib_path: str) -> None:
        self.kernel: Kernel = load_kernel(lib_path, CALIBRATION_NAME, CALIBRATION_SPECS)
        rng = np.random.default_rng(0)
        a = rng.standard_normal((SIDE, SIDE), dtype=np.float32)
        b = rng.standard_normal((SIDE, SIDE), dtype=np.float32)
        self.arrays = (a, b, np.zeros((SIDE, SIDE), np.float32))
        self.number = 1  # calls per window: set after each window for the speed it saw

    def __call__(self) -> float:
        """Seconds per call of the calibration kernel now: one window of at least half of
        :data:`WINDOW_MS`, after one untimed call."""
        kernel, arrays = self.kernel, self.arrays
        kernel(*arrays)
        window = WINDOW_MS / 1e3
        while True:
            seconds = kernel.time(*arrays, number=self.number, repeat=1)[0]
            done = seconds * self.number >= window / 2 or self.number == MAX_NUMBER
            wanted = math.ceil(window / max(seconds, 1e-9))  # the calls of one window at this speed
            self.number = max(1, min(wanted, 10 * self.number, MAX_NUMBER))
            if done:
                return seconds
