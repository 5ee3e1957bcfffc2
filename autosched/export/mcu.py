"""``export --embedded``: an embedded kernel directory, its sizes measured, its board check beside it.

:func:`export_embedded` writes kernel.c and kernel.h (:mod:`~autosched.export.embedded`) and the
emulated-board check (:mod:`~autosched.export.board`), then compiles kernel.c with the target's
compiler to measure what it needs: flash (code and constants), static RAM, the stack of its
deepest call path (:mod:`~autosched.export.stack`) and the workspace; kernel.h states them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..schedule.steps import Step
from ..task import Task
from .board import BOARDS, Sizes, board_files, measure
from .board_check import kernel_check_c
from .embedded import EmbeddedError, EmbeddedKernel, embedded_header, embedded_kernel
from .kernel import write_files
from .stack import StackUse


@dataclass(frozen=True, slots=True)
class EmbeddedExport:
    """An exported embedded kernel: where, its C, and its measured needs (None where the compiler
    is missing)."""

    out: Path
    kernel: EmbeddedKernel
    sizes: Sizes | None
    stack: StackUse | None

    def summary(self) -> str:
        """One line: flash, RAM, stack and workspace bytes."""
        where = "static, in RAM" if self.kernel.static else "the caller's"
        work = f"workspace {self.kernel.workspace} B ({where})"
        if self.sizes is None:
            return f"{work}; flash and RAM not measured (the compiler is missing)"
        return (f"flash {self.sizes.flash} B (code + constants), static RAM {self.sizes.ram} B, "
                f"stack {self.stack.text() if self.stack else '-'}, {work}")


def export_embedded(task: Task, steps: Sequence[Step], out_dir: str | Path, *, name: str | None = None,
                    static: bool = False, about: Sequence[str] = (), seed: int = 0) -> EmbeddedExport:
    """Write the program ``steps`` of ``task`` (its target bare-metal) as an embedded kernel
    directory with its board check where QEMU emulates a board of the core (:data:`BOARDS`; inputs
    drawn with ``seed``, outputs by the workload's numpy reference); ``about`` opens kernel.h's
    comment. Raises ``ValueError`` subclasses (one line) for what an embedded kernel cannot hold."""
    wl = task.workload
    kernel = embedded_kernel(task, steps, name or f"{wl.name}_kernel", static)
    specs = [(s.name, s.dtype, s.is_output) for s in task.arg_specs()]
    doc = [f"{kernel.name}: {wl}, for {task.target.mcpu} ({task.target}).", *about, "",
           "Arguments: C-contiguous (row-major) arrays that do not overlap; inputs, then outputs:",
           *(f"  {n}  {d}  {'output' if o else 'input'}" for n, d, o in specs)]
    files = {"kernel.c": f'#include "kernel.h"\n{kernel.source}', "kernel.h": embedded_header(kernel, doc)}
    if task.target.mcpu in BOARDS:  # else no emulated board: the kernel alone
        inputs = wl.random_inputs(seed)
        check = kernel_check_c(kernel, specs, inputs, wl.reference(*inputs))
        files |= board_files(task.target, ["kernel.c"], ["kernel.h"], check)
    out = write_files(files, out_dir)
    measured = measure(out, task.target, ["kernel.c"])
    if measured is None:
        return EmbeddedExport(out, kernel, None, None)
    sizes, stack = measured
    workspace = 0 if kernel.static else kernel.workspace  # static storage is in sizes.ram already
    ram = task.target.ram
    if ram is not None and workspace + sizes.ram + stack.bytes > ram:
        raise EmbeddedError(
            f"{kernel.name} needs {workspace + sizes.ram + stack.bytes} bytes of RAM (workspace {workspace}, "
            f"static {sizes.ram}, stack {stack.bytes}), more than the {ram} bytes the target gives it "
            f"(-ram=); the files measured are in {out}")
    figures = [f"Needs: flash {sizes.flash} bytes (code and constants), static RAM {sizes.ram} bytes,",
               f"a stack of {stack.text()} and the workspace ({kernel.workspace} bytes);",
               f"measured with {task.target.cc} {' '.join(task.target.cflags(shared=False))}."]
    write_files({"kernel.h": embedded_header(kernel, [*doc, "", *figures])}, out)
    return EmbeddedExport(out, kernel, sizes, stack)
