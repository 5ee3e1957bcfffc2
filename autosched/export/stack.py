"""The stack a bare-metal program needs: the deepest path through gcc's call graph, each function's
frame as gcc measured it (``-fcallgraph-info=su`` writes one ``.ci`` file per object, in VCG text).

A function defined in none of the files read (newlib's ``expf``, ``memset``) has no measured frame:
the figure leaves it out and says so. A frame of dynamic size (a variable-length array) or a
recursive call makes the depth unbounded, which the figure says too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_NODE = re.compile(r'^node: \{ title: "([^"]+)" label: "([^"]*)"', re.MULTILINE)
_EDGE = re.compile(r'^edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"', re.MULTILINE)
#: the frame in a defined function's label: "<name>\n<file:line:col>\n<N> bytes (<qualifier>)"
_FRAME = re.compile(r"\\n(\d+) bytes \(([a-z,]+)\)$")


@dataclass(frozen=True, slots=True)
class StackUse:
    """The deepest call path of a program: its frames' bytes summed, the functions on it (caller
    first), the functions called that no file defines (their frames not counted), and whether every
    frame on every path is bounded and no call recurses."""

    bytes: int
    path: tuple[str, ...]
    uncounted: tuple[str, ...] = ()
    bounded: bool = True

    def text(self) -> str:
        """E.g. ``1872 B (model_run > k3; not counted: expf, memset)``."""
        notes = [" > ".join(self.path)] if self.path else []
        if self.uncounted:
            notes.append(f"not counted: {', '.join(self.uncounted)}")
        if not self.bounded:
            notes.append("unbounded: a frame of dynamic size or a recursive call")
        return f"{self.bytes} B" + (f" ({'; '.join(notes)})" if notes else "")


def read_call_graph(files: Iterable[Path]) -> tuple[dict[str, tuple[int, bool]], dict[str, set[str]]]:
    """(frames, calls) of the ``.ci`` files: each defined function's frame bytes and whether its
    size is bounded, and the functions each one calls."""
    frames: dict[str, tuple[int, bool]] = {}
    calls: dict[str, set[str]] = {}
    for path in files:
        text = path.read_text()
        for name, label in _NODE.findall(text):
            found = _FRAME.search(label)
            if found is not None:
                frames[name] = (int(found.group(1)), found.group(2) != "dynamic")
        for caller, callee in _EDGE.findall(text):
            calls.setdefault(caller, set()).add(callee)
    return frames, calls


def deepest_path(frames: dict[str, tuple[int, bool]], calls: dict[str, set[str]]) -> StackUse:
    """The deepest path from any defined function (see :class:`StackUse`)."""
    depth: dict[str, tuple[int, tuple[str, ...]]] = {}
    uncounted: set[str] = set()
    bounded = all(ok for _, ok in frames.values())
    visiting: set[str] = set()

    def walk(fn: str) -> tuple[int, tuple[str, ...]]:
        nonlocal bounded
        if fn in depth:
            return depth[fn]
        if fn not in frames:
            uncounted.add(fn)
            return 0, ()
        if fn in visiting:  # recursion: the depth has no bound
            bounded = False
            return 0, ()
        visiting.add(fn)
        below = max((walk(callee) for callee in sorted(calls.get(fn, ()))), default=(0, ()))
        visiting.discard(fn)
        depth[fn] = (frames[fn][0] + below[0], (fn, *below[1]))
        return depth[fn]

    best = max((walk(fn) for fn in sorted(frames)), default=(0, ()))
    return StackUse(best[0], best[1], tuple(sorted(uncounted)), bounded)


def stack_use(files: Iterable[Path]) -> StackUse:
    """The deepest call path of the program whose ``.ci`` files are ``files``."""
    return deepest_path(*read_call_graph(files))
