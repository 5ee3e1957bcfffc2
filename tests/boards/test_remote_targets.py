"""Board targets beyond aarch64 gcc, through a real sshd on 127.0.0.1: a 32-bit ARM board with NEON
(``-mfpu=neon-vfpv4``, run by qemu-arm), clang cross-compiling with ``--target=`` (and its
export), a board without a launcher refusing executables it cannot run, and a wrong answer or a
cache flush on the board."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sshd_board import SshLab, running_lab

import autosched as asc
from autosched.boards import SSH_CONFIG_ENV, Board, BoardPool, Connection, RemoteBuilder
from autosched.boards.board import load_boards
from autosched.boards.program import elf_arch, gzipped, runs_natively
from autosched.cli import main
from autosched.database.machine import fingerprint_for
from autosched.records import load_records
from autosched.runner.errors import InfrastructureError
from autosched.runner.measure import BuildResult, MeasureErrorNo, MeasureInput, MeasureOption

FAST = MeasureOption(repeat=2, min_repeat_ms=1.0, run_timeout=60.0)  # qemu on a noisy 2-core CI machine


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshLab]:
    with running_lab(tmp_path_factory.mktemp("ssh"), "board", "server2") as the_lab:
        yield the_lab


def tuned(lab: SshLab, target: str, launcher: tuple[str, ...], log: Path, trials: int = 3) -> asc.TuneResult:
    """``trials`` random programs of a small matmul tuned for ``target`` on the lab's board."""
    board = Board("board", workdir=lab.workdir(launcher[0] if launcher else "native"), launcher=launcher)
    with BoardPool([board], FAST, ssh_config=str(lab.ssh_config)) as runner:
        task = asc.Task("matmul", (16, 12, 8), target=target)
        return asc.tune(task, trials=trials, log=log, tuner="random", seed=1, runner=runner, remeasure=0)


@pytest.mark.requires("sshd", "arm-linux-gnueabihf-gcc", "qemu-arm")
def test_a_32bit_arm_board_with_neon(lab: SshLab, tmp_path: Path) -> None:
    target = "c -cc=arm-linux-gnueabihf-gcc -mcpu=cortex-a7 -mfpu=neon-vfpv4 -num-threads=1"
    assert "-mfpu=neon-vfpv4" in asc.Target.parse(target).cflags()
    log = tmp_path / "arm.jsonl"
    result = tuned(lab, target, ("qemu-arm",), log)
    assert result.valid_trials == 3, result.errors  # each checked here against numpy's matmul
    records = load_records(log)  # the log's checks accept the option
    assert len(records) == 3 and all(r.ok and "-mfpu=neon-vfpv4" in r.target for r in records)
    (exe,) = RemoteBuilder().build([MeasureInput(asc.Task("relu", (8, 8), target=target), ())])
    assert exe.lib_path is not None and elf_arch(exe.lib_path) == "arm"
    with pytest.raises(asc.TargetError, match="-mfpu is for 32-bit ARM"):
        asc.Target.parse("c -cc=aarch64-linux-gnu-gcc -mfpu=neon")


@pytest.mark.requires("sshd", "clang", "aarch64-linux-gnu-gcc", "qemu-aarch64", "make")
def test_clang_cross_target_tunes_on_a_board_and_exports(lab: SshLab, tmp_path: Path) -> None:
    target = "c -cc=clang -mtriple=aarch64-linux-gnu -num-threads=2"  # OpenMP: the cross libgomp
    log = tmp_path / "clang.jsonl"
    result = tuned(lab, target, ("qemu-aarch64",), log)
    assert result.valid_trials == 3, result.errors
    assert all(r.ok and r.compiler.startswith(("clang", "Debian clang")) for r in load_records(log))
    out = tmp_path / "export"
    assert main(["export", str(log), "--out", str(out), "--target", target]) == 0
    makefile = (out / "Makefile").read_text()
    assert "CC = clang" in makefile and "--target=aarch64-linux-gnu" in makefile
    cross = ["RUN_WITH=qemu-aarch64 -L /usr/aarch64-linux-gnu", "CPPFLAGS=-DMIN_REPEAT_MS=1"]
    make = ["make", "-s", "-C", str(out), "run", *cross]
    run = subprocess.run(make, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "check: OK" in run.stdout, run.stdout + run.stderr


@pytest.mark.requires("sshd", "aarch64-linux-gnu-gcc")
def test_a_board_without_launcher_refuses_executables_it_cannot_run(lab: SshLab, tmp_path: Path) -> None:
    log = tmp_path / "refused.jsonl"
    with pytest.raises(InfrastructureError, match="has no launcher, so it cannot run the candidates"):
        tuned(lab, "c -cc=aarch64-linux-gnu-gcc -num-threads=1", (), log)
    assert not log.exists() or load_records(log) == []  # no trial was charged to a program
    assert runs_natively("aarch64", "arm") and runs_natively("x86_64", "x86")
    assert not runs_natively("x86_64", "aarch64") and not runs_natively("arm", "aarch64")


def _aarch64_exe(tmp_path: Path, body: str) -> str:
    """A static aarch64 candidate whose main is ``body``, gzip-compressed as the builder hands it."""
    src = tmp_path / "cand.c"
    src.write_text(f"#include <stdio.h>\nint main(void) {{ {body} return 0; }}\n")
    exe = tmp_path / "cand"
    subprocess.run(["aarch64-linux-gnu-gcc", "-static", "-O1", "-o", str(exe), str(src)], check=True)
    return str(gzipped(exe))


@pytest.mark.requires("sshd", "aarch64-linux-gnu-gcc", "qemu-aarch64")
def test_a_wrong_answer_on_the_board_and_a_flushed_cache(lab: SshLab, tmp_path: Path) -> None:
    task = asc.Task("relu", (8, 8), target="c -cc=aarch64-linux-gnu-gcc -num-threads=1")
    # writes 64 zeros as the output (relu of random normal inputs is not all zeros) and timings
    body = ('static float z[64]; FILE* f = fopen("out0.bin", "wb"); fwrite(z, 4, 64, f); fclose(f);'
            ' puts("{\\"number\\": 1, \\"costs\\": [1e-6]}");')  # fmt: skip
    wrong = BuildResult(_aarch64_exe(tmp_path, body), task.func_name, tuple(task.arg_specs()))
    option = MeasureOption(repeat=2, min_repeat_ms=1.0, run_timeout=20.0, flush_cache=True)
    board = Board("board", workdir=lab.workdir("flush"), launcher=("qemu-aarch64",))
    with BoardPool([board], option, ssh_config=str(lab.ssh_config)) as runner:
        (good,) = runner.make_builder(option).build([MeasureInput(task, ())])
        results = runner.run([MeasureInput(task, ())] * 2, [wrong, good])
    assert results[0].error_no == MeasureErrorNo.WRONG_ANSWER, results[0].error_msg
    assert results[1].error_no == MeasureErrorNo.NO_ERROR and len(results[1].costs) == 2, results[1].error_msg
    assert elf_arch(good.lib_path or "") == "aarch64"


def test_a_launcher_string_is_split_into_words_and_a_missing_boards_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "boards.toml"
    path.write_text('[[board]]\nname = "pi"\nlauncher = "qemu-arm -L \'/usr/arm dir\'"\n')
    (board,) = load_boards(path)
    assert board.launcher == ("qemu-arm", "-L", "/usr/arm dir")
    with pytest.raises(ValueError, match=r"boards file .*nowhere.toml: cannot read it: No such file"):
        load_boards(tmp_path / "nowhere.toml")


@pytest.mark.requires("sshd")
def test_one_shared_connection_and_host_keys_checked_as_configured(lab: SshLab) -> None:
    conn = Connection("board", str(lab.ssh_config))
    argv = " ".join(conn._base())
    assert "BatchMode=yes" in argv and "ControlMaster=auto" in argv and "StrictHostKeyChecking" not in argv
    assert conn.run("echo hi").stdout == b"hi\n"
    assert conn._dir is not None and os.listdir(conn._dir)  # the master's socket: later commands reuse it
    master = subprocess.run([*conn._base(), "-O", "check", "--", "board"], capture_output=True, text=True)
    assert master.returncode == 0 and "Master running" in master.stderr
    socket_dir = conn._dir
    conn.close()
    assert not os.path.exists(socket_dir)


@pytest.mark.requires("sshd", "gcc")
def test_cli_two_boards_by_alias_x86_servers_for_the_c_target(
    lab: SshLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(SSH_CONFIG_ENV, str(lab.ssh_config))
    log = tmp_path / "x86.jsonl"
    argv = ["tune", "matmul", "12", "8", "10", "--target", "c -num-threads=1", "--board", "board", "--board",
            "server2", "--trials", "6", "--tuner", "random", "--log", str(log), "--min-repeat-ms", "1",
            "--remeasure", "0", "--json"]  # fmt: skip
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["valid_trials"] == 6
    records = load_records(log)
    assert len(records) == 6 and all(r.ok for r in records)
    assert records[0].machine != fingerprint_for(records[0].target)  # measured as the board, not this host


@pytest.mark.requires("sshd", "aarch64-linux-gnu-gcc", "qemu-aarch64")
def test_the_board_times_the_first_candidates_while_the_others_compile(lab: SshLab, tmp_path: Path) -> None:
    target = "c -cc=aarch64-linux-gnu-gcc -num-threads=1"
    inputs = [MeasureInput(asc.Task("matmul", (9, 7, k), target=target), ()) for k in range(5, 11)]
    builder = RemoteBuilder(n_parallel=1, cache_dir=tmp_path / "cache")  # an empty cache: each one compiles
    built: list[float] = []

    def noted() -> Iterator[tuple[int, BuildResult]]:
        for j, build in builder.build_each(inputs):
            built.append(time.monotonic())
            yield j, build

    board = Board("board", workdir=lab.workdir("stream"), launcher=("qemu-aarch64",))
    with BoardPool([board], FAST, ssh_config=str(lab.ssh_config)) as runner:
        assert runner.machine  # connected
        measured = [(time.monotonic(), j, res) for j, res in runner.run_stream(inputs, noted())]
    assert sorted(j for _, j, _ in measured) == list(range(6)) and len(built) == 6
    assert all(res.error_no == MeasureErrorNo.NO_ERROR for _, _, res in measured), measured
    assert measured[0][0] < built[-1]  # the first result came back before the last compile ended
    built.clear()
    with BoardPool([board], FAST, ssh_config=str(lab.ssh_config), overlap=False) as runner:
        first = next(iter(runner.run_stream(inputs, noted())))  # (now from the cache)
    assert len(built) == 6 and first[1].error_no == MeasureErrorNo.NO_ERROR  # all built before any timing
