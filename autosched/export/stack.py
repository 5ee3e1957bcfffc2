"""The stack a bare-metal program needs: the deepest path through gcc's call graph, each function's
frame as gcc measured it (``-fcallgraph-info=su`` writes one ``.ci`` file per object, in VCG text).
clang writes no call graph: its frames come from ``-fstack-usage`` (a ``.su`` file per object) and
its calls from the objects' call and tail-call relocations (``objdump -dr``); a static function
defined in two objects under one name counts with the larger frame.

A function defined in none of the files read (newlib's ``expf``, ``memset``) has no measured frame:
the figure leaves it out and says so. A frame of dynamic size (a variable-length array) or a
recursive call makes the depth unbounded, which the figure says too.
"""

from __future__ import annotations

import re
import subprocess
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


_SU = re.compile(r"^[^\t]*:([^:\t]+)\t(\d+)\t([a-z,]+)$", re.MULTILINE)
_FUNCTION = re.compile(r"^[0-9a-f]+ <([^>]+)>:$")
_CALL = re.compile(r"\sR_ARM_THM_(?:CALL|JUMP24|JUMP19|JUMP11)\s+(\S+)$")


def read_objects(
    objects: Iterable[Path], objdump: str
) -> tuple[dict[str, tuple[int, bool]], dict[str, set[str]]]:
    """(frames, calls) as :func:`read_call_graph` gives them, from each object's ``.su`` file
    (``-fstack-usage``) and its call relocations read by ``objdump``."""
    frames: dict[str, tuple[int, bool]] = {}
    calls: dict[str, set[str]] = {}
    for obj in objects:
        su = obj.with_suffix(".su")  # clang writes none for an object without functions
        for name, size, kind in _SU.findall(su.read_text() if su.exists() else ""):
            known = frames.get(name, (0, True))
            frames[name] = (max(known[0], int(size)), known[1] and kind != "dynamic")
        command = [objdump, "-dr", "--no-show-raw-insn", str(obj)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
        current = None
        for line in done.stdout.splitlines():
            head = _FUNCTION.match(line)
            if head is not None:
                current = head.group(1)
            elif current is not None and (call := _CALL.search(line)) is not None:
                calls.setdefault(current, set()).add(call.group(1))
    return frames, calls


def stack_use(files: Iterable[Path]) -> StackUse:
    """The deepest call path of the program whose ``.ci`` files are ``files``."""
    return deepest_path(*read_call_graph(files))
