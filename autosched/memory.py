"""Sizes that cannot fit: tensors refused before any work when this machine's memory cannot hold them.

A task's arguments are arrays here (inputs are made and outputs checked on this machine, whatever
the target: a GPU's or a board's buffers are copies of them), so a task whose tensors take more
than this machine's physical memory can never be measured: :class:`~autosched.task.Task` refuses it
(:func:`tensors_problem`). A network keeps its inputs and weights for as long as it runs and makes
each value beside them: :class:`Footprint` counts that much as a graph is built, and the graph
builder refuses a value the memory cannot hold beside them.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Sequence

__all__ = ["Footprint", "format_bytes", "memory_bytes", "tensors_problem"]


@functools.cache
def memory_bytes() -> int:
    """This machine's physical memory in bytes (``SC_PHYS_PAGES`` pages of ``SC_PAGE_SIZE``;
    2**40 where the system does not say)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return 1 << 40


def format_bytes(n: float) -> str:
    """``n`` bytes in binary units, three digits: ``512 B``, ``23.4 GiB``, ``6.94 EiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024:
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} EiB"


def tensors_problem(what: str, tensors: Sequence[tuple[str, tuple[int, ...], int]]) -> str | None:
    """Why ``what`` cannot run here: its ``tensors`` (name, shape, bytes per element) take more than
    this machine's memory (the largest three named); None when they fit."""
    sizes = sorted(((math.prod(shape) * size, name, shape) for name, shape, size in tensors), reverse=True)
    need, have = sum(s for s, _, _ in sizes), memory_bytes()
    if need <= have:
        return None
    parts = [f"{name} {shape}: {format_bytes(s)}" for s, name, shape in sizes[:3]]
    if len(sizes) > 3:
        parts.append(f"{len(sizes) - 3} more")
    return (f"{what} would take {format_bytes(need)} for its tensors ({', '.join(parts)}), more than this "
            f"machine's memory ({format_bytes(have)}); use smaller sizes")


class Footprint:
    """The least memory a graph takes while it runs: its inputs and constants, which stay, and the
    value being made beside them. :meth:`add` says why a value cannot fit (None if it fits)."""

    def __init__(self) -> None:
        self.lasting = 0  # bytes of the inputs and constants so far

    def add(
        self, what: str, shape: Sequence[int], itemsize: int, *, lasting: bool, view: bool = False
    ) -> str | None:
        """Count the value ``what`` of ``shape`` (``itemsize`` bytes an element): ``lasting`` for
        an input or a constant, ``view`` for a value that shares another's memory (a reshape)."""
        shape = tuple(int(d) for d in shape)
        size, have = math.prod(shape) * itemsize, memory_bytes()
        memory = f"more than this machine's memory ({format_bytes(have)})"
        if size > have:
            return f"{what} of shape {shape} would take {format_bytes(size)}, {memory}"
        total = self.lasting + (0 if view else size)
        if total > have:
            return (f"{what} of shape {shape} ({format_bytes(size)}) would take {format_bytes(total)} with "
                    f"the graph's inputs and constants, {memory}")
        if lasting:
            self.lasting += size
        return None
