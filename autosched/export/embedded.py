"""Kernels for microcontrollers: C with no heap, no OS and no OpenMP (``export --embedded``).

An embedded kernel is the program's C for a bare-metal target
(:mod:`~autosched.backends.c.microcontroller`) printed so that it needs nothing but the compiler
and the math functions it calls:

- every buffer the Linux-class kernel would ``malloc`` (a cache-write tile, a packed panel, a
  padded copy) is at a fixed offset of one workspace of ``<NAME>_WORKSPACE_BYTES``: the caller's
  (the last parameter, ``unsigned char*``), or with ``static`` a static array of the
  kernel's file (then the kernel takes no workspace and is not reentrant);
- parallel loops run serially (one core, no OpenMP runtime); vector loops use the core's vectors
  (Helium on cortex-m55) or print as plain loops where it has none (cortex-m4, cortex-m7);
- it includes no ``stdio.h``, calls no allocator, and returns 0, or -1 for a workspace that is
  NULL or not 8-byte aligned (CMSIS-NN's style: an error code, never a trap).

A program another target tuned is re-targeted by printing its steps for this one: the steps keep
their loop structure, the printer adapts the vector width and makes parallel loops serial.
Refused in one line (``EmbeddedError``): a program whose buffers have symbolic sizes (a heap would
be needed), one calling user C or libraries, one needing CPU extensions of another architecture,
and float kernels on a core without a floating-point unit (``TargetError``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from ..backends.c.microcontroller import check_float_support, is_bare_metal
from ..emit_c import function_name
from ..graph.plan import WORKSPACE_ARG, WorkspacePrinter
from ..lower.ir import Allocate, For, PrimFunc, Stmt, stmt_children
from ..schedule.steps import Step
from ..target import Target, TargetError
from ..task import Task
from .kernel import header_text

#: what an embedded kernel's file includes: no stdio, no time, nothing POSIX
EMBEDDED_HEADER = """\
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#if defined(__GNUC__) && !defined(__clang__)
/* local tiles are written before they are read, under guards gcc cannot match up */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif"""

#: the alignment the kernel asks of the caller's workspace (the widest scalar, int64 or double)
WORKSPACE_ALIGN = 8


class EmbeddedError(ValueError):
    """A program the embedded export cannot print without a heap or an OS."""


class EmbeddedPrinter(WorkspacePrinter):
    """The workspace printer (:class:`~autosched.graph.plan.WorkspacePrinter`) for one core without
    an OS: loops marked parallel print as serial ones, and vector loops as plain loops where the
    core has no vector registers (``vector_bytes`` under 8); local tiles are aligned to 16 bytes
    (an MVE register), not 64 (a stack realigned to 64 costs words a microcontroller lacks)."""

    align_attr = " __attribute__((aligned(16)))"

    def loop(self, s: For, indent: int) -> None:
        """A loop; parallel ones, and vector ones without vector registers, run serially."""
        if s.kind == "parallel" or (s.kind == "vectorized" and self.vector_bytes < 8):
            s = dataclasses.replace(s, kind="serial")
        super().loop(s, indent)


@dataclass(frozen=True, slots=True)
class EmbeddedKernel:
    """An embedded kernel's C: its function name, the source (without its header's include), the
    parameter list and the workspace bytes it needs (0: none)."""

    name: str
    source: str
    params: str
    workspace: int
    static: bool


def _local_buffers(s: Stmt) -> list[Allocate]:
    """The allocations in a body (every depth)."""
    found = [s] if isinstance(s, Allocate) else []
    for child in stmt_children(s):
        found += _local_buffers(child)
    return found


def check_embeddable(func: PrimFunc, target: Target) -> None:
    """Refuse (:class:`EmbeddedError`, one line) what a bare-metal build cannot hold; see the
    module's doc."""
    check_target(target)
    if func.sizes:
        raise EmbeddedError(f"{func.name} takes symbolic sizes: an embedded kernel has fixed shapes")
    if func.code:
        libs = ", ".join(func.code.libs) or "C code"
        raise EmbeddedError(f"{func.name} calls user C or libraries ({libs}): the embedded export "
                            "prints only what autosched lowers itself")
    allocations = _local_buffers(func.body)
    for a in allocations:
        if not isinstance(a.buffer.size, int):
            raise EmbeddedError(f"{func.name} needs buffer {a.buffer.name} of a size known only at run "
                                "time: the embedded export cannot place it without a heap")
    check_float_support(target, {b.dtype for b in func.args} | {a.buffer.dtype for a in allocations})


def embedded_source(func: PrimFunc, target: Target, static: bool = False) -> EmbeddedKernel:
    """The embedded C of ``func`` for ``target`` (see the module's doc); raises
    :class:`EmbeddedError` or ``TargetError`` for what it cannot hold."""
    check_embeddable(func, target)
    printer = EmbeddedPrinter(num_threads=1, vector_bytes=target.vector_bytes or 4, portable=False)
    name, text = printer.function(func)
    if printer.extensions:
        needs = ", ".join(sorted(printer.extensions))
        raise EmbeddedError(f"{func.name} calls intrinsics needing {needs}, which {target.mcpu} lacks")
    head, body = text.split("\n", 1)
    param = f", unsigned char* {printer.restrict} {WORKSPACE_ARG}"
    size = printer.scratch
    if static:
        head = head.replace(param, "")
        storage = (f"static unsigned char {WORKSPACE_ARG}[{size}] __attribute__((aligned(64)));\n\n"
                   if size else "")
        text = f"{storage}{head}\n{body}"
    else:
        misaligned = f"((uintptr_t){WORKSPACE_ARG} & {WORKSPACE_ALIGN - 1}u) != 0"
        guard = f"  if ({WORKSPACE_ARG} == NULL || {misaligned}) return -1;\n" if size else ""
        text = f"{head}\n{guard}{body}"
    parts = [f"/* generated by autosched: {name}, for {target.mcpu}: no heap, no OS */", EMBEDDED_HEADER]
    parts += [*printer.helpers.values(), text]
    params = head[len(f"int {name}(") : -len(") {")]
    return EmbeddedKernel(name, "\n\n".join(parts) + "\n", params, size, static)


def embedded_kernel(task: Task, steps: Sequence[Step], name: str, static: bool = False) -> EmbeddedKernel:
    """The embedded C of the program ``steps`` of ``task`` (whose target is bare-metal), called
    ``name`` (sanitized)."""
    func = task.lowered(steps, function_name(name)).func()
    return embedded_source(func, task.target, static)


def embedded_header(kernel: EmbeddedKernel, doc: list[str]) -> str:
    """kernel.h: the prototype, ``<NAME>_WORKSPACE_BYTES`` and ``doc`` (what, for which core,
    sizes) in its opening comment."""
    macro = f"{kernel.name.upper()}_WORKSPACE_BYTES"
    if kernel.static:
        use = f"Its {kernel.workspace} bytes of workspace are static storage in kernel.c (not reentrant)."
    elif kernel.workspace:
        use = (f"The last argument is a workspace of {macro} bytes, {WORKSPACE_ALIGN}-byte aligned, "
               "that the kernel may overwrite. Returns 0, or -1 for a missing or misaligned workspace.")
    else:
        use = "It needs no workspace: pass NULL as the last argument."
    returns = "" if kernel.workspace and not kernel.static else " Returns 0."
    text = header_text(f"{kernel.name.upper()}_H", kernel.name, kernel.params, [*doc, "", use + returns])
    define = f"#define {macro} {kernel.workspace}u\n"
    return text.replace("#include <stdint.h>\n", f"#include <stdint.h>\n\n{define}", 1)


def check_target(target: Target) -> Target:
    """``target`` if it is bare-metal, else :class:`~autosched.target.TargetError` in one line."""
    if not (target.is_cpu and target.cc is not None and is_bare_metal(target.cc, target.mtriple)):
        raise TargetError(f"--embedded needs a bare-metal target such as 'c -cc=arm-none-eabi-gcc "
                          f"-mcpu=cortex-m4 -mfloat-abi=hard', not {target}")
    return target
