"""Timers made inside the fresh processes of ``autosched.runner.fresh`` (``Side(factory=...)``): a
TVM module exported to a shared library, and the library references of bench_guided.py. Each
returns a callable giving seconds per call; this module imports TVM only when a TVM side is timed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def tvm_timer(
    inputs: list[np.ndarray], path: str, out_shape: list[int], min_repeat_ms: float = 50
) -> Callable[[], float]:
    """MetaSchedule's best module, exported to ``path``, timed by TVM's own evaluator (one repeat
    of at least ``min_repeat_ms`` per call of the timer)."""
    import tvm

    dev = tvm.cpu()
    lib = tvm.runtime.load_module(path)
    arrays = [tvm.runtime.tensor(x, dev) for x in inputs]
    arrays.append(tvm.runtime.tensor(np.zeros(out_shape, np.float32), dev))
    evaluator = lib.time_evaluator("main", dev, number=1, repeat=1, min_repeat_ms=min_repeat_ms)
    return lambda: float(evaluator(*arrays).mean)


def reference_timer(inputs: list[np.ndarray], name: str, args: list[Any], which: str) -> Callable[[], float]:
    """The library reference ``which`` (numpy, im2col+numpy, pytorch) of the case."""
    from bench_guided import references

    return references(name, tuple(args), inputs)[which]
