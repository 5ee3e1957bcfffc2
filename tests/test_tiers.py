"""The fast and slow test tiers: the slow list names real tests, and the picker keeps every file
in the fast tier within its budget."""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

TESTS = Path(__file__).parent
PICKER = TESTS.parent / "scripts" / "pick-slow-tests"


def _picker() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("pick_slow_tests", str(PICKER))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_slow_entry_names_a_test_function_that_exists() -> None:
    lines = (TESTS / "slow_tests.txt").read_text().splitlines()
    entries = [line for line in lines if line.strip() and not line.startswith("#")]
    assert entries, "the slow tier is empty: regenerate it with scripts/pick-slow-tests"
    files = {p.name: p for p in TESTS.rglob("test_*.py")}
    for entry in entries:
        name, _, function = entry.partition("::")
        assert name in files, f"{entry}: no test file {name}"
        assert function in _functions(files[name]), f"{entry}: no function {function} in {name}"


def test_the_picker_keeps_each_files_cheapest_function_and_the_budget(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    cases = [("tests.test_a", "test_fast", 1.0), ("tests.test_a", "test_slow[x]", 50.0),
             ("tests.test_a", "test_slow[y]", 50.0), ("tests.test_b", "test_only", 30.0),
             ("tests.test_b", "test_mid", 35.0), ("tests.test_c", "test_small", 2.0)]
    rows = "".join(f'<testcase classname="{c}" name="{n}" time="{t}"/>' for c, n, t in cases)
    junit.write_text(f"<testsuites><testsuite>{rows}</testsuite></testsuites>")
    picker = _picker()
    times = picker.function_times(junit)
    assert times["test_a.py::test_slow"] == pytest.approx(100.0)
    # the cheapest of every file is fast (33 s); test_mid would pass a 40 s budget, test_slow too
    assert picker.pick_slow(times, 40.0) == ["test_a.py::test_slow", "test_b.py::test_mid"]
    assert picker.pick_slow(times, 70.0) == ["test_a.py::test_slow"]
    assert picker.pick_slow(times, 0.0) == ["test_a.py::test_slow", "test_b.py::test_mid"]


def test_the_slow_marker_selects_the_listed_functions_only() -> None:
    entries = [line for line in (TESTS / "slow_tests.txt").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    name, _, function = entries[0].partition("::")
    path = next(TESTS.rglob(name))

    def collected(expression: str) -> set[str]:
        command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                   "-m", expression, str(path)]
        out = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=TESTS.parent)
        return {line.split("::")[1].split("[")[0] for line in out.stdout.splitlines() if "::" in line}

    slow, fast = collected("slow"), collected("not slow")
    listed = {e.partition("::")[2] for e in entries if e.startswith(name + "::")}
    assert function in slow and slow == listed and not slow & fast
