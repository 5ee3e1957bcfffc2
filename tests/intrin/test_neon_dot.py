"""NEON dot products (Armv8.2 ``sdot`` / ``udot``) through tensorize: the portable C path bit-exact
against numpy on any CPU; the kernels cross-built by the board builder for an aarch64 target
whose ``-mattr`` names ``asimddp``, run under ``qemu-aarch64 -cpu max`` (and tuned on a board over
a real sshd), the instructions in their disassembly; the refusal on a CPU without dotprod
(``-cpu cortex-a53``), where the portable build still runs; and bad input refused in one line
before any C runs."""

from __future__ import annotations

import gzip
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sshd_board import SshLab, running_lab

import autosched as asc
from autosched.boards import Board, BoardPool, RemoteBuilder
from autosched.hardware import host_arch
from autosched.intrin.dot import dot_intrin, numpy_reference, pack_b, packed_tensors
from autosched.intrin.isa import c_cpu_check, steps_extensions
from autosched.intrin.lowp import matmul_lowp, pick_path
from autosched.ops.schedules import default_schedule
from autosched.records import Record, RecordWarning, append_records, best_record, load_records
from autosched.runner.measure import MeasureErrorNo, MeasureInput, MeasureOption, MeasureResult

CROSS = "c -cc=aarch64-linux-gnu-gcc -num-threads=1"
DOT = CROSS + " -mattr=asimddp"  # kernels may use sdot/udot
# clang builds them only for a CPU with dotprod (see autosched/intrin/neon_dot.py)
CLANG_A76 = "c -cc=clang -mtriple=aarch64-linux-gnu -mcpu=cortex-a76 -num-threads=1 -mattr=asimddp"
RNG = np.random.default_rng(11)


def _operands(kind: str, m: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Random A and (unpacked) B of ``kind``, with the extreme products in row 0 and column 0."""
    lo, dt = (-128, np.int8) if kind == "sdot" else (0, np.uint8)
    a = RNG.integers(lo, lo + 256, (m, k)).astype(dt)
    b = RNG.integers(lo, lo + 256, (k, n)).astype(dt)
    extreme = -128 if kind == "sdot" else 255  # the largest products: (-128)^2, 255^2
    a[0, :], b[:, 0] = extreme, extreme
    return a, b


@pytest.mark.requires("gcc")
@pytest.mark.parametrize("kind", ["sdot", "udot"])
@pytest.mark.parametrize("m, kc", [(12, 64), (13, 128)])  # two k blocks (update); a partial row tile
def test_portable_sdot_udot_paths_are_bit_exact(kind: str, m: int, kc: int) -> None:
    a, b = _operands(kind, m, 32, 128)
    T = packed_tensors(m, 32, 128, kind)
    f = asc.build(matmul_lowp(T, "c -num-threads=1", path="portable", mr=4, kc=kc), T, "c -num-threads=1")
    c = np.zeros((m, 32), np.int32)
    f(a, pack_b(b, 4), c)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))


def _cross_build(kind: str, shape: tuple[int, int, int], target: str, tmp: Path) -> tuple[Path, asc.Task]:
    """The board builder's static aarch64 executable of ``matmul_lowp`` with its default schedule,
    in a new folder under ``tmp``."""
    task = asc.Task("matmul_lowp", (*shape, kind), target=target)
    s, _ = default_schedule(task.workload, target)
    (built,) = RemoteBuilder(cache_dir=tmp / "cache").build([MeasureInput(task, s.steps)])
    assert built.error_no == MeasureErrorNo.NO_ERROR and built.lib_path, built.error_msg
    exe = tmp / f"{kind}-{len(list(tmp.glob(f'{kind}-*')))}" / "candidate"
    exe.parent.mkdir()
    exe.write_bytes(gzip.decompress(Path(built.lib_path).read_bytes()))
    exe.chmod(0o755)
    return exe, task


def _run(exe: Path, cpu: str, a: np.ndarray, b_packed: np.ndarray) -> subprocess.CompletedProcess[str]:
    """Run the board executable under qemu-aarch64 emulating ``cpu`` (writes out0.bin beside it)."""
    a.tofile(exe.parent / "in0.bin")
    b_packed.tofile(exe.parent / "in1.bin")
    args = ["qemu-aarch64", "-cpu", cpu, str(exe), str(exe.parent), "1", "1", "0", "0", "0"]
    return subprocess.run(args, cwd=exe.parent, capture_output=True, text=True, timeout=120)


@pytest.mark.requires("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-objdump", "qemu-aarch64")
@pytest.mark.parametrize(
    "kind, shape, target",
    [
        ("sdot", (16, 48, 256), DOT),
        ("udot", (13, 32, 68), DOT),
        pytest.param("udot", (8, 16, 32), CLANG_A76, marks=pytest.mark.requires("clang")),
    ],
)
def test_neon_dot_kernels_run_under_qemu_bit_exact(
    kind: str, shape: tuple[int, int, int], target: str, tmp_path: Path
) -> None:
    assert pick_path(kind, target) == "dot" and pick_path(kind, CROSS) == "portable"
    exe, _ = _cross_build(kind, shape, target, tmp_path)
    m, n, k = shape
    a, b = _operands(kind, m, n, k)
    run = _run(exe, "max", a, pack_b(b, 4))
    assert run.returncode == 0, run.stderr
    c = np.fromfile(exe.parent / "out0.bin", np.int32).reshape(m, n)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))
    dis = subprocess.run(
        ["aarch64-linux-gnu-objdump", "-d", str(exe)], capture_output=True, text=True, check=True
    )
    used = {w for line in dis.stdout.splitlines() for w in line.split("\t")[2:3]}
    assert kind in used and ({"sdot", "udot"} - {kind}).isdisjoint(used)


@pytest.mark.requires("aarch64-linux-gnu-gcc", "qemu-aarch64")
def test_a_cpu_without_dotprod_refuses_the_kernel_and_runs_the_portable_one(tmp_path: Path) -> None:
    shape = (8, 16, 32)
    a, b = _operands("udot", 8, 16, 32)
    exe, task = _cross_build("udot", shape, DOT, tmp_path)
    run = _run(exe, "cortex-a53", a, pack_b(b, 4))
    assert run.returncode == 5 and not (exe.parent / "out0.bin").exists()
    (line,) = run.stderr.strip().splitlines()
    assert f"kernel '{task.func_name}' uses CPU extension(s) asimddp, which this CPU lacks" in line
    plain, _ = _cross_build("udot", shape, CROSS, tmp_path)  # no -mattr: the portable C path
    run = _run(plain, "cortex-a53", a, pack_b(b, 4))
    assert run.returncode == 0, run.stderr
    c = np.fromfile(plain.parent / "out0.bin", np.int32).reshape(8, 16)
    np.testing.assert_array_equal(c, numpy_reference(a, pack_b(b, 4), "udot"))


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshLab]:
    with running_lab(tmp_path_factory.mktemp("ssh"), "board") as the_lab:
        yield the_lab


@pytest.mark.requires("sshd", "aarch64-linux-gnu-gcc", "qemu-aarch64")
def test_sdot_matmul_tunes_on_a_board_and_is_refused_without_dotprod(lab: SshLab, tmp_path: Path) -> None:
    task = asc.Task("matmul_lowp", (16, 32, 64, "sdot"), target=DOT)
    option = MeasureOption(repeat=2, min_repeat_ms=1.0, run_timeout=60.0)
    log = tmp_path / "board.jsonl"
    board = Board("board", workdir=lab.workdir("max"), launcher=("qemu-aarch64", "-cpu", "max"))
    with BoardPool([board], option, ssh_config=str(lab.ssh_config)) as runner:
        result = asc.tune(task, trials=3, log=log, tuner="random", seed=1, runner=runner, remeasure=0)
    assert result.valid_trials == 3, result.errors  # each checked against numpy's int32 matmul
    sdot = [r for r in load_records(log) if steps_extensions(r.steps) == ("asimddp",)]
    assert sdot and all(r.ok for r in sdot)  # the hand-written default: the sdot kernel, run on the board
    s, _ = default_schedule(task.workload, DOT)
    inp = MeasureInput(task, s.steps)
    board = Board("board", workdir=lab.workdir("a53"), launcher=("qemu-aarch64", "-cpu", "cortex-a53"))
    with BoardPool([board], option, ssh_config=str(lab.ssh_config)) as runner:
        (refused,) = runner.run([inp], runner.make_builder(option).build([inp]))
    assert refused.error_no == MeasureErrorNo.RUNTIME_ERROR and "status 5" in refused.error_msg
    assert "uses CPU extension(s) asimddp, which this CPU lacks" in refused.error_msg


@pytest.mark.requires("gcc")
def test_bad_input_is_refused_in_one_line_before_any_c_runs() -> None:
    T = packed_tensors(8, 16, 32, "udot")
    f = asc.build(matmul_lowp(T, "c", path="portable", mr=4, kc=32), T, "c")
    a, b = _operands("sdot", 8, 16, 32)  # int8 where udot takes uint8
    c = np.full((8, 16), 7, np.int32)
    with pytest.raises(TypeError, match="argument 0 'A': expected dtype uint8, got int8"):
        f(a, pack_b(b.view(np.uint8), 4), c)
    assert (c == 7).all()  # the kernel did not run
    with pytest.raises(ValueError, match="kc must be a positive multiple of 4 for sdot, got 30"):
        dot_intrin("sdot", 4, 30)
    with pytest.raises(ValueError, match="N=40 must divide by 16 and K=64 by 4"):
        packed_tensors(8, 40, 64, "udot")
    with pytest.raises(ValueError, match="N=24 must divide by 16"):
        pack_b(np.zeros((8, 24), np.int8), 4)
    S = packed_tensors(8, 16, 32, "sdot")
    if host_arch() == "x86_64":
        with pytest.raises(
            ValueError, match="the dot path of sdot runs on aarch64, not on this x86_64 target"
        ):
            matmul_lowp(S, "c", path="dot")
    with pytest.raises(ValueError, match="path must be dot, avx2 or portable for sdot, got 'amx'"):
        matmul_lowp(S, DOT, path="amx")
    with pytest.raises(ValueError, match="is not a C identifier"):
        c_cpu_check(("asimddp",), 'x"); system("')


def test_target_extensions_pick_the_neon_path_only_for_aarch64() -> None:
    assert pick_path("sdot", DOT) == "dot" and pick_path("udot", DOT) == "dot"
    if host_arch() == "x86_64":
        assert pick_path("sdot", "c -mattr=asimddp") == "portable"  # an x86 target has no sdot
    assert pick_path("vnni", DOT.replace("asimddp", "avx512_vnni")) == "portable"
    assert pick_path("sdot", CROSS + " -mattr=none") == "portable"
    T = packed_tensors(4, 16, 16, "sdot")
    src = asc.emit(matmul_lowp(T, DOT), T, DOT)
    assert 'asc_cpu_extensions[] = "asimddp"' in src and "vdotq_s32" in src


def test_an_aarch64_boards_sdot_record_is_best_on_any_host(tmp_path: Path) -> None:
    task = asc.Task("matmul_lowp", (16, 32, 64, "sdot"), target=DOT)
    s, _ = default_schedule(task.workload, DOT)
    assert steps_extensions(s.steps) == ("asimddp",)
    plain = asc.create_schedule(task.workload.outputs)
    log = tmp_path / "board.jsonl"
    fast = Record.from_measure(MeasureInput(task, s.steps), MeasureResult((1e-6,)))
    slow = Record.from_measure(MeasureInput(task, plain.steps), MeasureResult((1e-3,)))
    append_records(log, [fast, slow])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RecordWarning)  # not passed over for this CPU's lack of asimddp
        assert best_record(log, task).steps == tuple(s.steps)


@pytest.mark.requires("aarch64-linux-gnu-gcc")
@pytest.mark.parametrize(
    "kind, target",
    [
        ("sdot", DOT.replace("=1", "=2")),
        ("udot", DOT + " -mcpu=cortex-a53"),
        pytest.param("sdot", CLANG_A76, marks=pytest.mark.requires("clang")),
    ],
)
def test_neon_dot_kernels_build_without_warnings(kind: str, target: str, tmp_path: Path) -> None:
    T = packed_tensors(24, 32, 64, kind)
    (tmp_path / "k.c").write_text(asc.emit(matmul_lowp(T, target), T, target))
    t = asc.Target.parse(target)  # cortex-a53 (Armv8.0): only the intrinsic's function has dotprod
    flags = [*t.cflags(shared=False), "-Wall", "-Wextra", "-Werror", "-c", "-o", str(tmp_path / "k.o")]
    cc = subprocess.run(
        [str(t.cc), *flags, str(tmp_path / "k.c")], capture_output=True, text=True, timeout=120
    )
    assert cc.returncode == 0, cc.stderr


@pytest.mark.requires("clang", "aarch64-linux-gnu-gcc")  # the aarch64 headers come with the cross gcc
def test_clang_without_dotprod_flags_stops_with_one_error_line(tmp_path: Path) -> None:
    target = "c -cc=clang -mtriple=aarch64-linux-gnu -num-threads=1 -mattr=asimddp"
    T = packed_tensors(8, 16, 32, "sdot")
    (tmp_path / "k.c").write_text(asc.emit(matmul_lowp(T, target), T, target))
    t = asc.Target.parse(target)
    args = [str(t.cc), *t.cflags(shared=False), "-c", "-o", str(tmp_path / "k.o"), str(tmp_path / "k.c")]
    cc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert cc.returncode != 0  # and no error but this one
    assert [ln for ln in cc.stderr.splitlines() if "error:" in ln] == [
        f"{tmp_path / 'k.c'}:{_line_of(tmp_path / 'k.c', '#error')}:2: error: "
        '"autosched: NEON sdot/udot intrinsics need gcc, or clang with -march=armv8.2-a+dotprod"'
    ]


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)
