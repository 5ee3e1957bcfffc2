"""A network for a microcontroller: ``autosched export MODEL.onnx --embedded --target TARGET``.

The Linux-class network export already allocates nothing in ``model_run`` (every intermediate
tensor and kernel scratch at a planned offset of the caller's workspace, :mod:`autosched.graph.plan`)
and writes the weights as a ``const`` C array, which a bare-metal build places in flash. The
embedded export prints each kernel for the core (:mod:`~autosched.export.embedded`: no OpenMP, no
stdio, its vector width), refuses in one line a model whose workspace peak exceeds the RAM the
target names (``-ram=``) before writing anything, and once measured one whose workspace, static RAM
and stack together exceed it; it writes the emulated-board check (:mod:`~autosched.export.board`) in
place of main.c: the sample inputs and the reference outputs as const arrays.

Each task's program is the fastest program of its workload in the log on any target that prints
for the core (re-targeted like a kernel's), else its default schedule for the core. The weights are
laid out as on the machine that tuned the log (:func:`tuned_layout`): a convolution packed by 16
channels on an AVX-512 host is packed by 16 for the core too, so that its tuned program applies.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..backends.c.microcontroller import check_float_support
from ..graph.fusion import fuse
from ..graph.inputs import input_dtype
from ..graph.ir import Graph, GraphError
from ..graph.layout import for_target
from ..graph.plan import Plan, plan_memory
from ..lower.ir import PrimFunc
from ..ops.schedules import default_schedule
from ..records import Record, load_records, pick_best
from ..records.check import replay_error
from ..schedule.steps import Step
from ..target import Target, TargetError
from ..task import Task
from .board import BOARDS, Sizes, board_files, measure
from .board_check import network_check_c
from .embedded import EmbeddedError, check_target, embedded_source
from .kernel import write_files
from .network import ModelC, ProgramChooser, flat_weights, network_kernels, weights_c
from .network_text import model_h
from .stack import StackUse


@dataclass(frozen=True, slots=True)
class EmbeddedNetwork:
    """An exported embedded network: where, its workspace plan, how many tasks came from the log,
    and its measured flash, static RAM and deepest call path's stack (None: the compiler is missing)."""

    out: Path
    plan: Plan
    tuned: int
    tasks: int
    weight_bytes: int
    sizes: Sizes | None
    stack: StackUse | None
    static: bool = False  #: the workspace a static array (in the static RAM figure)

    def summary(self) -> str:
        """One line: the sizes next to their floors."""
        where = " (static, in model.c)" if self.static else ""
        work = (f"workspace {self.plan.peak} B{where} at its peak (floor {self.plan.floor} B: the buffers "
                f"live at once at the step needing most; {self.plan.total} B if no buffer were shared)")
        if self.sizes is None:
            return f"{work}; weights {self.weight_bytes} B; flash not measured (the compiler is missing)"
        return (f"flash {self.sizes.flash} B (floor: the weights' {self.weight_bytes} B), static RAM "
                f"{self.sizes.ram} B, stack {self.stack.text() if self.stack else '-'}, {work}")


def tuned_layout(graph: Graph, target: Target, records: list[Record]) -> Graph:
    """``graph`` laid out for ``target`` (:func:`~autosched.graph.layout.for_target`), or as for
    the C target of ``records`` whose layout gives the most tasks with a record: packed weights
    (their blocks) follow the vector width of the machine a program was tuned on, and a program
    only applies to its workload as it was tuned."""
    tuned = {r.workload_key for r in records}

    def matches(laid_out: Graph) -> int:
        return len({g.workload.key for g in fuse(laid_out) if g.workload is not None} & tuned)

    best = for_target(graph, target)
    most = matches(best) if tuned else 0
    for text in sorted({r.target for r in records}):
        try:
            other = Target.parse(text)
        except TargetError:
            continue  # checked where the record is used; here it only cannot lend a layout
        if other.is_cpu and (found := matches(candidate := for_target(graph, other))) > most:
            best, most = candidate, found
    return best


def _chooser(records: list[Record], target: Target) -> ProgramChooser:
    """Each task's program: the fastest of ``records`` on any target that prints for the core,
    else its default schedule."""

    def choose(task: Task) -> tuple[tuple[Step, ...], bool]:
        key = task.workload_key

        def prints(r: Record) -> str | None:
            why = replay_error(r)
            if why is None:
                try:
                    embedded_source(task.lowered(r.steps, "probe").func(), target)
                except Exception as err:  # a crafted program may fail anywhere in lowering
                    why = f"{type(err).__name__}: {err}"
            return why

        best = pick_best([r for r in records if r.workload_key == key], check=prints)
        if best is not None:
            return tuple(best.steps), True
        return tuple(default_schedule(task.workload, target)[0].steps), False

    return choose


def export_network_embedded(graph: Graph, target: str, out_dir: str | os.PathLike[str],
                            samples: list[np.ndarray], references: list[np.ndarray],
                            log: str | os.PathLike[str] | None = None,
                            static: bool = False) -> EmbeddedNetwork:
    """Write ``graph`` as an embedded C library for the bare-metal ``target``, with its board check
    on ``samples`` against ``references`` (see the module's doc); with ``static`` the workspace is
    a static array of model.c (in RAM, counted in its static RAM) and ``model_run`` takes none."""
    if graph.dtype != "float32":
        raise GraphError(f"graph {graph.name!r} computes in {graph.dtype}: C exports are float32 only")
    tgt = check_target(Target.parse(target))
    check_float_support(tgt, ["float32"])
    records: list[Record] = list(load_records(log)) if log is not None else []
    graph = tuned_layout(graph, tgt, records)
    steps = fuse(graph)

    def emit(func: PrimFunc) -> tuple[str, int]:
        kernel = embedded_source(func, tgt)
        return kernel.source, kernel.workspace

    kernels, files, tuned = network_kernels(graph, tgt, _chooser(records, tgt), emit)
    plan = plan_memory(graph, steps, [kernels[g.workload][1] if g.workload is not None else 0 for g in steps])
    if tgt.ram is not None and plan.peak > tgt.ram:
        raise EmbeddedError(f"{graph.name} needs a workspace of {plan.peak} bytes at its peak, more than the "
                            f"{tgt.ram} bytes of RAM the target gives it (-ram=)")
    flat, offsets = flat_weights(graph)
    files["weights.c"] = weights_c(graph, flat)
    files["model.c"] = ModelC(graph, plan, offsets).text(steps, kernels, files, static)
    files["model.h"] = model_h(graph, plan, None, static)
    sources = sorted(f for f in files if f.endswith(".c"))
    if tgt.mcpu in BOARDS:
        types = [input_dtype(graph, v) for v in graph.inputs]
        files |= board_files(tgt, sources, ["model.h"], network_check_c(types, samples, references, static))
    out = write_files(files, Path(out_dir))
    measured = measure(out, tgt, sources)
    sizes, stack = measured if measured is not None else (None, None)
    export = EmbeddedNetwork(out, plan, tuned, len(kernels), 4 * flat.size, sizes, stack, static)
    if sizes is not None and stack is not None and tgt.ram is not None:
        workspace = 0 if static else plan.peak  # a static one is in sizes.ram
        need = workspace + sizes.ram + stack.bytes
        if need > tgt.ram:
            raise EmbeddedError(
                f"{graph.name} needs {need} bytes of RAM (workspace {workspace}, static {sizes.ram}, stack "
                f"{stack.bytes}), more than the {tgt.ram} bytes the target gives it (-ram=); the files "
                f"measured are in {out}")
    if measured is not None:  # the header states what the library needs, as measured
        needs = (f"/* for {tgt.mcpu}: {export.summary()}; measured with {tgt.cc} "
                 f"{' '.join(tgt.cflags(shared=False))} */\n")
        write_files({"model.h": needs + files["model.h"]}, out)
    return export
