"""A missing OpenBLAS is one line saying what to install, found before anything is compiled: the
search itself on real directories, then ``asc.build`` and ``asc.tune`` through a real gcc whose
include path lacks ``cblas.h`` (a compiler wrapper, as a machine without libopenblas-dev has)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched.contrib import cblas
from autosched.runner.system_libs import (
    MissingLibrary,
    check_system_libraries,
    compiler_dirs,
    find_header,
    find_library,
)
from autosched.target import Target
from autosched.te.ccode import CCode

INSTALL = "install the OpenBLAS development files (Debian/Ubuntu: apt-get install libopenblas-dev)"


def test_find_header_and_library_look_only_in_the_given_directories(tmp_path: Path) -> None:
    empty, full = tmp_path / "empty", tmp_path / "full"
    empty.mkdir()
    full.mkdir()
    assert find_header("cblas.h", [empty]) is None and find_header("cblas.h", []) is None
    assert find_library("openblas", [empty]) is None
    (full / "cblas.h").write_text("/* a header */\n")
    (full / "libopenblas.a").write_bytes(b"!<arch>\n")
    assert find_header("cblas.h", [empty, full]) == full / "cblas.h"
    assert find_library("openblas", [empty, full]) == full / "libopenblas.a"


def _gcc_without_cblas(tmp_path: Path) -> Path:
    """A gcc that searches copies of gcc's own include directories, all but ``cblas.h`` (links to
    every other entry), with -nostdinc: to it, OpenBLAS's headers are not installed."""
    includes, _ = compiler_dirs(("gcc",))
    assert includes, "gcc did not list its include directories"
    flags = ["-nostdinc"]
    for k, folder in enumerate(includes):
        mirror = tmp_path / f"include{k}"
        mirror.mkdir()
        for entry in Path(folder).iterdir():
            if entry.name != "cblas.h":
                (mirror / entry.name).symlink_to(entry)
        flags += ["-isystem", str(mirror)]
    wrapper = tmp_path / "gcc-without-cblas"
    wrapper.write_text(f'#!/bin/sh\nexec gcc {" ".join(flags)} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def _cblas_schedule() -> tuple[asc.Schedule, list[asc.Tensor]]:
    X = asc.placeholder((8, 6), name="X")
    Y = asc.placeholder((6, 4), name="Y")
    C = cblas.matmul(X, Y)
    return asc.create_schedule(C.op), [X, Y, C]


@pytest.mark.requires("gcc")
def test_the_compiler_is_asked_where_it_looks(tmp_path: Path) -> None:
    wrapper = _gcc_without_cblas(tmp_path)
    includes, libs = compiler_dirs((str(wrapper),))
    assert includes and all(str(tmp_path) in d for d in includes)
    assert find_header("cblas.h", includes) is None
    assert find_header("stdlib.h", includes) is not None and libs
    assert compiler_dirs(("no-such-compiler-here",)) == ((), ())  # its compile will say so


@pytest.mark.requires("gcc")
def test_build_says_what_to_install_instead_of_a_compiler_log(tmp_path: Path) -> None:
    wrapper = _gcc_without_cblas(tmp_path)
    # the wrapper is a real compiler without cblas.h: compiling the include fails there
    probe = subprocess.run([str(wrapper), "-E", "-x", "c", "-"], input="#include <cblas.h>\n",
                           capture_output=True, text=True, timeout=60)
    assert probe.returncode != 0 and "cblas.h" in probe.stderr
    s, args = _cblas_schedule()
    with pytest.raises(MissingLibrary) as caught:
        asc.build(s, args, target=f"c -cc={wrapper}")
    message = str(caught.value)
    assert message == f"cblas.h is not in the include path of {wrapper}: {INSTALL}"
    assert "\n" not in message


@pytest.mark.requires("gcc")
def test_tune_stops_before_its_first_trial(tmp_path: Path) -> None:
    wrapper = _gcc_without_cblas(tmp_path)

    @asc.workload("test_openblas_check_mm", reference=lambda x, y: 2 * (x @ y))
    def mm(n: int) -> list[asc.Tensor]:
        X = asc.placeholder((n, n), name="X")
        Y = asc.placeholder((n, n), name="Y")
        C = cblas.matmul(X, Y)
        return [X, Y, asc.compute((n, n), lambda i, j: C[i, j] * 2.0, name="D")]

    task = asc.Task("test_openblas_check_mm", (8,), target=f"c -cc={wrapper}")
    log = tmp_path / "mm.jsonl"
    with pytest.raises(MissingLibrary, match="apt-get install libopenblas-dev"):
        asc.tune(task, trials=2, log=log)
    assert not log.exists() or log.read_text() == ""


@pytest.mark.requires("aarch64-linux-gnu-gcc")
def test_a_cross_compiler_without_the_boards_openblas_is_told_so() -> None:
    """The aarch64 cross compiler searches its own sysroot, where this machine's OpenBLAS is not."""
    target = Target.parse("c -cc=aarch64-linux-gnu-gcc -mcpu=cortex-a72")
    includes, libs = compiler_dirs(("aarch64-linux-gnu-gcc", *target.cflags(shared=True)))
    if find_library("openblas", libs) is not None or find_header("cblas.h", includes) is not None:
        pytest.skip("this machine has OpenBLAS for aarch64 too")
    with pytest.raises(MissingLibrary, match=r"^libopenblas is not in the library path of aarch64-linux-gnu"):
        check_system_libraries(CCode.of(libs=["openblas"]), target)
    with pytest.raises(MissingLibrary, match=r"^cblas.h is not in the include path of aarch64-linux-gnu-gcc"):
        check_system_libraries(CCode.of(headers=["cblas.h"], libs=["openblas"]), target)


@pytest.mark.requires("gcc", "openblas")
def test_with_openblas_installed_the_check_passes_and_the_kernel_runs() -> None:
    s, args = _cblas_schedule()
    check_system_libraries(CCode.of(headers=["cblas.h"], libs=["openblas"]), Target.parse("c"))
    f = asc.build(s, args, target="c")
    rng = np.random.default_rng(1)
    x, y = rng.random((8, 6), dtype=np.float32), rng.random((6, 4), dtype=np.float32)
    c = np.zeros((8, 4), np.float32)
    f(x, y, c)
    np.testing.assert_allclose(c, x @ y, rtol=1e-5)
