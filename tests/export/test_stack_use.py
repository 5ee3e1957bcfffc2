"""The stack figure of an embedded export: the deepest call path through gcc's call graph
(``-fcallgraph-info=su``), each frame as gcc measured it, across files (clang's from its
``-fstack-usage`` frames and call relocations); what it cannot count (functions of the C library,
dynamic frames, recursion) named, not hidden."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from autosched.backends.c.microcontroller import newlib_include
from autosched.export.stack import StackUse, deepest_path, read_objects, stack_use

CFLAGS = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-O2", "-fcallgraph-info=su"]


def _compile(tmp_path: Path, sources: dict[str, str]) -> list[Path]:
    for name, text in sources.items():
        (tmp_path / name).write_text(text)
        obj = name[:-2] + ".o"
        subprocess.run(["arm-none-eabi-gcc", *CFLAGS, "-c", name, "-o", obj], cwd=tmp_path, check=True,
                       capture_output=True, timeout=120)
    return [tmp_path / (name[:-2] + ".ci") for name in sources]


def _frames(tmp_path: Path, *names: str) -> dict[str, int]:
    """Each function's frame as gcc's -fstack-usage reports it (the figure the path must add up)."""
    out = {}
    for name in names:
        subprocess.run(["arm-none-eabi-gcc", *CFLAGS[:-1], "-fstack-usage", "-c", name, "-o", "/dev/null"],
                       cwd=tmp_path, check=True, capture_output=True, timeout=120)
        for line in (tmp_path / (name[:-2] + ".su")).read_text().splitlines():
            where, size, _ = line.split("\t")
            out[where.rsplit(":", 1)[-1]] = int(size)
    return out


LEAF = """#include <math.h>
float leaf(const float* x, int n) {
  volatile float buf[64];
  for (int i = 0; i < 64; ++i) buf[i] = x[i % n];
  float s = 0.0f;
  for (int i = 0; i < 64; ++i) s += expf(buf[i]);
  return s;
}
int shallow(int n) { volatile int b[4]; b[0] = n; return b[0]; }
"""
MIDDLE = """float leaf(const float* x, int n);
int shallow(int n);
int middle(const float* x, int n) {
  volatile float b[16];
  b[n & 15] = leaf(x, n);
  return (int)b[3] + shallow(n);
}
"""
TOP = """int middle(const float* x, int n);
int shallow(int n);
int model_run(const float* x) {
  volatile char pad[100];
  pad[0] = 1;
  return middle(x, 4) + shallow(2) + pad[0];
}
"""


@pytest.mark.requires("arm-none-eabi-gcc")
def test_the_deepest_path_adds_the_frames_across_files(tmp_path: Path) -> None:
    use = stack_use(_compile(tmp_path, {"leaf.c": LEAF, "middle.c": MIDDLE, "top.c": TOP}))
    frames = _frames(tmp_path, "leaf.c", "middle.c", "top.c")
    assert use.path == ("model_run", "middle", "leaf")
    assert use.bytes == frames["model_run"] + frames["middle"] + frames["leaf"]
    assert use.bytes > max(frames.values())  # more than the deepest frame alone (the old figure)
    assert use.uncounted == ("expf",) and use.bounded
    assert use.text() == f"{use.bytes} B (model_run > middle > leaf; not counted: expf)"


@pytest.mark.requires("arm-none-eabi-gcc")
def test_a_dynamic_frame_and_recursion_make_the_figure_unbounded(tmp_path: Path) -> None:
    vla = "int f(int n) { volatile char b[n]; b[0] = 1; return b[0]; }\n"
    assert not stack_use(_compile(tmp_path, {"vla.c": vla})).bounded
    rec = "int g(int n) { volatile int b[8]; b[0] = n; return n > 1 ? g(n - 1) * g(n - 2) + b[0] : 1; }\n"
    use = stack_use(_compile(tmp_path, {"rec.c": rec}))
    assert not use.bounded and "unbounded" in use.text()


def test_the_path_is_read_from_the_call_graph_alone() -> None:
    frames = {"a": (10, True), "b": (20, True), "c": (5, True), "d": (40, True)}
    calls = {"a": {"b", "c"}, "b": {"memset"}, "c": {"d"}}
    assert deepest_path(frames, calls) == StackUse(55, ("a", "c", "d"), ("memset",), True)
    assert deepest_path({}, {}) == StackUse(0, (), (), True)


CLANG = ["clang", "--target=thumbv7em-none-eabi", "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-O2",
         "-fstack-usage", "-fno-inline"]


@pytest.mark.requires("clang", "arm-none-eabi-gcc")
def test_clang_frames_and_calls_come_from_its_stack_usage_and_relocations(tmp_path: Path) -> None:
    """clang writes no call graph: the same three files, built by clang, give the same path from
    its -fstack-usage frames and the objects' call relocations; a file without functions adds none."""
    sources = {"leaf.c": LEAF, "middle.c": MIDDLE, "top.c": TOP, "data.c": "const float w[2] = {1, 2};\n"}
    objects = []
    for name, text in sources.items():
        (tmp_path / name).write_text(text)
        command = [*CLANG, "-isystem", newlib_include(), "-c", name, "-o", name[:-2] + ".o"]
        subprocess.run(command, cwd=tmp_path, check=True, capture_output=True, timeout=120)
        objects.append(tmp_path / (name[:-2] + ".o"))
    frames, calls = read_objects(objects, "arm-none-eabi-objdump")
    assert calls["model_run"] == {"middle", "shallow"} and calls["middle"] == {"leaf", "shallow"}
    use = deepest_path(frames, calls)
    assert use.path == ("model_run", "middle", "leaf") and use.uncounted == ("expf",) and use.bounded
    assert use.bytes == frames["model_run"][0] + frames["middle"][0] + frames["leaf"][0] > 256  # buf[64]
