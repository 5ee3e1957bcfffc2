"""The README runs as pasted: its ```python blocks, in order, as one flat script in a fresh
interpreter (each block may use what earlier ones made), and its ```bash blocks hold only real
commands (no ``[--flag]`` usage placeholders).

A block that needs what a test machine may lack is marked by an HTML comment on the line before it:
``<!-- doctest: requires NAME -->`` runs it only where NAME works (a tool of ``conftest.PROBES``,
else an importable Python module), ``<!-- doctest: skip (REASON) -->`` never runs it. Each block
left out is reported as a skipped test with its reason.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import PROBES, has_tool

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
MARK = re.compile(r"<!-- doctest: (?:skip \((?P<reason>[^)]+)\)|requires (?P<tool>[\w.-]+)) -->\Z")
LINK = re.compile(r"\]\(([^)#\s]+)[^)]*\)")


@dataclass(frozen=True)
class Block:
    """A fenced block of the README: its language, text, first line and why it is left out."""

    lang: str
    text: str
    line: int
    left_out: str | None = None


def _available(tool: str) -> bool:
    if tool in PROBES:
        return has_tool(tool)
    return importlib.util.find_spec(tool) is not None


def blocks(text: str) -> list[Block]:
    """The fenced blocks of ``text``, each with its doctest mark applied."""
    found = []
    for m in FENCE.finditer(text):
        before = text[: m.start()]
        mark = MARK.search(before.rstrip())
        left_out = None
        if mark is not None and mark.group("reason"):
            left_out = mark.group("reason")
        elif mark is not None and not _available(mark.group("tool")):
            tool = mark.group("tool")
            left_out = f"needs {tool} ({PROBES[tool][1] if tool in PROBES else f'pip install {tool}'})"
        found.append(Block(m.group(1), m.group(2), before.count("\n") + 1, left_out))
    return found


BLOCKS = blocks(README.read_text())
PYTHON = [b for b in BLOCKS if b.lang == "python"]


def test_the_marks_are_read() -> None:
    sample = "text\n<!-- doctest: skip (needs a board) -->\n```python\nx = 1\n```\n```python\ny = 2\n```\n"
    assert [b.left_out for b in blocks(sample)] == ["needs a board", None]
    absent = "<!-- doctest: requires no_such_module_here -->\n```python\nz = 3\n```\n"
    assert blocks(absent)[0].left_out == "needs no_such_module_here (pip install no_such_module_here)"


@pytest.mark.requires("gcc")
def test_the_python_blocks_run_in_order_as_one_script(tmp_path: Path) -> None:
    parts = [f"# README.md line {b.line}\n{b.text}" for b in PYTHON if b.left_out is None]
    script = tmp_path / "readme.py"
    script.write_text("\n".join(parts))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(REPO), AUTOSCHED_DB=str(tmp_path / "db"), MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, script.name], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr[-4000:]}"


@pytest.mark.parametrize("block", [b for b in PYTHON if b.left_out], ids=lambda b: f"line{b.line}")
def test_blocks_left_out(block: Block) -> None:
    pytest.skip(f"README.md line {block.line}: {block.left_out}")


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "bash"], ids=lambda b: f"line{b.line}")
def test_bash_blocks_hold_commands_not_usage(block: Block) -> None:
    assert "[--" not in block.text, f"README.md line {block.line}: a [--flag] placeholder in a command block"


def test_the_design_notes_and_every_linked_file_are_in_the_repository() -> None:
    text = README.read_text()
    assert "](DESIGN.md)" in text
    local = [t for t in LINK.findall(text) if "://" not in t]
    assert local and [t for t in local if not (REPO / t).exists() or ".." in Path(t).parts] == []
