"""Embedded kernels (``export --embedded``): every built-in operator's default schedule, and a
program tuned on this host, built with arm-none-eabi-gcc -Wall -Werror for a Cortex-M4 and a
Cortex-M55 and run on QEMU's emulated MPS2/MPS3 boards against numpy; their C holds no heap, stdio
or OpenMP; what an embedded kernel cannot hold is refused in one line."""

from __future__ import annotations

import random
import re
import subprocess
from pathlib import Path

import pytest
from embedded_cases import EMBEDDED_CASES

import autosched as asc
from autosched.export.board import board_for, qemu_command
from autosched.export.embedded import EmbeddedError, embedded_kernel, embedded_source
from autosched.export.mcu import export_embedded
from autosched.ops import get_workload
from autosched.ops.schedules import default_schedule
from autosched.space.generated import SketchSpace
from autosched.target import Target, TargetError
from autosched.task import Task

M4 = "c -cc=arm-none-eabi-gcc -mcpu=cortex-m4 -mfloat-abi=hard"
M55 = "c -cc=arm-none-eabi-gcc -mcpu=cortex-m55 -mfloat-abi=hard"
BOARD = pytest.mark.requires("arm-none-eabi-gcc", "qemu-system-arm", "make")

#: what an embedded kernel may leave undefined: the math functions it calls and the block copies
#: gcc may emit; never an allocator, stdio or the OpenMP runtime
ALLOWED_UNDEFINED = re.compile(
    r"(exp|log|pow|sqrt|tanh|erf|floor|ceil|fabs|fmax|fmin|round|rint|nearbyint|trunc|fmod|sin|cos)f?"
    r"|mem(cpy|set|move)|__aeabi_\w+"
)


def _default(name: str, args: tuple, target: str) -> tuple[Task, tuple]:
    task = Task(get_workload(name, args), target=target)
    return task, default_schedule(task.workload, task.target)[0].steps


def run_on_board(out: Path, target: str = M4) -> subprocess.CompletedProcess[str]:
    """Build an exported directory with its Makefile (-Wall -Werror), run check.elf under QEMU."""
    subprocess.run(["make", "-s", "-C", str(out)], capture_output=True, text=True, timeout=300, check=True)
    command = [*qemu_command(board_for(Target.parse(target))), str(out / "check.elf")]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def undefined_symbols(obj: Path) -> set[str]:
    out = subprocess.run(["arm-none-eabi-nm", "-u", str(obj)], capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}


@BOARD
@pytest.mark.parametrize("target", [M4, M55], ids=["cortex-m4", "cortex-m55"])
@pytest.mark.parametrize(("name", "args"), EMBEDDED_CASES, ids=[f"{n}{a}" for n, a in EMBEDDED_CASES])
def test_default_schedule_matches_numpy_on_the_board(
    name: str, args: tuple, target: str, tmp_path: Path
) -> None:
    task, steps = _default(name, args, target)
    export = export_embedded(task, steps, tmp_path)
    run = run_on_board(tmp_path, target)
    assert run.returncode == 0, run.stdout + run.stderr
    n_out = len(task.workload.outputs)
    assert run.stdout.count("0 of ") == n_out and run.stdout.endswith("check: OK\n"), run.stdout
    source = (tmp_path / "kernel.c").read_text()
    assert not re.search(r"malloc|calloc|free\(|stdio|printf|omp parallel|_POSIX", source)
    assert all(ALLOWED_UNDEFINED.fullmatch(s) for s in undefined_symbols(tmp_path / "kernel.o")), \
        undefined_symbols(tmp_path / "kernel.o")
    assert export.sizes is not None and export.sizes.flash > 0 and export.sizes.ram == 0
    header = (tmp_path / "kernel.h").read_text()
    assert f"{export.kernel.name.upper()}_WORKSPACE_BYTES {export.kernel.workspace}u" in header
    assert f"flash {export.sizes.flash} bytes" in header


@BOARD
def test_a_program_tuned_here_runs_retargeted_on_both_cores(tmp_path: Path) -> None:
    """A program tuned for this host (parallel loops, AVX-width vectors) is printed for each core:
    serial, with MVE vectors on the M55 and none on the M4, and still matches numpy."""
    log = tmp_path / "mm.jsonl"
    asc.tune(asc.Task("matmul", (24, 20, 18, "float32"), target="c"), trials=4, log=str(log), seed=1)
    record = next(r for r in asc.load_records(str(log)) if r.ok)
    for target, vectors in ((M4, False), (M55, True)):
        out = tmp_path / target.split("=")[2].split()[0]
        task = Task(get_workload("matmul", (24, 20, 18, "float32")), target=target)
        export_embedded(task, record.steps, out)
        source = (out / "kernel.c").read_text()
        assert "#pragma omp" not in source and ("vector_size(16)" in source) == vectors
        run = run_on_board(out, target)
        assert run.returncode == 0 and run.stdout.endswith("check: OK\n"), run.stdout + run.stderr


#: workloads whose generated programs (tiles, cache stages, parallel and vector loops) are re-targeted
SAMPLED = [("conv2d_nchw", (1, 3, 9, 11, 4, 3, 3, 2, 1, 2)),
           ("fused_conv2d", (1, 6, 9, 9, 8, 3, 3, 1, 1, 1, "bias,relu")), ("dense", (5, 7, 9)),
           ("softmax", (5, 7)), ("avg_pool2d", (1, 2, 9, 10, 3, 2, 1)), ("layer_norm", (3, 5, 1e-5))]


@BOARD
@pytest.mark.parametrize("target", [M4, M55], ids=["cortex-m4", "cortex-m55"])
@pytest.mark.parametrize(("name", "args"), SAMPLED, ids=[f"{n}{a}" for n, a in SAMPLED])
def test_programs_generated_for_a_linux_cpu_run_retargeted(name: str, args: tuple, target: str,
                                                           tmp_path: Path) -> None:
    """Programs drawn from the sketch space of a 4-core AVX2 machine (what tuning there measures)
    print for each core and match numpy on its board."""
    wl = get_workload(name, args)
    space = SketchSpace(wl, asc.Target.parse("c -cc=gcc -mcpu=x86-64-v3 -cores=4 -vector-bytes=32"))
    rng = random.Random(11)
    for k in range(2):
        steps = space.steps(space.sample(rng))
        export_embedded(Task(wl, target=target), steps, tmp_path / str(k))
        run = run_on_board(tmp_path / str(k), target)
        assert run.returncode == 0 and run.stdout.endswith("check: OK\n"), run.stdout + run.stderr


@BOARD
@pytest.mark.parametrize(("target", "name", "args"), [
    ("c -cc=arm-none-eabi-gcc -mcpu=cortex-m7", "fused_conv2d", (1, 6, 9, 9, 8, 3, 3, 1, 1, 1, "bias,relu")),
    ("c -cc=arm-none-eabi-gcc -mcpu=cortex-m7", "softmax", (1, 13, "float64")),  # a double-precision FPU
    ("c -cc=arm-none-eabi-gcc -mcpu=cortex-m3", "matmul", (4, 3, 11, "int32")),  # no FPU: integers
    # Armv8-M with TrustZone: runs in the secure state, from the secure aliases of the board's RAM
    ("c -cc=arm-none-eabi-gcc -mcpu=cortex-m33 -mfloat-abi=hard", "fused_conv2d",
     (1, 6, 9, 9, 8, 3, 3, 1, 1, 1, "bias,relu")),
    ("c -cc=arm-none-eabi-gcc -mcpu=cortex-m33 -mfloat-abi=hard", "softmax", (5, 7)),
], ids=["m7-conv", "m7-float64", "m3-int32", "m33-conv", "m33-softmax"])
def test_other_cores_on_their_boards(target: str, name: str, args: tuple, tmp_path: Path) -> None:
    task, steps = _default(name, args, target)
    export_embedded(task, steps, tmp_path)
    run = run_on_board(tmp_path, target)
    assert run.returncode == 0 and run.stdout.endswith("check: OK\n"), run.stdout + run.stderr


@BOARD
def test_static_workspace_and_a_mismatch_reported(tmp_path: Path) -> None:
    """With static storage the kernel takes no workspace; a wrong expected value fails the run."""
    task, steps = _default("conv2d_nchw", (1, 3, 9, 11, 4, 3, 3, 2, 1, 2), M4)
    export = export_embedded(task, steps, tmp_path, static=True)
    assert export.kernel.workspace > 0 and "asc_workspace" not in export.kernel.params
    assert f"static unsigned char asc_workspace[{export.kernel.workspace}]" in export.kernel.source
    assert export.sizes is not None and export.sizes.ram >= export.kernel.workspace  # bss holds it
    assert run_on_board(tmp_path).returncode == 0
    check = tmp_path / "check.c"
    text = check.read_text()
    first = re.search(r"want\d+\[\d+\] = \{\n  (-?[0-9.e+-]+)f", text)
    assert first is not None
    check.write_text(text.replace(first.group(0), first.group(0).replace(first.group(1), "1234.5"), 1))
    run = run_on_board(tmp_path)
    assert run.returncode == 1 and "1 of 80 elements outside tolerance" in run.stdout
    assert run.stdout.endswith("check: FAILED\n")


@pytest.mark.requires("arm-none-eabi-gcc")
def test_workspace_must_be_given_aligned() -> None:
    task, steps = _default("avg_pool2d", (1, 2, 9, 10, 3, 2, 1), M4)
    kernel = embedded_kernel(task, steps, "pool")
    assert kernel.workspace > 0 and kernel.params.endswith("unsigned char* restrict asc_workspace")
    assert "if (asc_workspace == NULL || ((uintptr_t)asc_workspace & 7u) != 0) return -1;" in kernel.source


def test_refusals_are_one_line() -> None:
    """A core without an FPU given a float kernel, double precision on a single-precision FPU, a
    Linux-class target, sizes known only at run time (a heap), and user C: each one line."""
    cases = [
        ("matmul", (4, 4, 4), "c -cc=arm-none-eabi-gcc -mcpu=cortex-m3", TargetError,
         "has no floating-point unit"),
        ("matmul", (4, 4, 4), "c -cc=arm-none-eabi-gcc -mcpu=cortex-m4 -mfloat-abi=soft", TargetError,
         "built with -mfloat-abi=soft"),
        ("matmul", (4, 4, 4, "float64"), M4, TargetError, "single precision"),
        ("matmul", (4, 4, 4), "c -cc=gcc", TargetError, "needs a bare-metal target"),
    ]
    for name, args, target, error, message in cases:
        task, steps = _default(name, args, target)
        with pytest.raises(error, match=message) as caught:
            embedded_kernel(task, steps, "k")
        assert "\n" not in str(caught.value)
    task, steps = _default("matmul", (4, 3, 11, "int32"), "c -cc=arm-none-eabi-gcc -mcpu=cortex-m0")
    assert "int32_t* restrict C" in embedded_kernel(task, steps, "k").source  # integers need no FPU
    n = asc.size_var("n")
    X = asc.placeholder((n,), name="X")
    Y = asc.compute((n,), lambda i: X[i] * 2.0, name="Y")
    func = asc.lower(asc.create_schedule(Y.op), [X, Y], "twice")
    m4 = asc.Target.parse(M4)
    with pytest.raises(EmbeddedError, match="symbolic sizes"):
        embedded_source(func, m4)
    A = asc.placeholder((4,), name="A")
    add_one = "static void add_one(const float* a, float* b, int n) { while (n--) *b++ = *a++ + 1.0f; }"
    B = asc.extern((4,), [A], lambda ins, outs: asc.call_extern("void", "add_one", ins[0].data,
                                                                 outs[0].data, 4), name="B", c_source=add_one)
    with pytest.raises(EmbeddedError, match="calls user C or libraries"):
        embedded_source(asc.lower(asc.create_schedule(B.op), [A, B], "user"), m4)
