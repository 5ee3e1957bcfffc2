"""ir_builder scratch arrays (``ib.allocate``), ``ib.let`` and ``register_func`` callbacks of
``call_packed`` in extern stages, against numpy."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from te_strict import compile_strict

import autosched as asc

pytestmark = pytest.mark.requires("gcc")


def _scratch_extern(n: int, m: int) -> tuple[asc.Tensor, asc.Tensor]:
    """Per row: a scratch copy times two, a let of its first + last element (taken before the
    scratch changes), then ``out = scratch + that``; the scratch lives inside the row loop."""
    A = asc.placeholder((n, m), name="A")

    def body(ins, outs):  # type: ignore[no-untyped-def]
        ib = asc.ir_builder.create()
        a, b = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        with ib.for_range(0, n, name="r", kind="parallel") as r:
            tmp = ib.allocate("float32", (m,), name="tmp", scope="local")
            with ib.for_range(0, m, name="j") as j:
                tmp[j] = a[r * m + j] * 2.0
            ends = ib.let("ends", tmp[0] + tmp[m - 1])
            tmp[0] = -1.0  # the let keeps the value it had
            with ib.for_range(0, m, name="j") as j:
                b[r * m + j] = tmp[j] + ends
        return ib.get()

    return A, asc.extern((n, m), [A], body, name="B")


@pytest.mark.parametrize("n,m", [(4, 8), (3, 7)])
def test_allocate_and_let_inside_a_parallel_loop(n: int, m: int) -> None:
    A, B = _scratch_extern(n, m)
    a = np.random.default_rng(n).random((n, m)).astype(np.float32)
    b = np.zeros_like(a)
    asc.build(asc.create_schedule(B.op), [A, B])(a, b)
    ends = (2 * a[:, 0] + 2 * a[:, -1])[:, None]
    want = 2 * a + ends
    want[:, 0] = -1.0 + ends[:, 0]
    np.testing.assert_allclose(b, want, rtol=1e-6)


def test_allocate_builds_strict_and_bad_sizes_are_errors(tmp_path: Path) -> None:
    A, B = _scratch_extern(3, 5)
    compile_strict(asc.create_schedule(B.op), [A, B], tmp_path)
    ib = asc.ir_builder.create()
    with pytest.raises(ValueError, match="shape must be positive ints"):
        ib.allocate("float32", (asc.size_var("n"),))
    with pytest.raises(ValueError, match="more than a stack array may take"):
        ib.allocate("float64", (1024, 1024))


@asc.register_func("test_te.addk")
def _addk(x: np.ndarray, y: np.ndarray, k: float) -> None:
    y[:] = x + k  # the arrays are the kernel's memory: writes land in the output


def _packed_dag(n: int) -> tuple[asc.Tensor, asc.Tensor]:
    A = asc.placeholder((n, 3), name="A")
    B = asc.extern(
        A.shape, [A], lambda ins, outs: asc.call_packed("test_te.addk", ins[0], outs[0], 1.5), name="B"
    )
    return A, B


def test_register_func_callback_from_the_kernel_as_in_tvm_tutorial() -> None:
    A, B = _packed_dag(5)
    C = asc.compute((5, 3), lambda i, j: B[i, j] * 2, name="C")  # a compute reads the extern stage
    s = asc.create_schedule(C.op)
    a = np.random.default_rng(0).random((5, 3)).astype(np.float32)
    c = np.zeros_like(a)
    asc.build(s, [A, C])(a, c)
    np.testing.assert_allclose(c, (a + 1.5) * 2, rtol=1e-6)
    asc.register_func("test_te.addk", lambda x, y, k: y.__setitem__(slice(None), x - k), override=True)
    try:
        asc.build(s, [A, C])(a, c)  # looked up by name at each call
        np.testing.assert_allclose(c, (a - 1.5) * 2, rtol=1e-6)
    finally:
        asc.register_func("test_te.addk", _addk, override=True)
    with pytest.raises(ValueError, match="already registered"):
        asc.register_func("test_te.addk", _addk)
    with pytest.raises(ValueError, match=r"register a Python one first \(@asc.register_func"):
        asc.call_packed("test_te.nowhere", A)


def test_a_kernel_without_the_hook_stops_with_a_message(tmp_path: Path) -> None:
    """The call site compiles as strict C99; run outside the registering process (a plain C main)
    it stops naming the function instead of calling a null pointer."""
    A, B = _packed_dag(4)
    s = asc.create_schedule(B.op)
    compile_strict(s, [A, B], tmp_path)
    main = "int main(void) { float a[12] = {0}, b[12]; return default_function(a, b); }\n"
    (tmp_path / "prog.c").write_text(asc.emit(s, [A, B], portable=True) + main)
    gcc = shutil.which("gcc")
    assert gcc is not None
    subprocess.run([gcc, "-std=c99", str(tmp_path / "prog.c"), "-o", str(tmp_path / "prog")], check=True)
    done = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert 'call_packed "test_te.addk" runs a Python function' in done.stderr
