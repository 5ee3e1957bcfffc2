"""The package's layout: autosched's modules import one another without cycles, no function hides
an import of an autosched module, and files stay small enough to read.

The import graph is read from the source with ``ast``: an edge for every module-level import of an
autosched module (imports under ``if TYPE_CHECKING:`` are for annotations and do not run). As at
run time, importing ``autosched.a.b`` also imports the package ``autosched.a`` unless the importer
is inside it already, and importing a *name* from an enclosing package's ``__init__`` (``from .
import x`` where ``x`` is not a submodule) depends on that ``__init__``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "autosched"

#: Optional third-party packages, imported where they are used so that ``import autosched`` needs
#: only numpy and cffi (DESIGN.md, "Optional parts are optional").
OPTIONAL_PACKAGES = {
    "xgboost",
    "sklearn",
    "matplotlib",
    "pycuda",
    "pyopencl",
    "cuda",
    "threadpoolctl",
    "torch",
    "onnx",
    "onnxruntime",
    "distributed",
    "dask",
}

#: (file, module) of lazy imports of autosched modules inside functions, each with its reason.
#: None today: ``import autosched`` loads every stage anyway, so a lazy import saves nothing and
#: would only hide a cycle. Add one only for a module that is heavy *and* not loaded by
#: ``autosched/__init__.py``, and say so here.
LAZY_IMPORTS: dict[tuple[str, str], str] = {}

MAX_LINES = 450

#: Files over MAX_LINES today, with the reason; the list may only shrink (a file that gets under
#: the limit must leave it).
LONG_FILES: dict[str, str] = {}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def ancestors(name: str) -> list[str]:
    """The packages above module ``name`` (``autosched.a.b`` -> ``autosched``, ``autosched.a``)."""
    parts = name.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts))]


@dataclass(frozen=True)
class Import:
    importer: str
    target: str
    line: int
    text: str
    in_function: bool


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST, in_function: bool = False) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Import statements under ``node`` that run (not under ``if TYPE_CHECKING:``)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, in_function
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                yield from _imports(ast.Module(body=[other], type_ignores=[]), in_function)
        else:
            func = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            yield from _imports(child, in_function or func)


def _targets(module: str, stmt: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The modules ``stmt`` (in ``module``) names: an autosched module, or a third-party top name."""
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            yield alias.name
        return
    if stmt.level:
        package = module if is_package(module) else module.rpartition(".")[0]
        parts = package.split(".")
        base = ".".join(parts[: len(parts) - stmt.level + 1] + ([stmt.module] if stmt.module else []))
    else:
        base = stmt.module or ""
    for alias in stmt.names:
        sub = f"{base}.{alias.name}"
        yield sub if sub in MODULES else base


def all_imports() -> list[Import]:
    out: dict[Import, None] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        for stmt, in_function in _imports(tree):
            for target in _targets(module, stmt):
                out[Import(module, target, stmt.lineno, ast.unparse(stmt), in_function)] = None
    return list(out)


def import_graph() -> dict[str, set[str]]:
    """Module -> the autosched modules that importing it runs (module-level imports only)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in all_imports():
        if imp.in_function or imp.target.split(".")[0] != "autosched":
            continue
        assert imp.target in MODULES, f"{imp.importer}:{imp.line}: no module {imp.target}: {imp.text}"
        mine = {*ancestors(imp.importer), imp.importer}  # being imported already
        if imp.target in mine:  # a name from the __init__ of a package being imported
            graph[imp.importer].add(imp.target)
            continue
        graph[imp.importer].add(imp.target)
        graph[imp.importer].update(p for p in ancestors(imp.target) if p not in mine)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_the_graph_is_read_as_python_runs_imports() -> None:
    graph = import_graph()
    assert "autosched.schedule.steps" in graph["autosched.records.io"]
    assert "autosched.schedule" in graph["autosched.records.io"]  # the package runs first
    assert "autosched.te.nodes" in graph["autosched.te.traverse"]
    assert "autosched.te" not in graph["autosched.te.traverse"]  # its own package: already running
    assert "autosched.te.tensor" not in graph["autosched.te.nodes"]  # under TYPE_CHECKING
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_module_level_imports_have_no_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_function_local_imports_but_optional_packages() -> None:
    bad = []
    for imp in all_imports():
        if not imp.in_function:
            continue
        top = imp.target.split(".")[0]
        path = str(MODULES[imp.importer].relative_to(ROOT))
        if top in OPTIONAL_PACKAGES or (path, imp.target) in LAZY_IMPORTS:
            continue
        bad.append(f"{path}:{imp.line}: {imp.text}")
    assert not bad, "imports inside functions (move them to the top of the module):\n" + "\n".join(bad)


def test_lazy_import_allow_list_is_current() -> None:
    local = {
        (str(MODULES[i.importer].relative_to(ROOT)), i.target) for i in all_imports() if i.in_function
    }
    assert not set(LAZY_IMPORTS) - local, "allow-listed lazy imports that no longer exist"


def test_files_stay_small() -> None:
    lengths = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in MODULES.values()}
    long = {p for p, n in lengths.items() if n >= MAX_LINES}
    assert long <= set(LONG_FILES), f"files of {MAX_LINES} lines or more: {sorted(long - set(LONG_FILES))}"
    assert set(LONG_FILES) <= long, f"now short, remove from LONG_FILES: {sorted(set(LONG_FILES) - long)}"


IMPORT_ALL = """
import importlib, sys
import autosched
for name in sys.argv[2:]:
    importlib.import_module(name)
elsewhere = sorted(
    n for n, m in sys.modules.items()
    if n.split(".")[0] == "autosched" and not (getattr(m, "__file__", "") or "").startswith(sys.argv[1])
)
print("\\n".join(elsewhere))
"""


def test_cold_import_loads_every_module_from_this_tree() -> None:
    """``import autosched`` in a fresh interpreter, then every module; none comes from another copy
    of autosched (an installed one would hide a module that a move left behind)."""
    names = [m for m in MODULES if m.split(".")[-1] != "__main__"]
    proc = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL, str(PACKAGE), *names],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "", f"modules loaded from elsewhere:\n{proc.stdout}"


#: The floors of the package, lowest first: a package or top-level module imports only from its own
#: floor or below (README, "Layout"). Every top-level name of ``autosched`` stands on one floor.
LAYERS: list[set[str]] = [
    {"version", "diagnostics", "dtypes", "hardware", "memory", "vector_lanes", "thread_pools"},
    {"target"},
    {"te", "expr"},
    {"schedule", "reference_ops", "reference", "flops", "contrib", "intrin"},
    {"ops"},
    {"lower"},
    {"emit_c", "emit_cuda", "emit_opencl"},
    {"runner"},
    {"backends"},
    {"task", "driver"},
    {"records"},
    {"database"},
    {"boards"},
    {"cluster"},
    {"space"},
    {"model"},
    {"search"},
    {"graph"},
    {"export"},
    {"cli"},
]

#: (importer, imported) modules of imports that run back up the floors, each with its reason; at
#: most 2, and the list may only shrink. Imports under ``if TYPE_CHECKING:`` count here: they do
#: not run, but they are a dependency a reader has to know of all the same.
UPWARD_IMPORTS: dict[tuple[str, str], str] = {
    ("autosched.runner.measure", "autosched.task"): (
        "MeasureInput carries the Task it measures; an annotation only (under TYPE_CHECKING)"
    ),
    ("autosched.runner.local_runner", "autosched.task"): (
        "task_data() makes a measured Task's inputs; an annotation only (under TYPE_CHECKING)"
    ),
}


def floor_of(module: str) -> int | None:
    """The index in LAYERS of ``module``'s top-level package or module (None: ``autosched`` itself
    and ``__main__``, which stand above everything)."""
    top = module.split(".")[1] if "." in module else ""
    for n, layer in enumerate(LAYERS):
        if top in layer:
            return n
    return None


def every_import() -> Iterator[tuple[str, str, int]]:
    """(importer, imported autosched module, line) of every import statement, annotation-only ones
    included (function-local ones are refused by another test)."""
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(module, node):
                    if target.split(".")[0] == "autosched":
                        yield module, target, node.lineno


def test_every_top_level_name_stands_on_one_floor() -> None:
    tops = {m.split(".")[1] for m in MODULES if "." in m} - {"__main__"}
    placed = [name for layer in LAYERS for name in layer]
    assert len(placed) == len(set(placed)), "a name stands on two floors of LAYERS"
    unplaced, gone = sorted(tops - set(placed)), sorted(set(placed) - tops)
    assert not unplaced, f"place these in LAYERS (tests/test_layout.py) and the README's layout: {unplaced}"
    assert not gone, f"gone from autosched, remove from LAYERS: {gone}"


def test_imports_run_down_the_floors() -> None:
    upward = {}
    for importer, target, line in every_import():
        low, high = floor_of(importer), floor_of(target)
        if low is not None and high is not None and high > low:
            upward[(importer, target)] = f"{MODULES[importer].relative_to(ROOT)}:{line} imports {target}"
    assert len(UPWARD_IMPORTS) <= 2, "at most 2 imports may run back up the floors"
    new = [text for pair, text in sorted(upward.items()) if pair not in UPWARD_IMPORTS]
    why = "imports that run back up the floors (move the code down, or the importer up):\n"
    assert not new, why + "\n".join(new)
    assert set(UPWARD_IMPORTS) <= set(upward), (
        f"no longer upward, remove from UPWARD_IMPORTS: {sorted(set(UPWARD_IMPORTS) - set(upward))}"
    )


def test_the_floor_check_sees_an_upward_import() -> None:
    runner, task = floor_of("autosched.runner.measure"), floor_of("autosched.task")
    assert runner is not None and task is not None and runner == floor_of("autosched.runner") < task
    assert floor_of("autosched") is None and floor_of("autosched.cli.db") == len(LAYERS) - 1
    pairs = {(a, b) for a, b, _ in every_import()}
    assert ("autosched.runner.measure", "autosched.task") in pairs  # under TYPE_CHECKING: still read


def test_test_folders_mirror_the_packages() -> None:
    """``tests/<package>/`` holds the tests of ``autosched/<package>/``: every test folder names a
    package, and only the tests of the whole (and conftest and the shared helpers) stay on top."""
    tests = ROOT / "tests"
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    folders = {p.name for p in tests.iterdir() if p.is_dir() and p.name not in ("data", "__pycache__")}
    assert folders <= packages, f"test folders that name no package: {sorted(folders - packages)}"
    on_top = {p.name for p in tests.glob("test_*.py")}
    assert on_top == {"test_layout.py", "test_readme.py", "test_tiers.py", "test_embedding.py",
                      "test_build_api.py"}, f"put these under tests/<package>/: {sorted(on_top)}"
