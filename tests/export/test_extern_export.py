"""A workload with extern stages tunes (the extern stages stay as written, the computes around them
are tuned), and its export carries the user's C and links its library."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from export_cases import FAST, assert_checked_and_timed, make, record_of

import autosched as asc
from autosched.export.kernel import export_files, export_kernel
from autosched.runner.measure import MeasureOption
from autosched.task import Task

ADD_ONE = "static void add_one(const float* a, float* b, int n) { while (n--) *b++ = *a++ + 1.0f; }"


def _reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum((a + 1) @ b, 0) * 0.5


@asc.workload("test_extern.add_one_matmul_relu", reference=_reference, override=True)
def add_one_matmul_relu(m: int, n: int, k: int) -> list[asc.Tensor]:
    """``relu((A + 1) @ B) / 2``: ``A + 1`` by the user's C, the matmul by OpenBLAS."""
    A = asc.placeholder((m, k), name="A")
    B = asc.placeholder((k, n), name="B")
    A1 = asc.extern(
        (m, k),
        [A],
        lambda ins, outs: asc.call_extern("void", "add_one", ins[0].data, outs[0].data, m * k),
        name="A1",
        c_source=ADD_ONE,
    )
    C = asc.extern(
        (m, n),
        [A1, B],
        lambda ins, outs: asc.call_packed("tvm.contrib.cblas.matmul", ins[0], ins[1], outs[0]),
        name="C",
    )
    D = asc.compute((m, n), lambda i, j: asc.max(C[i, j], 0.0) * 0.5, name="D")
    return [A, B, D]


TASK = Task("test_extern.add_one_matmul_relu", (19, 37, 23), "c -num-threads=1")


@pytest.mark.requires("gcc", "openblas", "make")
def test_extern_workload_tunes_and_exports(tmp_path: Path) -> None:
    option = MeasureOption(repeat=2, min_repeat_ms=1.0, run_timeout=10.0)
    result = asc.tune(TASK, trials=4, log=tmp_path / "log.jsonl", tuner="random", seed=0, option=option,
                      remeasure=0)  # fmt: skip
    assert result.valid_trials == 4 and not result.errors, result
    f = asc.load_best(tmp_path / "log.jsonl", TASK)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((19, 23)).astype(np.float32), rng.standard_normal((23, 37)).astype(np.float32)
    d = np.zeros((19, 37), np.float32)
    f(a, b, d)
    np.testing.assert_allclose(d, _reference(a, b), rtol=1e-4, atol=1e-4)

    out = export_kernel(record_of(TASK, result.best_steps), tmp_path / "k")
    assert "override LDLIBS += '-lopenblas'" in (out / "Makefile").read_text()
    for name in ("kernel.c", "reference.c"):
        text = (out / name).read_text()
        assert ADD_ONE in text and "#include <cblas.h>" in text and "cblas_sgemm(" in text
    assert_checked_and_timed(make(out, "run", FAST), TASK.flops())


def test_export_makefile_quotes_what_it_links() -> None:
    files = export_files(record_of(TASK, ()))
    makefile = files["Makefile"]
    assert "LDLIBS += -lm\noverride LDLIBS += '-lopenblas'\n" in makefile
