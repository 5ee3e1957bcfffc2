"""The kernel cache loads only what autosched built: a private folder, and each library's sha256
recorded at build time. A planted library is a real one (gcc) whose constructor writes a marker
file: the marker proves whether it was ever loaded."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.cluster.work import Measurement, measure_on_worker
from autosched.diagnostics import AutoschedWarning
from autosched.runner import LocalRunner, MeasureErrorNo, MeasureOption
from autosched.runner.cache_trust import CacheUntrusted, State, record_path, verify
from autosched.runner.compile import compile_shared, shared_library_name
from autosched.runner.local_runner import task_data

pytestmark = pytest.mark.requires("gcc")

ROOT = Path(__file__).resolve().parents[2]
TARGET = "c -num-threads=1"
FAST = MeasureOption(repeat=1, min_repeat_ms=1.0, run_timeout=30.0)

CHECK = textwrap.dedent(
    """
    import numpy as np, autosched as asc
    task = asc.Task("matmul", (8, 8, 8), target=%r)
    a, b = task.workload.random_inputs(1)
    c = np.zeros((8, 8), "float32")
    task.build(())(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    print("ok")
    """
) % TARGET


def _task() -> asc.Task:
    return asc.Task("matmul", (8, 8, 8), target=TARGET)


def _entry(task: asc.Task) -> str:
    """The file name the kernel cache gives the library of ``task``'s naive program."""
    return shared_library_name(task.source(()), task.target, task.code)


def _plant(path: Path, marker: Path) -> bytes:
    """A real shared library at ``path`` whose constructor writes ``marker``; its bytes."""
    source = path.parent / "planted.c"
    source.write_text(
        "#include <stdio.h>\n"
        "__attribute__((constructor)) static void planted(void) {\n"
        f'    FILE *f = fopen("{marker}", "w");\n'
        '    if (f) { fputs("ran\\n", f); fclose(f); }\n'
        "}\n"
    )
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(path), str(source)], check=True, timeout=120)
    source.unlink()
    return path.read_bytes()


def _private(folder: Path) -> Path:
    folder.mkdir(mode=0o700)
    return folder


def _check(task: asc.Task, kernel: asc.runner.Kernel) -> None:
    a, b = task.workload.random_inputs(1)
    c = np.zeros((8, 8), "float32")
    kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_a_planted_library_with_no_record_is_built_again_not_loaded(tmp_path: Path) -> None:
    cache, marker, task = _private(tmp_path / "cache"), tmp_path / "marker", _task()
    planted = _plant(cache / _entry(task), marker)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AutoschedWarning)  # no record: built again without a word
        kernel = task.build((), cache_dir=cache)
    _check(task, kernel)
    assert not marker.exists(), "the planted library was loaded"
    lib = cache / _entry(task)
    assert lib.read_bytes() != planted and record_path(lib).is_file()
    assert verify(lib) == State.OK
    assert stat.S_IMODE(record_path(lib).stat().st_mode) == 0o600


def test_a_tampered_library_is_rejected_and_rebuilt_with_one_warning(tmp_path: Path) -> None:
    cache, marker, task = tmp_path / "cache", tmp_path / "marker", _task()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AUTOSCHED_CACHE": str(cache)}

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True,
                              timeout=300)  # fmt: skip

    first = run()
    assert first.returncode == 0 and first.stdout.strip() == "ok", first.stderr
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700  # made private
    lib = cache / _entry(task)
    assert record_path(lib).is_file()
    _plant(lib, marker)  # overwritten after autosched built it: the record stays
    second = run()
    assert second.returncode == 0 and second.stdout.strip() == "ok", second.stderr
    assert not marker.exists(), "the tampered library was loaded"
    said = second.stderr.strip().splitlines()
    assert len(said) == 1 and said[0].startswith("autosched: warning: kernel cache:"), said
    assert str(lib) in said[0] and "not loaded, built again" in said[0]
    third = run()
    assert third.returncode == 0 and third.stderr == "", third.stderr


def test_a_library_changed_in_this_process_is_hashed_again(tmp_path: Path) -> None:
    cache, marker, task = _private(tmp_path / "cache"), tmp_path / "marker", _task()
    source = task.source(())
    lib = compile_shared(source, task.target, cache_dir=cache, code=task.code)
    assert compile_shared(source, task.target, cache_dir=cache, code=task.code) == lib  # verified, kept
    _plant(lib, marker)
    with pytest.warns(AutoschedWarning, match="not the library autosched built"):
        again = compile_shared(source, task.target, cache_dir=cache, code=task.code)
    assert again == lib and verify(lib) == State.OK
    _check(task, asc.runner.load_kernel(lib, task.func_name, task.arg_specs()))
    assert not marker.exists()


@pytest.mark.parametrize("bad", ["group-writable", "link"])
def test_a_record_others_may_write_is_no_record(tmp_path: Path, bad: str) -> None:
    cache, task = _private(tmp_path / "cache"), _task()
    source = task.source(())
    lib = compile_shared(source, task.target, cache_dir=cache, code=task.code)
    record = record_path(lib)
    if bad == "link":
        moved = tmp_path / "record-elsewhere"
        record.rename(moved)
        record.symlink_to(moved)
    else:
        record.chmod(0o664)
    assert verify(lib) == State.UNRECORDED
    inode = lib.stat().st_ino
    compile_shared(source, task.target, cache_dir=cache, code=task.code)
    assert lib.stat().st_ino != inode, "a library with an untrusted record was used"
    assert verify(lib) == State.OK and not record.is_symlink()


@pytest.mark.parametrize("mode", [0o777, 0o770], ids=["0777", "0770"])
def test_a_cache_folder_others_may_write_is_refused_in_one_line(tmp_path: Path, mode: int) -> None:
    cache, task = _private(tmp_path / "cache"), _task()
    cache.chmod(mode)
    with pytest.raises(CacheUntrusted) as refused:
        task.build((), cache_dir=cache)
    message = str(refused.value)
    assert "\n" not in message and str(cache) in message and f"chmod 700 {cache}" in message
    assert f"mode {mode:04o}" in message
    assert list(cache.iterdir()) == []  # nothing written, nothing loaded
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AUTOSCHED_CACHE": str(cache)}
    argv = [sys.executable, "-m", "autosched", "run", "matmul", "8", "8", "8", "--target", TARGET]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("autosched: error: the kernel cache"), lines
    assert f"chmod 700 {cache}" in lines[0]


def test_a_cache_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root (os.chown)")
    cache, task = _private(tmp_path / "cache"), _task()
    os.chown(cache, 54321, -1)
    with pytest.raises(CacheUntrusted) as refused:
        task.build((), cache_dir=cache)
    message = str(refused.value)
    assert "\n" not in message and "uid 54321" in message and f"chown {os.geteuid()} {cache}" in message


def test_the_measurement_worker_refuses_an_unrecorded_cache_library(tmp_path: Path) -> None:
    cache, marker, task = _private(tmp_path / "cache"), tmp_path / "marker", _task()
    lib = cache / _entry(task)
    _plant(lib, marker)
    with LocalRunner(FAST) as runner:
        error_no, message, costs = runner.measure_file(
            "k", task_data(task, 0, True), str(lib), task.func_name, task.arg_specs()
        )
    assert error_no == MeasureErrorNo.RUNTIME_ERROR and costs == ()
    assert "not a library autosched built (no record of its content)" in message
    assert not marker.exists()


def test_a_dask_measuring_worker_replaces_a_planted_library_with_the_one_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("distributed", reason='pip install "dask[distributed]"')
    from autosched.cluster import work

    task, marker = _task(), tmp_path / "marker"
    built_cache = _private(tmp_path / "built")
    built = compile_shared(task.source(()), task.target, cache_dir=built_cache, code=task.code)
    worker_cache = _private(tmp_path / "worker-cache")
    _plant(worker_cache / built.name, marker)
    monkeypatch.setenv("AUTOSCHED_CACHE", str(worker_cache))
    job = Measurement("k", built.name, built.read_bytes(), task.func_name, tuple(task.arg_specs()), FAST)
    try:
        error_no, message, costs, _ = measure_on_worker(task_data(task, 0, True), job)
    finally:
        for runner in work._runners.values():
            runner.close()
        work._runners.clear()
    assert error_no == MeasureErrorNo.NO_ERROR, message
    assert len(costs) == 1 and costs[0] > 0
    assert not marker.exists(), "the planted library was measured"
    assert (worker_cache / built.name).read_bytes() == built.read_bytes()


def test_the_dask_builder_builds_again_on_the_cluster_what_it_cannot_trust(tmp_path: Path) -> None:
    pytest.importorskip("distributed", reason='pip install "dask[distributed]"')
    from dask_cluster import Lab

    from autosched.cluster import DaskCluster
    from autosched.cluster.parts import DaskBuilder
    from autosched.runner.measure import MeasureInput

    task, marker, cache = _task(), tmp_path / "marker", _private(tmp_path / "cache")
    lib = cache / _entry(task)
    planted = _plant(lib, marker)
    lab = Lab(tmp_path / "dask")
    try:
        lab.start("--nthreads", "1", name="builder")
        builder = DaskBuilder(DaskCluster(lab.client), cache_dir=cache)
        (built,) = builder.build([MeasureInput(task, ())])
        assert built.error_no == MeasureErrorNo.NO_ERROR and built.lib_path == str(lib), built.error_msg
        assert builder.remote_builds == 1, "the planted library was taken from the cache"
        assert lib.read_bytes() != planted and verify(lib) == State.OK
        builder.build([MeasureInput(task, ())])
        assert builder.remote_builds == 1  # recorded now: taken from the cache
    finally:
        lab.close()
    _check(task, asc.runner.load_kernel(lib, task.func_name, task.arg_specs()))
    assert not marker.exists()
