"""autosched: an autotuning SDK for tensor programs (tensor expressions -> schedules -> C).

The names follow TVM's ``te`` where te has the same concept, so ``te.`` in a tutorial becomes
``asc.``::

    import autosched as asc
    A = asc.placeholder((M, K), name="A")
    ...
    s = asc.create_schedule(C.op)
    f = asc.build(s, [A, B, C], target="c")

In an application, ``f = asc.compile(task)`` gives the best kernel tuned for this machine (from
the tuning database, or logs put in scope with ``asc.apply_best``), else the default schedule.
"""

from __future__ import annotations

import os as _os

if _os.environ.get("AUTOSCHED_SHARE_CORES", "") not in ("", "0"):  # before numpy loads OpenBLAS
    from .thread_pools import share_cores as _share_cores

    _share_cores()

from . import intrin
from .backends.plugins import load_plugins as _load_backend_plugins
from .database import Database, NotTunedWarning, apply_best, compile, load_best
from .diagnostics import AutoschedWarning
from .driver import build, emit, lower
from .expr import (
    Select,
    Tensor,
    abs,
    all,
    call_extern,
    call_intrin,
    call_packed,
    call_pure_extern,
    cast,
    ceil,
    comm_reducer,
    compute,
    const,
    decl_buffer,
    dequantize,
    equal,
    erf,
    exp,
    extern,
    floor,
    if_then_else,
    indexdiv,
    indexmod,
    log,
    max,
    max_value,
    min,
    min_value,
    not_equal,
    placeholder,
    pow,
    quantize,
    reduce_axis,
    register_func,
    requantize,
    round_half_even,
    scan,
    sigmoid,
    size_var,
    sqrt,
    sum,
    tanh,
    var,
)
from .graph import GraphBuilder, build_network, from_onnx, tune_network
from .ops import Workload, get_workload, list_workloads, workload
from .records import load_records
from .runner.measure import MeasureErrorNo, MeasureOption
from .schedule import Schedule, ScheduleError, Stage, create_schedule, thread_axis
from .schedule.steps import Step, steps_from_json, steps_to_json
from .search import TuneResult, tune
from .target import Target, TargetError
from .task import Task
from .te import ir_builder
from .te.intrin import TensorIntrin, decl_tensor_intrin
from .thread_pools import share_cores
from .version import __version__

#: TVM names with no counterpart here, and what to write instead
_NOT_HERE = {
    "register_intrin_lowering": "TIR's intrinsic lowering rules do not exist here: call the C "
    "function by name with call_pure_extern(dtype, 'expf', x)",
    "register_op_attr": "TIR op attributes do not exist here: call_pure_extern names a C function",
    "CallEffectKind": "TIR op attributes do not exist here: call_pure_extern names a C function",
    "cpu": "there are no devices or device arrays: call the built kernel with numpy arrays",
    "cuda": "there are no devices or device arrays: call the built kernel with numpy arrays",
    "device": "there are no devices or device arrays: call the built kernel with numpy arrays",
    "nd": "there are no device arrays: call the built kernel with numpy arrays",
}


_load_backend_plugins()  # target kinds from other distributions (see autosched.backends.plugins)


def __getattr__(name: str) -> object:
    """A TVM name that does not exist here says what to write instead."""
    if name in _NOT_HERE:
        raise AttributeError(f"autosched has no {name!r}: {_NOT_HERE[name]}")
    raise AttributeError(f"module 'autosched' has no attribute {name!r}")


__all__ = [
    "AutoschedWarning",
    "Database",
    "NotTunedWarning",
    "Schedule",
    "Select",
    "share_cores",
    "ScheduleError",
    "Stage",
    "Step",
    "MeasureErrorNo",
    "MeasureOption",
    "Target",
    "TargetError",
    "Task",
    "TuneResult",
    "Tensor",
    "TensorIntrin",
    "__version__",
    "abs",
    "all",
    "apply_best",
    "build",
    "call_extern",
    "call_intrin",
    "call_packed",
    "register_func",
    "call_pure_extern",
    "cast",
    "dequantize",
    "ceil",
    "comm_reducer",
    "compile",
    "compute",
    "const",
    "create_schedule",
    "decl_buffer",
    "decl_tensor_intrin",
    "emit",
    "equal",
    "erf",
    "exp",
    "floor",
    "extern",
    "if_then_else",
    "indexdiv",
    "indexmod",
    "intrin",
    "ir_builder",
    "log",
    "load_best",
    "load_records",
    "lower",
    "max",
    "max_value",
    "min",
    "min_value",
    "not_equal",
    "placeholder",
    "quantize",
    "requantize",
    "round_half_even",
    "pow",
    "reduce_axis",
    "scan",
    "sigmoid",
    "size_var",
    "sqrt",
    "steps_from_json",
    "steps_to_json",
    "sum",
    "tanh",
    "thread_axis",
    "tune",
    "var",
    "Workload",
    "GraphBuilder",
    "build_network",
    "from_onnx",
    "tune_network",
    "get_workload",
    "list_workloads",
    "workload",
]
