"""``export_kernel`` and ``autosched export``: the exported directory builds with make and checks
itself against the unscheduled reference, natively, in strict C99 and cross-compiled for aarch64."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from export_cases import FAST, assert_checked_and_timed, make, record_of

from autosched.cli import main
from autosched.export.kernel import export_kernel
from autosched.records import Record
from autosched.runner import elf_machine
from autosched.runner.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autosched.schedule.steps import Step
from autosched.space.generated import SketchSpace
from autosched.task import Task


#: keeps `make run` short: each timed repeat lasts 1 ms instead of 20
def sampled(task: Task, seed: int = 0) -> tuple[Step, ...]:
    """A program of the task's generated space."""
    space = SketchSpace(task.workload, task.target)
    return space.steps(space.sample(random.Random(seed)))


MATMUL = Task("matmul", (33, 40, 17), "c -num-threads=1")


@pytest.fixture(scope="module")
def matmul() -> Record:
    return record_of(MATMUL, sampled(MATMUL))


@pytest.mark.requires("gcc", "make")
def test_export_builds_checks_and_times(matmul: Record, tmp_path: Path) -> None:
    out = export_kernel(matmul, tmp_path / "k")
    assert sorted(p.name for p in out.iterdir()) == [
        "Makefile", "kernel.c", "kernel.h", "main.c", "reference.c", "reference.h"
    ]  # fmt: skip
    header = (out / "kernel.h").read_text()
    assert "#ifndef MATMUL_KERNEL_H" in header
    assert "int matmul_kernel(const float* A, const float* B, float* C);" in header
    assert re.search(r"A\s+float32\[33, 17\]\s+input", header)
    assert re.search(r"C\s+float32\[33, 40\]\s+output", header)
    assert "matmul(33,40,17,'float32',False)" in header and "0.020000 ms" in header
    kernel = (out / "kernel.c").read_text()
    assert "__time" not in kernel and "__bench" not in kernel and "default_function" not in kernel
    assert kernel.endswith("  return 0;\n}\n")  # the kernel, without the tuner's timing harness
    assert "#define FLOPS 44880.0" in (out / "main.c").read_text()  # 2 * 33 * 40 * 17
    assert "\nOPENMP = \n" in (out / "Makefile").read_text()  # a single-threaded program

    built = make(out)
    assert built.returncode == 0, built.stderr
    assert (out / "bench").is_file()
    assert_checked_and_timed(make(out, "run", FAST), MATMUL.flops())
    assert make(out, "clean").returncode == 0 and not (out / "bench").exists()


@pytest.mark.requires("gcc", "make")
@pytest.mark.parametrize(
    ("where", "code", "bad"),
    [("end", "  C[7] += 0.5f;\n", 1), ("start", "  return 0;\n", 1320)],
    ids=["one-wrong-element", "writes-nothing"],
)
def test_a_wrong_kernel_fails_the_check(
    matmul: Record, tmp_path: Path, where: str, code: str, bad: int
) -> None:
    out = export_kernel(matmul, tmp_path / "k")
    kernel = out / "kernel.c"
    text = kernel.read_text()
    at = (
        text.rindex("  return 0;\n}")
        if where == "end"
        else text.index("{\n", text.index("int matmul_kernel(")) + 2
    )
    kernel.write_text(text[:at] + code + text[at:])
    run = make(out, "run", FAST)
    assert run.returncode != 0
    assert "check: FAILED" in run.stdout and f" {bad} of 1320 elements outside tolerance" in run.stdout
    assert "time:" not in run.stdout


@pytest.mark.requires("gcc", "make")
def test_parallel_conv2d_builds_with_openmp(tmp_path: Path) -> None:
    task = Task("conv2d_nchw", (1, 3, 9, 11, 4, 3, 3, 1, 1), "c -num-threads=2")
    for seed in range(100):  # the first sampled program with a parallel loop
        out = export_kernel(record_of(task, sampled(task, seed)), tmp_path / "conv", name="conv")
        if "#pragma omp" in (out / "kernel.c").read_text():
            break
    else:
        pytest.fail("none of 100 sampled programs has a parallel loop")
    assert "OPENMP = -fopenmp" in (out / "Makefile").read_text()
    assert "int conv(" in (out / "kernel.h").read_text()
    assert "int conv_reference(" in (out / "reference.h").read_text()
    assert_checked_and_timed(make(out, "run", FAST), task.flops())


@pytest.mark.requires("gcc", "make")
def test_portable_export_is_strict_c99(matmul: Record, tmp_path: Path) -> None:
    out = export_kernel(matmul, tmp_path / "p", portable=True)
    kernel = (out / "kernel.c").read_text()
    assert "__attribute__" not in kernel and "#pragma" not in kernel
    strict = "CFLAGS=-std=c99 -pedantic -Wall -Wextra -Werror -O2"
    assert_checked_and_timed(make(out, "run", strict, FAST), MATMUL.flops())


@pytest.mark.requires("aarch64-linux-gnu-gcc", "qemu-aarch64", "make")
def test_cross_build_runs_under_qemu(matmul: Record, tmp_path: Path) -> None:
    out = export_kernel(matmul, tmp_path / "arm")
    cross = ["CC=aarch64-linux-gnu-gcc", "CFLAGS=-O2", "RUN_WITH=qemu-aarch64 -L /usr/aarch64-linux-gnu"]
    assert_checked_and_timed(make(out, "run", *cross, FAST), MATMUL.flops())
    assert elf_machine(out / "bench") == "aarch64"


def test_failed_record_is_not_exported(tmp_path: Path) -> None:
    task = Task("matmul", (8, 8, 8), "c -num-threads=1")
    failed = MeasureResult((), MeasureErrorNo.COMPILE_ERROR, "boom", timestamp=1.8e9)
    record = Record.from_measure(MeasureInput(task, ()), failed)
    with pytest.raises(ValueError, match="no valid measurement"):
        export_kernel(record, tmp_path / "x")


@pytest.mark.requires("gcc", "make")
def test_cli_export_writes_a_kernel_that_runs(matmul: Record, tmp_path: Path) -> None:
    log = tmp_path / "tune.jsonl"
    slower = record_of(Task("matmul", (33, 40, 17), "c -num-threads=1"), (), costs=(1.0,))
    log.write_text(slower.to_line() + matmul.to_line())
    assert main(["export", str(log), "--out", str(tmp_path / "cli")]) == 0
    best = export_kernel(matmul, tmp_path / "api") / "kernel.c"
    assert (tmp_path / "cli" / "kernel.c").read_text() == best.read_text()
    assert_checked_and_timed(make(tmp_path / "cli", "run", FAST), MATMUL.flops())


@pytest.mark.requires("aarch64-linux-gnu-gcc", "qemu-aarch64", "make")
def test_an_exported_sdot_kernel_checks_the_cpu_first(tmp_path: Path) -> None:
    from autosched.intrin.lowp import matmul_lowp

    target = "c -cc=aarch64-linux-gnu-gcc -num-threads=1 -mattr=asimddp"
    task = Task("matmul_lowp", (16, 32, 64, "sdot"), target)
    record = record_of(task, matmul_lowp(task.workload.tensors(), target).steps)
    out = export_kernel(record, tmp_path / "sdot", cc="aarch64-linux-gnu-gcc")
    assert "vdotq_s32" in (out / "kernel.c").read_text()
    run = ["run", "CFLAGS=-O2", FAST]
    assert_checked_and_timed(
        make(out, *run, "RUN_WITH=qemu-aarch64 -cpu max -L /usr/aarch64-linux-gnu"), task.flops()
    )
    refused = make(out, *run, "RUN_WITH=qemu-aarch64 -cpu cortex-a53 -L /usr/aarch64-linux-gnu")
    assert refused.returncode != 0 and "check:" not in refused.stdout
    assert "kernel 'matmul_lowp_kernel' uses CPU extension(s) asimddp, which this CPU lacks" in refused.stderr
