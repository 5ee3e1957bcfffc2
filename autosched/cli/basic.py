"""``autosched ops``, ``run`` and ``space``: workloads, hand-written schedules, generated spaces."""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import random
import statistics
import time
from collections.abc import Callable

import numpy as np

from ..driver import build
from ..expr import static_shape
from ..graph.onnx_doc import table_markdown, table_text
from ..ops import Workload, get_workload, list_workloads
from ..ops.schedules import default_schedule
from ..records import best_record
from ..space.gpu_space import sketch_space
from ..target import Target
from ..task import Task
from .network import cmd_run_network, is_model, run_target

#: numpy itself (BLAS, in the workload's dtype) where it has the operation; otherwise the reference
NUMPY: dict[str, Callable[[Workload], Callable[..., object]]] = {
    "matmul": lambda wl: (lambda a, b: a @ b.T) if wl.args[4] else (lambda a, b: a @ b),
    "batch_matmul": lambda wl: np.matmul,
    "dense": lambda wl: lambda x, w, bias: np.maximum(x @ w.T + bias, 0),
}


def parse_value(text: str) -> object:
    """A workload argument from the command line: int, float, bool or string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def cmd_ops(args: argparse.Namespace) -> int:
    if args.onnx or args.markdown:
        print(table_markdown() if args.markdown else table_text(), end="")
        return 0
    for info in list_workloads():
        print(f"{info.name}{info.signature}")
        if info.doc:
            print(f"    {info.doc}")
    return 0


def _blas_threads(n: int) -> contextlib.AbstractContextManager[object]:
    """Limit numpy's BLAS to the kernel's thread count (when threadpoolctl is installed)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(n)


#: idle seconds before each timing: OpenMP and OpenBLAS workers spin a while after their last call
#: and would steal cores from whatever is timed next
SETTLE = 0.3


def _seconds_per_call(fn: Callable[[], object], min_seconds: float) -> float:
    """Seconds per call of ``fn`` after one untimed warm-up call, over at least ``min_seconds``."""
    fn()
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / calls


def cmd_run(args: argparse.Namespace) -> int:
    if is_model(args.workload):
        return cmd_run_network(args)
    if args.against is not None or args.rtol is not None:
        raise ValueError(f"--against and --rtol are for a model (MODEL.onnx); {args.workload} is checked "
                         "against its numpy reference")
    wl = get_workload(args.workload, tuple(parse_value(a) for a in args.args))
    target = run_target(args)
    if args.log:
        task = Task(wl, target=target)
        record = best_record(args.log, task)
        sched, how = task.schedule(record.steps), f"best program in {args.log}"
    else:
        sched, how = default_schedule(wl, target)
    kernel = build(sched, wl.tensors(), target)
    inputs = wl.random_inputs(0)
    outputs = [np.zeros(static_shape(t.shape), t.dtype) for t in wl.outputs]
    kernel(*inputs, *outputs)
    expected = wl.reference(*inputs)
    for got, want in zip(outputs, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(want).max())))
    baseline = NUMPY[wl.name](wl) if wl.name in NUMPY else wl.reference
    baseline_name = "numpy" if wl.name in NUMPY else "numpy reference implementation"
    ours, ref = [], []
    with _blas_threads(target.num_threads or 1):
        for _ in range(args.rounds):
            time.sleep(SETTLE)
            ours.append(kernel.time(*inputs, *outputs, number=1, repeat=1, min_repeat_ms=50)[0])
            time.sleep(SETTLE)
            ref.append(_seconds_per_call(lambda: baseline(*inputs), 0.05))
    flops = wl.flops()
    t_ours, t_ref = statistics.median(ours), statistics.median(ref)
    summary = {
        "workload": wl.key,
        "target": str(target),
        "schedule": how,
        "checked": True,
        "baseline": baseline_name,
        "autosched_ms": t_ours * 1e3,
        "numpy_ms": t_ref * 1e3,
        "autosched_gflops": flops / t_ours / 1e9,
        "numpy_gflops": flops / t_ref / 1e9,
        "speedup_vs_numpy": t_ref / t_ours,
    }
    if args.json:
        print(json.dumps(summary))
        return 0
    print(f"{wl} on {target}")
    print(f"  schedule : {how} (output matches the numpy reference)")
    print(f"  autosched: {t_ours * 1e3:9.3f} ms  {summary['autosched_gflops']:8.1f} GFLOP/s")
    print(f"  numpy    : {t_ref * 1e3:9.3f} ms  {summary['numpy_gflops']:8.1f} GFLOP/s  ({baseline_name})")
    print(f"  speed-up : {summary['speedup_vs_numpy']:.2f}x (medians of {args.rounds} rounds)")
    return 0


def cmd_space(args: argparse.Namespace) -> int:
    wl = get_workload(args.workload, tuple(parse_value(a) for a in args.args))
    space = sketch_space(wl, Target.parse(args.target))
    print(space.describe())
    rng = random.Random(args.seed)
    for n in range(args.sample):
        program = space.sample(rng)
        annotation = json.dumps(program.annotation.to_json())
        print(f"\nprogram {n}: sketch [{program.sketch}], annotation {annotation}")
        for step in space.steps(program):
            print(f"  {step}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``ops``, ``run`` and ``space`` subcommands."""
    ops = sub.add_parser("ops", help="list built-in workloads (--onnx: the ONNX operators from_onnx reads)")
    ops.add_argument("--onnx", action="store_true", help="list the ONNX operators and attributes imported")
    ops.add_argument("--markdown", action="store_true", help="the ONNX operators as a Markdown table")
    ops.set_defaults(func=cmd_ops)
    run = sub.add_parser(
        "run", help="check and time a workload's CPU schedule against numpy, or a model against onnxruntime",
        description="autosched run WORKLOAD ARGS... checks a workload's schedule against its numpy reference "
        "and times both. autosched run MODEL.onnx builds the network (the best records of --log, else "
        "untuned), checks its outputs on a random input against onnxruntime's and times both on the same "
        "threads, onnxruntime's workers not spinning, in interleaved rounds; exit status 1 when the "
        "outputs differ by more than --rtol.",
    )
    run.add_argument("workload", help="a built-in workload's name, or an ONNX model file (MODEL.onnx)")
    run.add_argument("args", nargs="*", help="workload arguments, e.g. 1024 1024 1024")
    run.add_argument("--target", default="c", help="target string, e.g. 'c -num-threads=1'")
    run.add_argument("--threads", type=int, help="threads of each side (default: the target's, one a core)")
    run.add_argument("--rounds", type=int, default=5, help="timing rounds (median reported)")
    run.add_argument("--json", action="store_true", help="print one JSON summary object")
    run.add_argument("--log", help="use the best program of this tuning log instead of the hand-written one")
    run.add_argument("--against", choices=("onnxruntime", "none"),
                     help="a model's reference: onnxruntime (the default where it is installed) or none")
    run.add_argument("--rtol", type=float,
                     help="a model's tolerance of max |error| / max |reference| (default: 1e-4)")
    run.set_defaults(func=cmd_run)
    space = sub.add_parser("space", help="list a workload's generated sketches and sample programs")
    space.add_argument("workload")
    space.add_argument("args", nargs="*")
    space.add_argument("--target", default="c")
    space.add_argument("--sample", type=int, default=1, help="random programs to print")
    space.add_argument("--seed", type=int, default=0)
    space.set_defaults(func=cmd_space)
