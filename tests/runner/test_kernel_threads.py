"""Built kernels in a multi-threaded application: a call releases the GIL while C runs, and one
kernel may be called from many threads at once."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import autosched as asc

pytestmark = pytest.mark.requires("gcc")

REPO = Path(__file__).resolve().parents[2]

#: a kernel that spins in C until another Python thread writes A[0]: it returns only if the call
#: released the GIL (else that thread can never run, and the process hangs until the timeout)
WAITER = textwrap.dedent(
    """
    import threading, time
    import numpy as np
    from autosched.emit_c import HEADER, timing_entries
    from autosched.runner import ArgSpec, compile_shared, load_kernel
    from autosched.target import Target

    body = "while (((volatile float *)A)[0] == 0.0f) {}\\n  for (int i = 0; i < 8; ++i) C[i] = A[i] + B[i];"
    source = f"{HEADER}\\nint waiter(float* A, float* B, float* C) {{\\n  {body}\\n  return 0;\\n}}\\n"
    params = [("float", "A"), ("float", "B"), ("float", "C")]
    lib = compile_shared(source + timing_entries("waiter", params), Target.parse("c -num-threads=1"))
    specs = [ArgSpec(name, (8,), "float32", name == "C") for name in "ABC"]
    kernel = load_kernel(lib, "waiter", specs)
    a, b, c = np.zeros(8, np.float32), np.ones(8, np.float32), np.zeros(8, np.float32)

    def release_the_kernel():
        time.sleep(0.2)  # the kernel is spinning in C by now
        a[0] = 1.0

    helper = threading.Thread(target=release_the_kernel)
    helper.start()
    kernel(a, b, c)
    helper.join()
    print("returned", float(c[0]))
    """
)


def test_a_kernel_call_releases_the_gil(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        out = subprocess.run(
            [sys.executable, "-c", WAITER], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the kernel call held the GIL: the thread that ends its loop never ran")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "returned 2.0"


def test_one_kernel_called_from_many_threads_at_once() -> None:
    n = 48
    A = asc.placeholder((n, n), name="A")
    B = asc.placeholder((n, n), name="B")
    k = asc.reduce_axis(n, name="k")
    C = asc.compute((n, n), lambda i, j: asc.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = asc.create_schedule(C.op)
    i, j = s[C].op.axis
    s[C].tile(i, j, 8, 16)
    f = asc.build(s, [A, B, C], target="c -num-threads=1")
    rng = np.random.default_rng(7)
    jobs = [(rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)) for _ in range(32)]

    def call(pair: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        out = np.empty((n, n), np.float32)
        for _ in range(20):
            f(pair[0], pair[1], out)
        return out

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(call, jobs))
    for (a, b), got in zip(jobs, results, strict=True):
        np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


def test_share_cores_sets_the_pools_before_numpy_loads(tmp_path: Path) -> None:
    script = (
        "import autosched, os; print(os.environ['OMP_WAIT_POLICY'], os.environ['OPENBLAS_THREAD_TIMEOUT'])"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "AUTOSCHED_SHARE_CORES": "1"}
    for name in ("OMP_WAIT_POLICY", "OPENBLAS_THREAD_TIMEOUT"):
        env.pop(name, None)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == ["passive", "4"], out.stderr
    assert "warning" not in out.stderr  # it came before OpenBLAS was loaded
    late = subprocess.run(
        [sys.executable, "-c", "import numpy, autosched; autosched.share_cores()"],
        env={**env, "AUTOSCHED_SHARE_CORES": "0"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert late.returncode == 0
    assert late.stderr.startswith("autosched: warning: share_cores() came after OpenBLAS was loaded"), (
        late.stderr
    )
