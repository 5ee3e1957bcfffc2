"""Tuning on boards over SSH, end to end: real sshd servers on 127.0.0.1 whose logins run aarch64
binaries through qemu-aarch64 (the boards' launcher), reached through a generated ssh_config with
host aliases, candidates cross-compiled here with aarch64-linux-gnu-gcc."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sshd_board import SshLab, processes_in, running_lab

import autosched as asc
from autosched.boards import SSH_CONFIG_ENV, Board, BoardPool, Connection, HostKeyRefused
from autosched.boards.board import load_boards, parse_probe, suggested_target
from autosched.boards.program import RemoteBuilder, gzipped
from autosched.boards.session import BoardSession, TaskData
from autosched.cli import main
from autosched.database.apply import this_machine
from autosched.database.machine import fingerprint_for
from autosched.export.kernel import export_kernel
from autosched.hardware import host_arch
from autosched.records import NoRecordError, is_remeasurement, load_records
from autosched.runner.errors import InfrastructureError
from autosched.runner.load import LoadError
from autosched.runner.measure import BuildResult, MeasureErrorNo, MeasureInput, MeasureOption

pytestmark = pytest.mark.requires("sshd", "aarch64-linux-gnu-gcc", "qemu-aarch64")

TARGET = "c -cc=aarch64-linux-gnu-gcc -num-threads=1"
FAST = MeasureOption(repeat=2, min_repeat_ms=1.0, run_timeout=60.0)  # qemu on a noisy 2-core CI machine
QEMU = ("qemu-aarch64",)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshLab]:
    with running_lab(tmp_path_factory.mktemp("ssh"), "board1", "board2") as the_lab:
        yield the_lab


def pool(lab: SshLab, *names: str, option: MeasureOption = FAST, **kw: object) -> BoardPool:
    boards = [Board(n, workdir=lab.workdir(n), launcher=QEMU) for n in names]
    return BoardPool(boards, option, ssh_config=str(lab.ssh_config), **kw)  # type: ignore[arg-type]


def program_faults(log: Path) -> list[str]:
    return [r.error_msg for r in load_records(log) if r.error_no != MeasureErrorNo.NO_ERROR]


@pytest.mark.requires("make")
def test_tune_a_builtin_for_aarch64_on_a_board_then_export(lab: SshLab, tmp_path: Path) -> None:
    task = asc.Task("matmul", (24, 20, 16), target=TARGET)
    log = tmp_path / "mm.jsonl"
    with pool(lab, "board1") as runner:
        result = asc.tune(task, trials=5, log=log, tuner="random", seed=2, runner=runner, remeasure=1)
        machine = runner.machine
    assert result.valid_trials == 5, result.errors  # each checked against numpy's matmul here
    records = load_records(log)
    assert {r.machine for r in records} == {machine} and machine.startswith(host_arch())  # the board's
    assert len([r for r in records if not is_remeasurement(r)]) == 5 and all(r.ok for r in records)
    for r in records:  # the log replays: every program lowers and emits again
        assert "default_function__bench" in task.source(r.steps)
    out = tmp_path / "export"
    assert main(["export", str(log), "--out", str(out), "--target", str(task.target)]) == 0
    assert "CC = aarch64-linux-gnu-gcc" in (out / "Makefile").read_text()  # the tuned compiler, by default
    cross = ["RUN_WITH=qemu-aarch64 -L /usr/aarch64-linux-gnu"]
    run = subprocess.run(["make", "-s", "-C", str(out), "run", *cross, "CPPFLAGS=-DMIN_REPEAT_MS=1"],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0 and "check: OK" in run.stdout, run.stdout + run.stderr
    assert this_machine(log, task) == records  # load_best takes the board's records of its target...
    with pytest.raises(LoadError, match="run it on its board"):  # ...but cannot load aarch64 code here
        asc.load_best(log, task)


@pytest.mark.requires("gcc")
def test_load_best_uses_a_boards_records_when_asked_for_its_machine(lab: SshLab, tmp_path: Path) -> None:
    task = asc.Task("matmul", (12, 10, 8), target="c -num-threads=1")
    board = Board("board1", workdir=lab.workdir("native"))  # runs this host's binaries: no launcher
    log = tmp_path / "x86.jsonl"
    with BoardPool([board], FAST, ssh_config=str(lab.ssh_config)) as runner:
        result = asc.tune(task, trials=2, log=log, tuner="random", seed=3, runner=runner, remeasure=0)
        machine = runner.machine
    assert result.valid_trials == 2 and machine != fingerprint_for(task.target)  # the board's fingerprint
    skipped = pytest.warns(asc.AutoschedWarning, match="measured on another machine")
    with skipped, pytest.raises(NoRecordError) as no:
        asc.load_best(log, task)  # this machine's records, by default: there are none
    assert str(no.value).count("\n") == 0 and f"pass machine='{machine}'" in str(no.value)
    kernel = asc.load_best(log, task, machine=machine)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((12, 8), np.float32), rng.standard_normal((8, 10), np.float32)
    c = np.zeros((12, 10), np.float32)
    kernel(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    other = "x86_64-000000000000"
    with pytest.warns(asc.AutoschedWarning), pytest.raises(NoRecordError, match=f"on machine {other} in"):
        asc.load_best(log, task, machine=other)
    with pytest.raises(ValueError, match="machine must be a fingerprint"):
        asc.load_best(log, task, machine="$(reboot)")


@pytest.mark.requires("make")
def test_user_workload_hostile_names_and_paths(lab: SshLab, tmp_path: Path) -> None:
    evil = "X 'q' \"d\" $(touch PWNED) `id`;"

    @asc.workload("test_remote_stencil", override=True)
    def stencil(n: int) -> list[asc.Tensor]:
        x = asc.placeholder((n,), name=evil)
        y = asc.compute((n - 2,), lambda i: x[i] + 2.0 * x[i + 1] + x[i + 2], name=evil + "out")
        return [x, y]

    task = asc.Task("test_remote_stencil", (300,), target=TARGET)
    workdir = lab.workdir("odd") + "/work dir 'q' $(touch PWNED) ;x"
    board = Board("board1", workdir=workdir, launcher=QEMU)
    with BoardPool([board], FAST, ssh_config=str(lab.ssh_config)) as runner:
        log = tmp_path / "st.jsonl"
        result = asc.tune(task, trials=3, log=log, tuner="random", runner=runner, remeasure=0)
        run_dir = runner._health[0].session.run_dir
    assert result.valid_trials == 3, result.errors  # each one's outputs checked against the reference
    best = min(load_records(log), key=lambda r: min(r.costs))
    assert task.func_name + "__bench" in task.source(best.steps)  # the log replays
    out = export_kernel(best, tmp_path / "export dir", cc="aarch64-linux-gnu-gcc")
    cross = ["RUN_WITH=qemu-aarch64 -L /usr/aarch64-linux-gnu", "CPPFLAGS=-DMIN_REPEAT_MS=1"]
    make = ["make", "-s", "-C", str(out), "run", *cross]
    run = subprocess.run(make, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "check: OK" in run.stdout, run.stdout + run.stderr
    assert run_dir.startswith(workdir)  # the directory was made with the name as given
    assert not list(Path(lab.workdir("x")).parent.rglob("PWNED")) and not Path("PWNED").exists()
    assert not Path(run_dir).exists()  # removed at the end


def _hand_built(tmp_path: Path, body: str) -> str:
    """A static aarch64 executable whose main is ``body`` (a candidate that misbehaves)."""
    src = tmp_path / "bad.c"
    head = "#include <signal.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
    src.write_text(f"{head}int main(void) {{ {body} return 0; }}\n")
    exe = tmp_path / f"bad{abs(hash(body))}"
    subprocess.run(["aarch64-linux-gnu-gcc", "-static", "-O1", "-o", str(exe), str(src)], check=True)
    return str(gzipped(exe))  # as RemoteBuilder hands them over


def test_segfault_and_hang_cost_one_trial_and_the_board_stays_usable(lab: SshLab, tmp_path: Path) -> None:
    task = asc.Task("matmul", (8, 8, 8), target=TARGET)
    specs = tuple(task.arg_specs())
    crash = _hand_built(tmp_path, "raise(SIGSEGV);")
    hang = _hand_built(tmp_path, "for (;;) {}")
    option = MeasureOption(repeat=1, min_repeat_ms=1.0, run_timeout=2.0)
    with pool(lab, "board2", option=option) as runner:
        good = runner.make_builder(option).build([MeasureInput(task, ())])[0]
        builds = [BuildResult(crash, task.func_name, specs), BuildResult(hang, task.func_name, specs), good]
        results = runner.run([MeasureInput(task, ())] * 3, builds)
        run_dir = runner._health[0].session.run_dir
        leftovers = processes_in(run_dir)
    assert results[0].error_no == MeasureErrorNo.RUNTIME_ERROR and "SIGSEGV" in results[0].error_msg
    assert results[1].error_no == MeasureErrorNo.RUN_TIMEOUT
    assert results[2].error_no == MeasureErrorNo.NO_ERROR, results[2].error_msg
    assert runner.board_failures == 0 and leftovers == []  # the hanging process was killed


def test_a_batch_is_one_round_trip_and_a_bad_candidate_costs_only_itself(
    lab: SshLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mm, relu = (asc.Task("matmul", (8, 8, 8), target=TARGET), asc.Task("relu", (4, 6), target=TARGET))
    crash = _hand_built(tmp_path, "raise(SIGSEGV);")
    # exits 0 with timings but writes no output, and prints what looks like the answer's framing
    fake = r'fputs("asc-rc 0\nasc-data\n", stderr); puts("{\"number\": 1, \"costs\": [1e-3]}");'
    liar = _hand_built(tmp_path, fake)
    specs = tuple(mm.arg_specs())
    with pool(lab, "board1", batch=8) as runner:
        session = runner._health[0].session
        round_trips: list[int] = []  # bytes sent up, per ssh command
        real_run = session.conn.run

        def counted(script: str, stdin: bytes = b"", timeout: float = 60.0) -> object:
            round_trips.append(len(stdin))
            return real_run(script, stdin, timeout)

        monkeypatch.setattr(session.conn, "run", counted)
        inputs = [MeasureInput(mm, ()), MeasureInput(relu, ()), MeasureInput(mm, ()), MeasureInput(mm, ())]
        good_mm, good_relu = runner.make_builder(FAST).build(inputs[:2])
        bad = [BuildResult(crash, mm.func_name, specs), BuildResult(liar, mm.func_name, specs)]
        builds = [good_mm, good_relu, *bad]
        first = runner.run(inputs, builds)
        assert len(round_trips) == 5  # start, matmul's two inputs, relu's input, the batch
        again = runner.run(inputs[:2] * 2, [good_mm, good_relu] * 2)
        assert len(round_trips) == 6  # the inputs are on the board already: the batch only
        sizes = sum(Path(b.lib_path or "").stat().st_size for b in builds[:2])
        assert round_trips[-1] >= 2 * sizes  # the four executables went up in that one command
        batch_dir = Path(session.run_dir) / "batch"
        assert not batch_dir.exists()  # removed after the batch
    ok, fault = MeasureErrorNo.NO_ERROR, MeasureErrorNo.RUNTIME_ERROR
    assert [r.error_no for r in first] == [ok, ok, fault, fault], [r.error_msg for r in first]
    assert "SIGSEGV" in first[2].error_msg and "missing or short" in first[3].error_msg
    assert all(r.error_no == MeasureErrorNo.NO_ERROR and min(r.costs) > 0 for r in again)
    assert runner.board_failures == 0


def test_a_free_board_takes_its_share_of_the_queue() -> None:
    runner = BoardPool(["a", "b"], batch=4)
    assert [runner._share(n) for n in (1, 3, 6, 20)] == [1, 2, 3, 4]
    runner._health[1].down = True  # one board up: it takes up to a whole batch
    assert [runner._share(n) for n in (3, 20)] == [3, 4]
    with pytest.raises(ValueError, match="batch must be at least 1"):
        BoardPool(["a"], batch=0)


def test_sshd_killed_mid_run_and_restarted(lab: SshLab, tmp_path: Path) -> None:
    server = lab.servers["board1"]
    task = asc.Task("matmul", (16, 12, 8), target=TARGET)
    log = tmp_path / "drop.jsonl"
    dropped, restarted = threading.Event(), threading.Event()

    with pool(lab, "board1", probe_every=1.0) as runner:

        def back_once_the_drop_is_seen() -> None:  # (a fixed delay may end before the next batch is built)
            deadline = time.monotonic() + 60.0
            while runner.board_failures == 0 and time.monotonic() < deadline:
                time.sleep(0.1)
            server.start()
            restarted.set()

        def drop_after_first_batch(tuner: object, cands: object, results: object) -> None:
            if not dropped.is_set():
                dropped.set()
                server.kill()  # the board drops off: sshd and its connections die
                threading.Thread(target=back_once_the_drop_is_seen, daemon=True).start()

        with pytest.warns(asc.AutoschedWarning, match="board board1 does not answer"):
            result = asc.tune(task, trials=8, log=log, tuner="random", seed=5, runner=runner,
                              batch_size=4, remeasure=0, callbacks=[drop_after_first_batch])  # fmt: skip
        failures = runner.board_failures
    assert restarted.is_set() and failures >= 1  # the drop was seen, and survived
    assert result.valid_trials == 8 and program_faults(log) == []
    assert len(load_records(log)) == 8


def test_a_second_board_takes_over_while_the_first_is_down(lab: SshLab, tmp_path: Path) -> None:
    task = asc.Task("matmul", (16, 8, 12), target=TARGET)
    log = tmp_path / "two.jsonl"
    server = lab.servers["board1"]

    at_drop: list[int] = []  # what each board had measured when board1 went down

    def drop(tuner: object, cands: object, results: object) -> None:
        if not at_drop:
            at_drop.extend(h.measured for h in runner._health)
        server.kill()

    told = pytest.warns(asc.AutoschedWarning, match="board board1 does not answer .*other boards take")
    try:
        with pool(lab, "board1", "board2", probe_every=30.0, retries=1) as runner, told:
            result = asc.tune(task, trials=8, log=log, tuner="random", seed=7, runner=runner,
                              batch_size=4, remeasure=0, callbacks=[drop])  # fmt: skip
            first, second = (h.measured for h in runner._health)
            failures = runner.board_failures
    finally:
        if server.proc is None:
            server.start()
    assert result.valid_trials == 8 and program_faults(log) == []
    # board2 measured every candidate after the drop (which board measured the first batch varies)
    assert failures >= 1 and sum(at_drop) < 8 and first == at_drop[0] and first + second == 8, at_drop


def test_all_boards_down_stops_with_a_clear_message_and_resumes(lab: SshLab, tmp_path: Path) -> None:
    task = asc.Task("matmul", (8, 8, 8), target=TARGET)
    server, log = lab.servers["board2"], tmp_path / "d.jsonl"
    with pool(lab, "board2", retries=1, probe_every=0.5, down_timeout=2.0) as runner:
        asc.tune(task, trials=2, log=log, tuner="random", runner=runner, remeasure=0)
        before = load_records(log)
        server.kill()
        told = pytest.warns(asc.AutoschedWarning, match="board board2 does not answer .*its trials wait")
        try:
            with pytest.raises(InfrastructureError, match="run the same command again"), told:
                asc.tune(task, trials=4, log=log, tuner="random", runner=runner, remeasure=0)
        finally:
            server.start()
    with pool(lab, "board2") as runner:  # run again: the 2 trials logged count, 2 more are measured
        result = asc.tune(task, trials=4, log=log, tuner="random", runner=runner, remeasure=0)
    assert program_faults(log) == []  # (their messages, if any)
    records = load_records(log)
    assert len(before) == 2 and records[:2] == before  # nothing lost
    assert (result.resumed_trials, result.new_trials, len(records)) == (2, 2, 4), result


def test_wrong_host_key_is_refused(lab: SshLab, tmp_path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")], check=True)
    lab.add("impostor", known_key=(tmp_path / "k.pub").read_text().strip())
    conn = Connection("impostor", str(lab.ssh_config))
    with pytest.raises(HostKeyRefused, match="refused its host key"):
        conn.run("true")
    conn.close()


def test_cli_boards_check_and_an_unknown_alias(
    lab: SshLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(SSH_CONFIG_ENV, str(lab.ssh_config))
    boards = tmp_path / "boards.toml"
    boards.write_text(f'[[board]]\nname = "board1"\ntarget = "{TARGET}"\nlauncher = ["qemu-aarch64"]\n')
    assert main(["boards", "check", "--boards", str(boards), "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["reachable"] and entry["arch"] == host_arch() and entry["cores"] == os.cpu_count()
    assert entry["target"] == TARGET and entry["suggested_target"].startswith("c -cc=")
    assert main(["boards", "check", "board2"]) == 0
    text = capsys.readouterr().out
    assert "board2: reachable" in text and "caches  : L1" in text and "target  : c -cc=" in text
    assert main(["boards", "check", "no-such-board"]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "no-such-board: unreachable" in out[0]


def test_cli_tune_with_board(
    lab: SshLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(SSH_CONFIG_ENV, str(lab.ssh_config))
    boards = tmp_path / "boards.toml"
    boards.write_text(
        f'[[board]]\nname = "board2"\ntarget = "{TARGET}"\nworkdir = "{lab.workdir("cli")}"\n'
        'launcher = ["qemu-aarch64"]\n'
    )
    log = tmp_path / "cli.jsonl"
    argv = ["tune", "matmul", "12", "12", "12", "--boards", str(boards), "--trials", "3", "--json",
            "--tuner", "random", "--log", str(log), "--min-repeat-ms", "1", "--remeasure", "0"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["valid_trials"] == 3 and summary["target"] == str(asc.Target.parse(TARGET))
    assert main(["tune", "matmul", "8", "8", "8", "--board", "nowhere", "--target", TARGET]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nowhere" in err[0]


def test_task_data_is_generated_once_per_task() -> None:
    data = TaskData(seed=3)
    task = asc.Task("matmul", (4, 4, 4), target=TARGET)
    tag, inputs, expected = data.get(task)
    assert data.get(task)[1] is inputs and len(tag) == 16 and expected[0].shape == (4, 4)


ARM_PROBE = """\
== arch
aarch64
== cores
4
== caches
1 Data 32K
1 Instruction 48K
2 Unified 1024K
== cpuinfo
processor\t: 0
BogoMIPS\t: 108.00
Features\t: fp asimd evtstrm crc32 cpuid
CPU implementer\t: 0x41
CPU part\t: 0xd08
"""


def test_an_arm_board_suggests_its_target() -> None:
    info = parse_probe(ARM_PROBE)
    assert (info.arch, info.cores, info.mcpu, info.isa) == ("aarch64", 4, "cortex-a72", ("asimd",))
    assert info.caches == {"l1": 32 << 10, "l2": 1 << 20}
    target = suggested_target(info)
    cpu = "-mcpu=cortex-a72 -cores=4 -num-threads=4"
    assert target == f"c -cc=aarch64-linux-gnu-gcc {cpu} -l1=32768 -l2=1048576"
    assert asc.Target.parse(target).machine == "aarch64"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", "no \\[\\[board\\]\\] entries"),
        ('[[board]]\ntarget = "c"\n', "name must be a string"),
        ('[[board]]\nname = "-oProxyCommand=x"\n', "bad board alias"),
        ('[[board]]\nname = "a"\nworkdir = "-rf"\n', "bad workdir"),
        ('[[board]]\nname = "a"\nlauncher = [1]\n', "launcher must be a list of words"),
        ('[[board]]\nname = "a"\ncolour = "red"\n', "unknown keys colour"),
        ('[[board]]\nname = "a"\n[[board]]\nname = "a"\n', "listed twice"),
        ('[[board]]\nname = "a"\ntarget = "c -bogus=1"\n', "unknown option -bogus"),
        ("[[board]\n", "boards file"),
    ],
)
def test_bad_boards_files_are_refused_clearly(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "boards.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=error):
        load_boards(path)


def test_a_dead_runs_directory_is_removed_and_the_board_lock_is_shared(lab: SshLab) -> None:
    board = Board("board2", workdir=lab.workdir("lock"), launcher=QEMU)
    task = asc.Task("matmul", (8, 8, 8), target=TARGET)
    option = MeasureOption(repeat=1, min_repeat_ms=1.0, run_timeout=60.0)
    session = BoardSession(board, str(lab.ssh_config))
    session.start()
    prefix = session.run_name.rsplit("-", 2)[0]  # run-<this host>
    alive = Path(session.workdir) / f"{prefix}-1-0123abcd"  # pid 1 lives: its directory is kept
    gone = Path(session.workdir) / f"{prefix}-{2**22 + 17}-deadbeef"  # no such pid: removed
    for d in (alive, gone):
        d.mkdir()
    try:
        session.start()
        assert alive.is_dir() and not gone.exists()
        (build,) = RemoteBuilder().build([MeasureInput(task, ())])
        # another tuning process is timing on the board: it holds the lock for 2 s
        lock = str(Path(session.workdir) / "lock")
        holder = subprocess.Popen(["flock", "-x", lock, "sleep", "2"])
        for _ in range(100):  # until the holder has the lock (flock -n fails while it is held)
            if subprocess.run(["flock", "-n", lock, "true"], check=False).returncode != 0:
                break
            time.sleep(0.01)
        t0 = time.monotonic()
        error_no, message, _ = session.measure(MeasureInput(task, ()), build, TaskData(0), option)
        waited = time.monotonic() - t0
        holder.wait()
    finally:
        session.close()
    assert error_no == MeasureErrorNo.NO_ERROR, message
    assert waited >= 1.5  # the trial waited for the lock
    assert not Path(session.run_dir).exists()


def test_cli_tune_refuses_boards_of_another_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    boards = tmp_path / "boards.toml"
    boards.write_text(f'[[board]]\nname = "rpi"\ntarget = "{TARGET}"\n')
    assert main(["tune", "matmul", "8", "8", "8", "--boards", str(boards), "--target", "c -cc=clang"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a board is for target" in err[0]
