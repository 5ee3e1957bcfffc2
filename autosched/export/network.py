"""A whole network as one standalone C library: ``autosched export MODEL.onnx --log LOG --out DIR``.

    model.h / model.c    int model_run(const model_input_t *const *inputs, float *const *outputs,
                                   void *workspace)
                         (model_input_t is float, or void where an input is int64 token ids:
                         model.h lists each input's C type)
    kernelN.c            one file per task: its best program from the log (else the default
                         schedule), scratch taken from the workspace
    weights.c            the constants as one C array, or (``weights.bin``) a float32 blob the
                         application hands to ``model_set_weights`` before ``model_run``; by
                         default a blob above :data:`BLOB_BYTES` (a C array of megabytes of
                         numbers is slow to compile: ResNet-18's took 72 s), a C array below
    main.c, Makefile     ``make run`` builds, checks the outputs against reference files and times it

``model_run`` allocates nothing: intermediate tensors and kernel scratch live in the caller's
workspace of ``MODEL_WORKSPACE_BYTES``, planned statically by lifetime (:mod:`autosched.graph.plan`).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..database.apply import find_best
from ..dtypes import dtype as dtype_info
from ..graph.fusion import Group, fuse
from ..graph.inputs import input_dtype
from ..graph.ir import Graph, GraphError
from ..graph.layout import for_target
from ..graph.network import network_tasks
from ..graph.plan import Plan, kernel_source, plan_memory
from ..lower.ir import PrimFunc
from ..ops import Workload
from ..ops.schedules import default_schedule
from ..schedule.steps import Step
from ..target import Target
from ..task import Task
from .kernel import write_files
from .network_text import MAIN_C, STATIC_WORKSPACE, makefile, model_h, run_signature

#: float32 bytes of constants above which ``weights="auto"`` writes them as weights.bin: a C array
#: of 1 MiB of floats is a 5.7 MB source that gcc -O3 compiles in 0.6 s; ResNet-18's 45 MiB took 72 s
BLOB_BYTES = 1 << 20

#: what ``export_network``'s ``weights`` accepts
WEIGHT_FORMS = ("auto", "c", "blob")


@dataclass(frozen=True, slots=True)
class NetworkExport:
    """The files of an exported network, its workspace plan and how many tasks came from the log."""

    files: dict[str, str]
    plan: Plan
    tuned: int
    tasks: int
    blob: bytes | None = None
    #: the element type of each input as model_run takes it (float32, or int64 for token ids)
    input_dtypes: tuple[str, ...] = ()
    #: how the weights were written (``c`` or ``blob``) and why, in words
    weights: str = "c"
    weights_why: str = ""


#: a network kernel's C and scratch bytes, from its lowered function
KernelPrinter = Callable[[PrimFunc], tuple[str, int]]
#: the program of a task: its steps and whether a log gave them (else its default schedule)
ProgramChooser = Callable[[Task], tuple[tuple[Step, ...], bool]]


def network_kernels(
    graph: Graph, target: Target, choose: ProgramChooser, emit: KernelPrinter
) -> tuple[dict[Workload, tuple[str, int]], dict[str, str], int]:
    """Per workload (kernel name, scratch bytes); the kernel files; tasks taken from the log."""
    kernels: dict[Workload, tuple[str, int]] = {}
    files: dict[str, str] = {}
    tuned = 0
    for i, task in enumerate(network_tasks(graph, str(target))):
        steps, from_log = choose(task)
        tuned += from_log
        name = f"model_k{i}"
        source, scratch = emit(Task(task.workload, target=target).lowered(steps, name).func())
        files[f"kernel{i}.c"] = f"/* {task.workload} */\n{source}"
        kernels[task.workload] = (name, scratch)
    return kernels, files, tuned


def _kernels(
    graph: Graph, log: str | os.PathLike[str] | None, target: Target, portable: bool
) -> tuple[dict[Workload, tuple[str, int]], dict[str, str], int]:
    """:func:`network_kernels` of the Linux-class export: each task's best record in ``log``."""

    def choose(task: Task) -> tuple[tuple[Step, ...], bool]:
        record = find_best(task, log=log, db=False).record if log is not None else None
        if record is not None:
            return tuple(record.steps), True
        return tuple(default_schedule(task.workload, target)[0].steps), False

    threads = 1 if portable else (target.num_threads or 1)
    return network_kernels(graph, target, choose,
                           lambda func: kernel_source(func, portable, threads, target.vector_bytes or 16))


def flat_weights(graph: Graph) -> tuple[np.ndarray, dict[str, int]]:
    """All constants in one float32 array, and where each one starts in it."""
    offsets: dict[str, int] = {}
    chunks = []
    at = 0
    for name, arr in graph.constants.items():
        offsets[name] = at
        at += arr.size
        chunks.append(arr.astype(np.float32).reshape(-1))
    return (np.concatenate(chunks) if chunks else np.zeros(1, np.float32)), offsets


def _not_finite(graph: Graph) -> list[str]:
    """The constants holding NaN or infinity (which C source cannot spell as numbers)."""
    return [name for name, arr in graph.constants.items() if not np.isfinite(arr).all()]


def _mib(nbytes: int) -> str:
    return f"{nbytes / (1 << 20):.2f} MiB"


def _choose_weights(graph: Graph, flat: np.ndarray, weights: str) -> tuple[str, str]:
    """The form of the weights (``c`` or ``blob``) for ``weights`` (``auto`` chooses), and why."""
    size, limit = _mib(4 * flat.size), _mib(BLOB_BYTES)
    if weights == "blob":
        return "blob", f"as asked ({size} of constants)"
    if weights == "c":
        slow = f"; above {limit} it compiles slowly: --weights blob" if 4 * flat.size > BLOB_BYTES else ""
        return "c", f"as asked ({size} of constants{slow})"
    bad = _not_finite(graph)
    if bad:
        return "blob", f"constants {bad[:3]} hold NaN or infinity, which C source cannot spell"
    if 4 * flat.size > BLOB_BYTES:
        return "blob", f"{size} of constants, above the {limit} a C array compiles fast"
    return "c", f"{size} of constants, at most the {limit} above which they go to weights.bin"


def weights_c(graph: Graph, flat: np.ndarray) -> str:
    bad = _not_finite(graph)
    if bad:
        raise ValueError(f"constants {bad[:3]} hold NaN or infinity: cannot write them as C numbers "
                         "(export them with --weights blob)")
    rows = [", ".join(f"{v!r}f" for v in flat[i : i + 8].tolist())
            for i in range(0, flat.size, 8)]
    body = ",\n  ".join(rows)
    return f'#include "model.h"\n\nconst float model_weights[{flat.size}] = {{\n  {body}\n}};\n'


BLOB_C = """\
#include "model.h"

const float* model_weights = 0;

void model_set_weights(const float* weights) { model_weights = weights; }
"""


class ModelC:
    """Writes model.c: one call per step, each value at its planned place."""

    def __init__(self, graph: Graph, plan: Plan, weights: dict[str, int]) -> None:
        self.graph, self.plan, self.weights = graph, plan, weights

    def ptr(self, value: str) -> str:
        g = self.graph
        if value in g.outputs:
            return f"outputs[{g.outputs.index(value)}]"
        root = self.plan.roots.get(value, value)
        if root in g.inputs:
            return f"(({dtype_info(input_dtype(g, root)).c_name}*)inputs[{g.inputs.index(root)}])"
        if root in g.constants:
            return f"((float*)(model_weights + {self.weights[root]}))"
        if root in g.outputs:
            return f"outputs[{g.outputs.index(root)}]"
        return f"((float*)(ws + {self.plan.offsets[root]}))"

    def step(self, i: int, g: Group, kernels: dict[Workload, tuple[str, int]]) -> list[str]:
        node = g.nodes[0]
        if g.workload is not None:
            name, scratch = kernels[g.workload]
            args = [self.ptr(v) for v in g.inputs] + [self.ptr(g.output), f"ws + {self.plan.scratch[i]}"]
            return [f"  if ({name}({', '.join(args)}) != 0) return -1;"]
        if node.op == "reshape":
            if g.output in self.graph.outputs:
                n = math.prod(self.graph.shapes[g.output])
                return [f"  memcpy({self.ptr(g.output)}, {self.ptr(g.inputs[0])}, sizeof(float) * {n});"]
            return []
        axis = node.attr("axis")
        out_shape = self.graph.shapes[g.output]
        outer = math.prod(out_shape[:axis])
        row = math.prod(out_shape[axis:])
        lines, col = [], 0
        for v in g.inputs:
            part = math.prod(self.graph.shapes[v][axis:])
            dst, src = f"{self.ptr(g.output)} + o * {row} + {col}", f"{self.ptr(v)} + o * {part}"
            lines.append(f"  for (int o = 0; o < {outer}; ++o) memcpy({dst}, {src}, sizeof(float) * {part});")
            col += part
        return lines

    def text(self, steps: list[Group], kernels: dict[Workload, tuple[str, int]], files: dict[str, str],
             static: bool = False) -> str:
        """model.c: the kernels' prototypes (as their files define them), then ``model_run``; with
        ``static``, its workspace a static array (:func:`run_signature`)."""
        body = [line for i, g in enumerate(steps) for line in self.step(i, g, kernels)]
        aligned = "__attribute__((aligned(64)))"
        storage = [f"static unsigned char {STATIC_WORKSPACE}[MODEL_WORKSPACE_BYTES] {aligned};", ""]
        storage = storage if static else []
        workspace = STATIC_WORKSPACE if static else "(unsigned char*)workspace"
        return "\n".join([
            '#include <stdint.h>\n#include <string.h>\n#include "model.h"\n', *kernel_prototypes(files), "",
            *storage, run_signature(static) + " {", f"  unsigned char* ws = {workspace};",
            "  (void)inputs; (void)ws;",
            *body, "  return 0;", "}", "",
        ])


_KERNEL_HEAD = re.compile(r"^int (model_k\d+)\((.*)\) \{$", re.MULTILINE)


def kernel_prototypes(files: dict[str, str]) -> list[str]:
    """A prototype of each kernel of ``files`` as its definition reads (its read-only arguments
    const), without ``restrict``."""
    return [f"int {name}({params.replace('* restrict ', '* ')});"
            for text in files.values() for name, params in _KERNEL_HEAD.findall(text)]


def export_network(
    graph: Graph, log: str | os.PathLike[str] | None = None, target: str = "c", portable: bool = False,
    weights: str = "auto",
) -> NetworkExport:
    """The C library files of ``graph`` with each task's best program in ``log``; ``weights`` ``c``
    (a C array in weights.c), ``blob`` (weights.bin, handed over by ``model_set_weights``) or
    ``auto`` (a blob above :data:`BLOB_BYTES` of constants or where one is not finite, else C)."""
    if weights not in WEIGHT_FORMS:
        raise ValueError(f"weights must be 'auto', 'c' (a C array) or 'blob' (a binary file), "
                         f"got {weights!r}")
    if graph.dtype != "float32":
        raise GraphError(f"graph {graph.name!r} computes in {graph.dtype}: C exports are float32 only")
    tgt = Target.parse(target)
    if not tgt.is_cpu:
        raise GraphError(f"a network exports as C for a CPU target, not for {tgt.kind}: on a GPU, run it "
                         f"with asc.build_network(graph, log, target={tgt.kind!r})")
    graph = for_target(graph, tgt)  # the weights as the kernels read them (packed once, here)
    steps = fuse(graph)
    kernels, files, tuned = _kernels(graph, log, tgt, portable)
    scratch = [kernels[g.workload][1] if g.workload is not None else 0 for g in steps]
    plan = plan_memory(graph, steps, scratch)
    flat, offsets = flat_weights(graph)
    weights, why = _choose_weights(graph, flat, weights)
    files["weights.c"] = weights_c(graph, flat) if weights == "c" else BLOB_C
    files["model.c"] = ModelC(graph, plan, offsets).text(steps, kernels, files)
    files["model.h"] = model_h(graph, plan, flat.size if weights == "blob" else None)
    files["main.c"] = MAIN_C
    files["Makefile"] = makefile(sorted(f for f in files if f.endswith(".c")), tgt, portable)
    blob = flat.astype("<f4").tobytes() if weights == "blob" else None
    types = tuple(input_dtype(graph, v) for v in graph.inputs)
    return NetworkExport(files, plan, tuned, len(kernels), blob, types, weights, why)


def write_network(export: NetworkExport, out_dir: str | os.PathLike[str], samples: list[np.ndarray],
                  references: list[np.ndarray]) -> Path:
    """Write the files (and weights.bin), the sample inputs (``inputN.bin``: float32, or int64 for
    token ids) and reference outputs (``referenceN.bin``, float32)."""
    out = write_files(export.files, Path(out_dir))
    if export.blob is not None:
        (out / "weights.bin").write_bytes(export.blob)
    types = export.input_dtypes or ("float32",) * len(samples)
    for i, (a, kind) in enumerate(zip(samples, types, strict=True)):
        (out / f"input{i}.bin").write_bytes(np.ascontiguousarray(a, dtype=kind).tobytes())
    for i, a in enumerate(references):
        (out / f"reference{i}.bin").write_bytes(np.ascontiguousarray(a, dtype=np.float32).tobytes())
    return out
