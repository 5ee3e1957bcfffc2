"""Logs are untrusted input: crafted records never reach a shell, a Makefile or a terminal
unescaped, never choose the compiler that runs, never crash ``best`` / ``export`` / ``report`` /
``load_best`` / a resumed tuning run, and are skipped with one warning naming file and line.

The first part tests each known attack; the second feeds mutated records (hypothesis) to all of
them and watches, with an audit hook, every process started and every file written. Its example
count is ``AUTOSCHED_FUZZ_EXAMPLES`` (default 40).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import random
import shutil
import stat
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autosched.cli import main
from autosched.diagnostics import AutoschedWarning
from autosched.export.kernel import export_files, export_kernel
from autosched.export.makefile import make_words
from autosched.records import NoRecordError, Record, RecordError, RecordWarning, build_best, load_records
from autosched.runner.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autosched.search import tune
from autosched.space.generated import SketchSpace
from autosched.target import TargetError
from autosched.task import Task

ROOT = Path(__file__).resolve().parents[2]
TASK_TARGET = "c -num-threads=1"
FUZZ_EXAMPLES = int(os.environ.get("AUTOSCHED_FUZZ_EXAMPLES", "40"))


# ---------------------------------------------------------------------------------------------
# A small real log, and a compiler that must never run


@pytest.fixture(scope="module")
def task() -> Task:
    return Task("matmul", (8, 8, 8), target=TASK_TARGET)


def _records(task: Task) -> list[Record]:
    """Four valid measurements of sampled programs (the second fastest is the best) and a failure."""
    space = SketchSpace(task.workload, task.target)
    rng = random.Random(0)
    out = []
    for costs in ((3e-5, 4e-5), (1e-5, 1.2e-5, 1.1e-5), (2e-5,), (5e-5,)):
        steps = space.steps(space.sample(rng))
        result = MeasureResult(costs, all_cost=0.3, timestamp=1.8e9 + len(out))
        out.append(Record.from_measure(MeasureInput(task, steps), result, compiler="gcc (test) 12"))
    failed = MeasureResult((), MeasureErrorNo.COMPILE_ERROR, "error: boom", all_cost=0.1, timestamp=1.8e9)
    out.append(Record.from_measure(MeasureInput(task, out[0].steps), failed, compiler="gcc (test) 12"))
    return out


@pytest.fixture(scope="module")
def records(task: Task) -> list[Record]:
    return _records(task)


@pytest.fixture(scope="module")
def lines(records: list[Record]) -> list[dict[str, Any]]:
    """The records as decoded JSON objects, to mutate."""
    return [json.loads(r.to_line()) for r in records]


@pytest.fixture(scope="module")
def evil(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A 'compiler' that creates a marker file beside itself when run: (the script, the marker)."""
    where = tmp_path_factory.mktemp("evil")
    script, marker = where / "evil-cc", where / "MARKER"
    script.write_text(f'#!/bin/sh\ntouch "{marker}"\nexit 1\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, marker


def write_log(path: Path, objects: list[Any]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objects))
    return path


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``autosched ARGV`` in this process: exit status, stdout, stderr."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AutoschedWarning)  # those outside the CLI's own reporting
        status = main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def assert_clean(*texts: str) -> None:
    """No control character but newlines (no escape code) and no traceback in CLI output."""
    for text in texts:
        assert "Traceback" not in text
        text.encode("utf-8")  # no lone surrogate: a terminal could not even be written to
        bad = [ch for ch in text if (ord(ch) < 0x20 and ch != "\n") or 0x7F <= ord(ch) < 0xA0]
        assert not bad, f"raw control characters {bad!r} in {text!r}"
        assert not any(0x202A <= ord(ch) <= 0x202E or 0x2066 <= ord(ch) <= 0x2069 for ch in text)


def assert_one_form(err: str) -> None:
    """Every line on stderr is an ``autosched: warning:`` or an ``autosched: error:`` line."""
    assert all(line.startswith(("autosched: warning: ", "autosched: error: ")) for line in err.splitlines())


def make_n(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "-n", "-C", str(directory)], capture_output=True, text=True, timeout=60)


# ---------------------------------------------------------------------------------------------
# The attacks, one by one


def test_a_newline_in_the_target_never_reaches_the_makefile(
    lines: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str], records: list[Record]
) -> None:
    marker = tmp_path / "INJECTED"
    crafted = {**lines[1], "target": f"{lines[1]['target']}\nall:\n\ttouch {marker}\n#", "costs": [1e-9]}
    log = write_log(tmp_path / "log.jsonl", [lines[0], crafted])
    with pytest.warns(RecordWarning, match=r"log.jsonl:2: skipped a bad line: option 'all:' is not allowed"):
        assert len(load_records(log)) == 1
    status, out, err = run(["export", str(log), "--out", str(tmp_path / "k")], capsys)
    assert status == 0, err
    assert err.startswith("autosched: warning: ") and "log.jsonl:2: skipped a bad line" in err
    assert_clean(out, err)
    dry = make_n(tmp_path / "k")
    assert dry.returncode == 0 and str(marker) not in dry.stdout
    assert not marker.exists()

    # a record made in code (not read from a log) with such a target is refused by the exporter too
    bad = dataclasses.replace(records[1], target=crafted["target"])
    with pytest.raises(TargetError):
        export_kernel(bad, tmp_path / "k2")
    assert not (tmp_path / "k2").exists()


@pytest.mark.parametrize(
    "word", ["a\nb", "$(shell touch x)", "x#y", "a\\", "`id`", "a b", "'q'", '"q"', "a;b", ""]
)
def test_makefile_variables_hold_plain_words_only(word: str) -> None:
    with pytest.raises(ValueError, match="refusing to write"):
        make_words(["-O2", word])
    assert make_words(["-O3", "-march=native", "--target=aarch64-linux-gnu"]) == (
        "-O3 -march=native --target=aarch64-linux-gnu"
    )


@pytest.mark.parametrize(
    "flags",
    [
        "-wrapper,@EVIL@",
        "-B/tmp",
        "-fplugin=@EVIL@",
        "-specs=@EVIL@",
        "-include /etc/passwd",
        "@/tmp/response",
        "-Wl,-plugin=@EVIL@",
        "-fdump-tree-all",
        "-fprofile-generate=/tmp/x",
        "-DX=$(shell touch m)",
        "-o /tmp/elsewhere",
    ],
)
def test_compiler_flags_in_a_log_come_from_a_whitelist(
    flags: str, lines: list[dict[str, Any]], evil: tuple[Path, Path], tmp_path: Path
) -> None:
    flags = flags.replace("@EVIL@", str(evil[0]))
    crafted = {**lines[1], "target": f"{lines[1]['target']} -cflags='{flags}'"}
    log = write_log(tmp_path / "log.jsonl", [lines[0], crafted])
    with pytest.warns(RecordWarning, match=r"log.jsonl:2: skipped a bad line: .*-cflags"):
        assert len(load_records(log)) == 1


def test_ordinary_compiler_flags_in_a_log_reach_the_makefile(
    lines: list[dict[str, Any]], tmp_path: Path
) -> None:
    crafted = {**lines[1], "target": f"{lines[1]['target']} -cflags='-funroll-loops -DN=3 -mavx2 -O2'"}
    log = write_log(tmp_path / "log.jsonl", [crafted])
    (record,) = load_records(log)
    makefile = export_files(record)["Makefile"]
    assert "-funroll-loops -DN=3 -mavx2 -O2" in makefile


def test_the_log_never_chooses_the_compiler(
    lines: list[dict[str, Any]],
    task: Task,
    evil: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script, marker = evil
    crafted = [{**o, "target": o["target"].replace("-cc=gcc", f"-cc={script}")} for o in lines]
    assert all(str(script) in o["target"] for o in crafted)
    log = write_log(tmp_path / "log.jsonl", crafted)
    monkeypatch.delenv("CC", raising=False)
    for argv in (["best", str(log)], ["report", str(log), "--out", str(tmp_path / "r.png")]):
        status, out, err = run(argv, capsys)
        assert status == 0, err
        assert_clean(out, err)
    with pytest.warns(RecordWarning, match=f"names the compiler {script}, not used"):
        status = main(["export", str(log), "--out", str(tmp_path / "k")])
    assert status == 0
    makefile = (tmp_path / "k" / "Makefile").read_text()
    assert "\nCC = gcc\n" in makefile
    assert f"# the log names the compiler {script}, not used" in makefile
    assert str(script) not in makefile.split("#   make")[1]  # only in the comment at the top
    assert str(script) in (tmp_path / "k" / "kernel.h").read_text()  # documented, escaped
    # $CC is the compiler when the user names none
    monkeypatch.setenv("CC", "cc")
    with pytest.warns(RecordWarning, match="the Makefile uses cc"):
        assert "\nCC = cc\n" in export_files(load_records(log)[1])["Makefile"]
    # load_best compiles with the task's compiler: records of another compiler are not this task's
    with pytest.raises(NoRecordError):
        build_best(log, task, cache_dir=tmp_path / "cache")
    assert not marker.exists()


@pytest.mark.requires("gcc")
def test_the_log_compiler_is_never_run_even_when_building(
    lines: list[dict[str, Any]], task: Task, evil: tuple[Path, Path], tmp_path: Path
) -> None:
    script, marker = evil
    crafted = [{**o, "target": o["target"].replace("-cc=gcc", f"-cc={script}")} for o in lines]
    log = write_log(tmp_path / "log.jsonl", crafted)
    with pytest.warns(RecordWarning, match="not used"):
        assert main(["export", str(log), "--out", str(tmp_path / "k")]) == 0
    built = subprocess.run(
        ["make", "-s", "-C", str(tmp_path / "k")], capture_output=True, text=True, timeout=120,
        env={k: v for k, v in os.environ.items() if k != "CC"},
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    # a record of this very task that claims another compiler in its "compiler" field
    mine = [{**o, "compiler": str(script)} for o in lines]
    kernel = build_best(write_log(tmp_path / "mine.jsonl", mine), task, cache_dir=tmp_path / "cache")
    assert kernel is not None
    assert not marker.exists()


@pytest.mark.parametrize(
    ("costs", "why"),
    [
        ([0.0], "not a positive finite number"),
        ([-1], "not a positive finite number"),
        ([1e-9, -1e-9], "not a positive finite number"),
        (["nan"], "must be numbers of seconds, got str"),
        ([float("nan")], "not a positive finite number"),  # written as NaN, which json reads
        ([float("inf")], "not a positive finite number"),
        ([], r"a valid measurement \(NO_ERROR\) without costs"),
        ("inf", "costs must be a list"),
        (1e-6, "costs must be a list"),
        ({"a": 1}, "costs must be a list"),
        ([True], "must be numbers of seconds, got bool"),
        ([None], "must be numbers of seconds, got NoneType"),
        ([[1e-6]], "must be numbers of seconds, got list"),
        ([10**400], "out of range"),
    ],
)
def test_bad_costs_are_skipped_never_best(
    costs: Any, why: str, lines: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write_log(tmp_path / "log.jsonl", [lines[0], {**lines[1], "costs": costs}, lines[2]])
    with pytest.warns(RecordWarning, match=f"log.jsonl:2: skipped a bad line: .*{why}"):
        kept = load_records(log)
    assert [r.costs for r in kept] == [tuple(lines[0]["costs"]), tuple(lines[2]["costs"])]
    status, out, err = run(["best", str(log), "--json"], capsys)
    assert status == 0 and "log.jsonl:2: skipped a bad line" in err
    assert json.loads(out)["best_time_ms"] == pytest.approx(lines[2]["costs"][0] * 1e3)
    for argv in (
        ["export", str(log), "--out", str(tmp_path / "k")],
        ["report", str(log), "--out", str(tmp_path / "r.png")],
    ):
        status, out, err = run(argv, capsys)
        assert status == 0, err
        assert_clean(out, err)


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("all_cost", float("nan"), "all_cost nan is out of range"),
        ("all_cost", -1, "all_cost -1.0 is out of range"),
        ("timestamp", 1e300, "timestamp 1e\\+300 is out of range"),
        ("timestamp", "now", "timestamp must be a number"),
        ("error", ["NO_ERROR"], "unknown error kind"),
        ("error_msg", 5, "error_msg must be a string"),
        ("compiler", None, "compiler must be a string"),
        ("program", [1], "program must be an object"),
        ("calibration", -1e-4, "calibration -0.0001 is out of range"),
        ("calibration", float("inf"), "calibration inf is out of range"),
        ("calibration", "0.2 ms", "calibration must be a number"),
        ("calibration", True, "calibration must be a number"),
        ("steps", [{"kind": "split", "stage": "C", "axis": "i", "factor": "4", "nparts": None}], "factor"),
        ("steps", [{"kind": "split", "stage": {}, "axis": "i", "factor": 4, "nparts": None}], "stage"),
    ],
)
def test_bad_fields_are_skipped(
    field: str, value: Any, why: str, lines: list[dict[str, Any]], tmp_path: Path
) -> None:
    log = write_log(tmp_path / "log.jsonl", [lines[0], {**lines[1], field: value}])
    with pytest.warns(RecordWarning, match=f"log.jsonl:2: skipped a bad line: .*{why}"):
        assert len(load_records(log)) == 1


@pytest.mark.parametrize(
    "args",
    [
        [100000, 100000, 100000, "float32", False],  # absurd GFLOP/s, 10^10 floats to allocate
        [8.0, 8, 8, "float32", False],  # 8.0 is not the int 8
        [8, 8, 8, "float64", False],
        [8, 8, 8],  # the defaults are part of the key, but not of this list: the key is recomputed
        [True, 8, 8, "float32", False],
        [8, 8, 8, "float32", False, "extra"],
        [-8, 8, 8, "float32", False],
        [2**80, 8, 8, "float32", False],
    ],
)
def test_workload_args_must_recreate_the_key(
    args: list[Any], lines: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    crafted = {**lines[0], "workload": ["matmul", args], "costs": [1e-9]}
    log = write_log(tmp_path / "log.jsonl", [crafted, lines[2]])
    if args == [8, 8, 8]:  # the same workload, its defaults left out: the same key, a valid record
        assert len(load_records(log)) == 2
        return
    with pytest.warns(RecordWarning, match=r"log.jsonl:1: skipped a bad line: workload (key|matmul|arg)"):
        assert len(load_records(log)) == 1
    status, out, err = run(["best", str(log)], capsys)
    assert status == 0 and " 0.0200 ms " in out, out  # the valid record, not the crafted one
    assert_clean(out, err)


def test_a_sub_microsecond_best_prints_its_digits(
    lines: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write_log(tmp_path / "log.jsonl", [{**lines[0], "costs": [4.123e-7]}])
    status, out, err = run(["best", str(log)], capsys)
    assert status == 0 and " 0.000412 ms " in out, out  # not 0.0000 ms


def test_escape_codes_from_a_log_are_never_printed_raw(
    lines: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nasty = "op\x1b[2J\x1b]0;pwned\x07\r\u202e\ud800"
    unregistered = {**lines[0], "workload": [nasty, [1]], "workload_key": f"{nasty}(1)#1"}
    registered = {**lines[1], "workload_key": lines[1]["workload_key"] + "\x1b[31m"}  # a bad key
    bad_error = {**lines[2], "error": "\x1b[5mBOOM"}
    log = write_log(tmp_path / "log.jsonl", [unregistered, registered, bad_error, lines[3]])
    for argv in (
        ["best", str(log)],
        ["best", str(log), "--json"],
        ["report", str(log), "--out", str(tmp_path / "r.png")],
        ["export", str(log), "--out", str(tmp_path / "k")],  # several workloads: an error line
        ["export", str(log), "--out", str(tmp_path / "k"), "--workload", nasty],  # not registered
        ["best", str(log), "--workload", "nosuch"],
    ):
        status, out, err = run(argv, capsys)
        assert status in (0, 2)
        assert_clean(out, err)
        assert "\\x1b" in out + err
        assert_one_form(err)


def test_cpu_programs_logged_for_a_gpu_target_are_not_exported(
    lines: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write_log(tmp_path / "log.jsonl", [{**o, "target": "cuda -arch=sm_80"} for o in lines])
    status, _, err = run(["export", str(log), "--out", str(tmp_path / "k")], capsys)
    (line,) = err.strip().splitlines()  # no program binds GPU threads: none lowers to kernels
    assert status == 2 and line.startswith("autosched: error: no program of matmul(8,8,8,'float32',False)")
    assert line.endswith("can be exported (see the warnings)")
    assert not (tmp_path / "k").exists()


def test_a_best_program_that_does_not_replay_gives_way_to_the_next(
    lines: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str], task: Task
) -> None:
    broken = {
        **lines[3],
        "costs": [1e-9],
        "steps": [{"kind": "split", "stage": "NOPE", "axis": "i", "factor": 2, "nparts": None}],
    }
    log = write_log(tmp_path / "log.jsonl", [lines[0], lines[1], broken])
    passed_over = r"log.jsonl:3: passed over the best program .*no stage named 'NOPE'"
    with pytest.warns(RecordWarning, match=passed_over):
        status = main(["best", str(log), "--json"])
    assert status == 0
    out = capsys.readouterr().out
    assert json.loads(out)["best_time_ms"] == pytest.approx(1.1e-2)  # the median of lines[1]
    with pytest.warns(RecordWarning, match="passed over"):
        assert main(["export", str(log), "--out", str(tmp_path / "k")]) == 0
    assert "0.011000 ms" in (tmp_path / "k" / "kernel.h").read_text()


def test_export_refuses_a_non_empty_directory_unless_forced(
    lines: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = write_log(tmp_path / "log.jsonl", lines)
    out = tmp_path / "k"
    out.mkdir()
    (out / "precious.txt").write_text("mine")
    status, _, err = run(["export", str(log), "--out", str(out)], capsys)
    assert status == 2
    refused = f"autosched: error: {out} exists and is not an empty directory (--force to write into it)"
    assert err.strip().splitlines() == [refused]
    assert sorted(p.name for p in out.iterdir()) == ["precious.txt"]
    # a file is not a directory either
    status, _, err = run(["export", str(log), "--out", str(out / "precious.txt")], capsys)
    assert status == 2 and err.startswith("autosched: error: ")
    # --force writes into it; an empty directory needs no --force
    (out / "Makefile").symlink_to(tmp_path / "outside")  # replaced, never followed
    assert run(["export", str(log), "--out", str(out), "--force"], capsys)[0] == 0
    assert (out / "precious.txt").read_text() == "mine" and not (out / "Makefile").is_symlink()
    assert not (tmp_path / "outside").exists()
    (tmp_path / "empty").mkdir()
    assert run(["export", str(log), "--out", str(tmp_path / "empty")], capsys)[0] == 0


def test_the_command_in_a_subprocess_prints_no_traceback(
    lines: list[dict[str, Any]], evil: tuple[Path, Path], tmp_path: Path
) -> None:
    script, marker = evil
    crafted = [
        {**lines[0], "target": lines[0]["target"].replace("-cc=gcc", f"-cc={script}")},
        {**lines[1], "costs": [0.0]},
        {**lines[2], "workload": ["matmul", [10**6, 10**6, 10**6, "float32", False]]},
        {**lines[3], "workload_key": "\x1b[31mred"},
    ]
    log = write_log(tmp_path / "log.jsonl", crafted)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for argv in (["best", str(log)], ["export", str(log), "--out", str(tmp_path / "k")]):
        done = subprocess.run(
            [sys.executable, "-m", "autosched", *argv], capture_output=True, text=True, timeout=120, env=env
        )
        assert done.returncode in (0, 2), done.stderr
        assert_clean(done.stdout, done.stderr)
    assert not marker.exists()


# ---------------------------------------------------------------------------------------------
# Fuzzing: mutated records against every reader, watched by an audit hook


_AUDIT: list[tuple[str, tuple[Any, ...]]] | None = None  # events seen while watching
_SPAWNS = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty"}
_WRITES = {
    "os.rename", "os.remove", "os.rmdir", "os.mkdir", "os.symlink", "os.link", "os.chmod", "os.truncate"
}  # fmt: skip


def _audit_hook(event: str, args: tuple[Any, ...]) -> None:
    if _AUDIT is not None and (event == "open" or event in _SPAWNS or event in _WRITES):
        _AUDIT.append((event, args))


_hook_installed = False


@contextlib.contextmanager
def watched() -> Iterator[list[tuple[str, tuple[Any, ...]]]]:
    """The processes started and the files opened or changed inside the block (audit events)."""
    global _AUDIT, _hook_installed
    if not _hook_installed:
        sys.addaudithook(_audit_hook)
        _hook_installed = True
    _AUDIT = events = []
    try:
        yield events
    finally:
        _AUDIT = None


def _is_write(event: str, args: tuple[Any, ...]) -> bool:
    if event != "open":
        return True
    _, mode, flags = args
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC))


def _paths(event: str, args: tuple[Any, ...]) -> list[str]:
    paths = args[:2] if event in ("os.rename", "os.link", "os.symlink") else args[:1]
    return [os.fsdecode(p) for p in paths if isinstance(p, (str, bytes, os.PathLike))]


def _inside(path: str, roots: list[Path]) -> bool:
    real = os.path.realpath(path)
    return any(real == str(r) or real.startswith(str(r) + os.sep) for r in roots)


def _compiler_scratch(path: str) -> bool:
    """Whether ``path`` is in a compiler's private temporary directory (``TMPDIR/autosched-cc-*``,
    made for one compile and removed after it: gcc's ``.s`` files between its stages)."""
    real = Path(os.path.realpath(path))
    tmp = Path(os.path.realpath(tempfile.gettempdir()))
    return any(p.parent == tmp and p.name.startswith("autosched-cc-") for p in (real, *real.parents))


class _NoMeasuring:
    """A builder and runner for a resumed run that must measure nothing."""

    def __getattr__(self, name: str) -> Any:
        # what tune probes with getattr (optional capabilities of a runner) is simply absent
        optional = ("close", "compiler_version", "emit_time", "make_builder", "machine", "run_each")
        if name.startswith("__") or name in optional:
            raise AttributeError(name)
        raise AssertionError(f"a resumed run with no time budget measured something ({name})")


EVIL_TEXTS = [
    "c -cc=@EVIL@ -num-threads=1",
    "c -num-threads=1 -cflags='-wrapper,@EVIL@'",
    "c -num-threads=1 -cflags=-B@DIR@",
    "c -num-threads=1\nall:\n\ttouch @MARK@",
    "$(shell touch @MARK@)",
    "`touch @MARK@`",
    "; touch @MARK@ #",
    "\x1b[2J\x1b[31m",
    "\u202eevil",
    "\ud800",
    "a\u2028b",
    "*/ int evil; /*",
    "??/",
    "\\",
    "#",
    "",
    "matmul",
    "NO_ERROR",
    "COMPILE_ERROR",
    "C",
    "i",
    "local",
    "vectorize",
    "split",
    "nan",
    "-1",
    "a" * 5000,
]
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 8, 2**31, 2**63, 10**400]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-320, 1e308, 1e-9, 1e-5]),
    st.sampled_from(EVIL_TEXTS),
    st.text(max_size=12),
)
NASTY = st.one_of(
    _SCALARS,
    st.lists(_SCALARS, max_size=4),
    st.dictionaries(st.sampled_from(["kind", "stage", "axis", "factor", "x", "a"]), _SCALARS, max_size=3),
)
TOP_KEYS = ["v", "autosched", "workload", "workload_key", "target", "compiler", "steps", "costs",
            "error", "error_msg", "all_cost", "timestamp", "program", "calibration"]  # fmt: skip


def _mutate(data: st.DataObject, obj: Any) -> None:
    """Change one place of ``obj`` (a record), at the top or nested inside, in place."""
    if not isinstance(obj, dict):
        return
    container: Any = obj
    key: Any = data.draw(st.sampled_from(TOP_KEYS))
    while True:
        inner = container.get(key) if isinstance(container, dict) else container[key]
        if not isinstance(inner, (list, dict)) or not inner or not data.draw(st.booleans()):
            break
        container = inner
        if isinstance(inner, dict):
            key = data.draw(st.sampled_from(sorted(inner)))
        else:
            key = data.draw(st.integers(0, len(inner) - 1))
    action = data.draw(st.sampled_from(["set", "set", "set", "delete"]))
    if action == "delete":
        if isinstance(container, dict):
            container.pop(key, None)
        elif container:
            del container[key]
    else:
        container[key] = data.draw(NASTY)


@pytest.mark.requires("gcc")  # the configured compiler may run (compiler --version, export builds)
@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_fuzz_mutated_records(data: st.DataObject) -> None:
    task, base, fuzz_dir = _FUZZ["task"], _FUZZ["lines"], _FUZZ["dir"]
    script, marker = _FUZZ["script"], _FUZZ["marker"]
    objects: list[Any] = json.loads(json.dumps(base))
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["field", "field", "field", "duplicate", "garbage"]))
        i = data.draw(st.integers(0, len(objects) - 1))
        if kind == "field":
            _mutate(data, objects[i])
        elif kind == "duplicate":
            objects.insert(i, json.loads(json.dumps(objects[i])))
        else:
            objects.insert(i, data.draw(NASTY))
    work = Path(tempfile.mkdtemp(dir=fuzz_dir))
    out = work / "out"
    out.mkdir()
    cache = Path(os.environ["AUTOSCHED_CACHE"])
    text = "".join(json.dumps(o) + "\n" for o in objects)
    for placeholder, path in (("@EVIL@", script), ("@MARK@", marker), ("@DIR@", script.parent)):
        text = text.replace(placeholder, str(path))
    if data.draw(st.booleans()):
        text = text[: data.draw(st.integers(0, len(text)))]  # a truncated log
    log = work / "log.jsonl"
    log.write_text(text)
    before = sorted(p for p in work.rglob("*") if out not in p.parents and p != out)

    commands = [
        ["best", str(log)],
        ["best", str(log), "--json"],
        ["export", str(log), "--out", str(out / "export"), "--workload", "matmul"],
        ["report", str(log), "--out", str(out / "report.png")],
    ]
    with watched() as events, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for argv in commands:
            stdout, stderr = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                status = main(argv)
            err = stderr.getvalue()
            assert status in (0, 2), (argv, err)
            assert_clean(stdout.getvalue(), err)
            assert_one_form(err)
            if status == 2:
                assert err.splitlines()[-1].startswith("autosched: error: ")
        with contextlib.suppress(NoRecordError, RecordError):
            build_best(log, task)
        try:
            # resume and stop before measuring anything: a time budget of 0 s
            nothing = _NoMeasuring()
            result = tune(task, trials=10**6, log=log, timeout=0, builder=nothing, runner=nothing)  # type: ignore[arg-type]
            assert result.best_time_ms is None or 0 < result.best_time_ms < float("inf")
        except RecordError:
            pass
    for w in caught:
        assert issubclass(w.category, AutoschedWarning), w
        assert_clean(str(w.message))

    assert any(event == "open" for event, _ in events), "the audit hook saw nothing"
    gcc = {"gcc", shutil.which("gcc")}
    for event, args in events:
        if event in _SPAWNS:
            program = args[0] if event != "subprocess.Popen" else (args[0] or args[1][0])
            program = program if isinstance(program, str) else os.fsdecode(program)
            assert program in gcc, f"{event} started {program!r}: only the configured compiler may run"
        elif _is_write(event, args):
            for path in _paths(event, args):
                # the resumed run may append to its own log (and lock it), the compiler use its private
                # TMPDIR; nothing else
                own_log = os.path.realpath(path) == str(log.resolve())
                roots = [out.resolve(), cache.resolve()]
                allowed = own_log or _compiler_scratch(path) or _inside(path, roots)
                assert "__pycache__" in path or allowed, (
                    f"{event} wrote {path} outside the output directory"
                )
    after = sorted(p for p in work.rglob("*") if out not in p.parents and p != out)
    assert after == before, "files appeared outside the output directory"
    assert not marker.exists(), "the log's compiler ran"
    shutil.rmtree(work)


#: what the fuzz test needs from fixtures (hypothesis tests take no function-scoped fixtures)
_FUZZ: dict[str, Any] = {}


@pytest.fixture(autouse=True, scope="module")
def _fuzz_setup(
    task: Task, lines: list[dict[str, Any]], evil: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    _FUZZ.update(task=task, lines=lines, script=evil[0], marker=evil[1], dir=tmp_path_factory.mktemp("fuzz"))
    # warm up what a first run writes (bytecode, matplotlib's font cache), outside the watch
    warm = _FUZZ["dir"] / "warm"
    warm.mkdir()
    log = write_log(warm / "log.jsonl", lines)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(["report", str(log), "--out", str(warm / "r.png")])
        main(["export", str(log), "--out", str(warm / "k")])
    yield
